"""Records/s through one Spark driver with the groupcoord source, against a plain confluent-kafka loop.

    python -m bench.spark_source_bench [--records 720000] [--partitions 24] [--quick]

Both read the same partitions of one topic in the embedded Kafka from offset 0 to the end:

- plain loop: one confluent-kafka Consumer, assign + consume(10,000) in a loop, touching each record's
  offset, key and value (what the source puts in a row), on one Python thread; timed from the first record
  to the last, best of 3;
- groupcoord source: one Spark driver in this process (local[2]) with `spark.readStream.format("groupcoord")`
  against an in-process coordinator, `maxOffsetsPerTrigger` per batch, a `noop` sink (every row is built and
  handed to the JVM as Arrow, then dropped) and `trigger(availableNow=True)`; once with 2 tasks per batch
  (both cores read), once with 1 (one core reads, as the plain loop does). Its rate is given two ways:
  steady (rows / trigger time of every batch after the first, which pays for starting Python workers) and
  end to end (rows / time from `start()` to the end, with the group join and the first batch).

Target (2 cores): the source's steady rate (2 tasks) at least half of the plain loop's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOPIC = "bench"


@dataclass(frozen=True, slots=True)
class Result:
    reader: str
    records: int
    seconds: float
    note: str = ""

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


def produce(bootstrap: str, partitions: int, records: int, value_bytes: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 500000, "log.connection.close": False})
    value = b"v" * value_bytes
    keys = [f"key-{i:04d}".encode() for i in range(1000)]
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, key=keys[i % 1000], value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(60) != 0:
        raise RuntimeError("the producer could not deliver every record")


def plain_loop(bootstrap: str, partitions: int, ends: dict[int, int]) -> Result:
    """The baseline: what one Python thread reading these partitions with confluent-kafka achieves."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-plain-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "earliest",
                         "fetch.wait.max.ms": 10, "log.connection.close": False})
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        left = set(range(partitions))
        records = value_bytes = 0
        last = 0
        start: float | None = None  # from the first record: connecting and the first fetch are not counted
        while left:
            for m in consumer.consume(num_messages=10000, timeout=1.0):
                err = m.error()
                if err is not None:
                    partition, offset = int(m.partition() or 0), int(m.offset() or 0)
                    if err.code() == KafkaError._PARTITION_EOF and offset >= ends[partition]:
                        left.discard(partition)
                    continue
                if start is None:
                    start = time.perf_counter()
                last = int(m.offset() or 0)
                m.key()
                value_bytes += len(m.value() or b"")
                records += 1
        seconds = time.perf_counter() - (start or time.perf_counter())
    finally:
        consumer.close()
    assert last >= 0
    return Result("plain confluent-kafka loop (1 thread)", records, seconds, "best of 3, from the first record")


def spark_source(bootstrap: str, master: str, task_counts: list[int], per_batch: int,
                 records: int) -> list[tuple[Result, Result]]:
    """One Spark session; one availableNow query per task count, each in a new group (so from offset 0)."""
    from confluent_kafka.admin import AdminClient

    from groupcoord.clients.spark_driver import spark_session
    from groupcoord.clients.spark_source import GroupcoordDataSource
    from groupcoord.coordinator.core.config import BrokerConfig
    from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
    from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource

    partitions = len(AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
                     .topics[TOPIC].partitions)
    # Spark first: its JVM is forked before the coordinator's gRPC threads exist.
    spark = spark_session(master, "groupcoord-bench", "1g", 2)
    server = ServerThread(ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping({
        "group.consumer.min.heartbeat.interval.ms": 100, "group.consumer.heartbeat.interval.ms": 500,
        "group.consumer.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 10000,
    }), metadata_source=StaticMetadataSource({TOPIC: partitions}))).start()
    out: list[tuple[Result, Result]] = []
    try:
        spark.dataSource.register(GroupcoordDataSource)
        for tasks in task_counts:
            df = (spark.readStream.format("groupcoord").option("coordinator", server.address)
                  .option("group", f"bench-{uuid.uuid4().hex[:6]}").option("topics", TOPIC)
                  .option("bootstrap.servers", bootstrap).option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", str(per_batch)).option("tasksPerBatch", str(tasks)).load())
            checkpoint = Path(tempfile.mkdtemp(prefix="groupcoord-bench-"))
            try:
                start = time.perf_counter()
                query = (df.writeStream.format("noop").trigger(availableNow=True)
                         .option("checkpointLocation", str(checkpoint)).start())
                query.awaitTermination()
                total_s = time.perf_counter() - start
                if query.exception() is not None:
                    raise RuntimeError(f"the query failed: {query.exception()}")
                progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
            finally:
                shutil.rmtree(checkpoint, ignore_errors=True)
            read = sum(p["numInputRows"] for p in progress)
            if read != records:
                raise RuntimeError(f"the source read {read} records, expected {records}")
            steady = progress[1:] or progress
            rows = sum(p["numInputRows"] for p in steady)
            seconds = sum(p["durationMs"]["triggerExecution"] for p in steady) / 1000
            label = f"groupcoord source, {master}, {tasks} task(s)/batch"
            out.append((Result(f"{label}: steady", rows, seconds, f"{len(steady)} batches of <= {per_batch:,}"),
                        Result(f"{label}: end to end", read, total_s, "incl. join + first batch")))
            print(f"{label}: {out[-1][0].rate:,.0f} records/s steady", flush=True)
    finally:
        spark.stop()
        server.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.spark_source_bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    # The embedded Kafka keeps about 5 MB per partition (older records are dropped): ~30,000 records of
    # 100 bytes per partition fit.
    p.add_argument("--records", type=int, default=720_000)
    p.add_argument("--partitions", type=int, default=24)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--per-batch", type=int, default=120_000, help="maxOffsetsPerTrigger")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--quick", action="store_true", help="240,000 records in 8 partitions, batches of 60,000")
    args = p.parse_args(argv)
    if args.quick:
        args.records, args.partitions, args.per_batch = 240_000, 8, 60_000

    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    from groupcoord.embedded_kafka import EmbeddedKafka

    print(f"{args.records:,} records of {args.value_bytes} bytes in {args.partitions} partitions; "
          f"{os.cpu_count()} cores", flush=True)
    results: list[Result] = []
    with EmbeddedKafka(topics={TOPIC: args.partitions}) as kafka:
        t = time.perf_counter()
        produce(kafka.bootstrap_servers, args.partitions, args.records, args.value_bytes)
        print(f"produced in {time.perf_counter() - t:.1f} s", flush=True)
        admin: Any = AdminClient({"bootstrap.servers": kafka.bootstrap_servers, "log.connection.close": False})
        futures = admin.list_offsets({TopicPartition(TOPIC, i): OffsetSpec.latest() for i in range(args.partitions)})
        ends = {tp.partition: f.result(timeout=10).offset for tp, f in futures.items()}
        starts = admin.list_offsets({TopicPartition(TOPIC, i): OffsetSpec.earliest()
                                     for i in range(args.partitions)})
        if any(f.result(timeout=10).offset != 0 for f in starts.values()):
            raise SystemExit("the embedded Kafka dropped old records (bounded log): use fewer --records")
        del admin
        plain = max((plain_loop(kafka.bootstrap_servers, args.partitions, ends) for _ in range(3)),
                    key=lambda r: r.rate)
        results.append(plain)
        print(f"plain loop: {plain.rate:,.0f} records/s", flush=True)
        runs = spark_source(kafka.bootstrap_servers, args.master, [2, 1], args.per_batch, args.records)
        for steady_run, end_to_end in runs:
            results += [steady_run, end_to_end]
        steady = runs[0][0]

    print()
    print(f"{'reader':<60} {'records':>10} {'seconds':>8} {'records/s':>11} {'vs plain':>9}  note")
    for r in results:
        print(f"{r.reader:<60} {r.records:>10,} {r.seconds:>8.2f} {r.rate:>11,.0f} {r.rate / plain.rate:>8.2f}x  "
              f"{r.note}")
    ok = steady.rate >= 0.5 * plain.rate
    print(f"\ntarget: steady source rate >= 0.5x the plain loop: {'met' if ok else 'NOT met'} "
          f"({steady.rate / plain.rate:.2f}x)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
