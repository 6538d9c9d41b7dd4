"""Spark's Kafka source options, checked against Spark's Kafka source itself: for each option groupcoord's source
accepts, the same data is read with ``format("kafka")`` (spark-sql-kafka-0-10 from Maven Central,
groupcoord.spark_kafka_jars) and ``format("groupcoord")``, and the rows must be equal: topic, partition, offset,
timestamp, key, value and headers.

One Spark session (local[1], in this process) and the real Kafka 4.4 broker serve the module (DeleteRecords and
ListOffsets by timestamp need it, and Spark's Java clients do not talk to librdkafka's mock). Every query runs
with ``Trigger.AvailableNow`` into a ``foreachBatch`` sink that collects the rows, except the ``latest`` case,
which must see records produced after the query started.

Where the meanings differ on purpose, the test says so: groupcoord applies the starting options to a partition
its group has no committed offset for (every group here is new, so that is every partition).
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.errors import StreamingQueryException

from groupcoord.clients.spark_kafka_read import close_cached_consumers
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.kafka_broker import KafkaBroker
from groupcoord.spark_kafka_jars import kafka_source_jars

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

RECORDS = 60  # per partition
Row = tuple[Any, ...]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """Started before the coordinator (PySpark forks its JVM; no gRPC threads may exist by then)."""
    from groupcoord.clients.spark_driver import spark_session

    session = spark_session("local[1]", "option-parity", "768m", 1, jars=kafka_source_jars().jars)
    from groupcoord.clients.spark_source import GroupcoordDataSource

    session.dataSource.register(GroupcoordDataSource)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def kafka(spark: Any, kafka_broker: KafkaBroker) -> Iterator[KafkaBroker]:
    yield kafka_broker
    close_cached_consumers()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _produce(kafka: KafkaBroker, topics: dict[str, int], base_ms: int) -> None:
    """RECORDS per partition; record i has timestamp base + i s, key k<i> (none for i % 5 == 4), and two headers
    on even offsets (one with a null value), none on odd ones."""
    # Idempotent: a retried batch (the new topic's leader not ready yet) must not land after the next one, or
    # record i would not sit at offset i.
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5, "enable.idempotence": True})
    for topic, partitions in topics.items():
        kafka.create_topic(topic, partitions)
        for p in range(partitions):
            for i in range(RECORDS):
                headers: list[tuple[str, bytes | None]] | None = \
                    [("h", b"v%d" % i), ("n", None)] if i % 2 == 0 else None
                producer.produce(topic, key=None if i % 5 == 4 else b"k%d" % i, value=b"%s-%d-%d" % (
                    topic.encode(), p, i), partition=p, timestamp=base_ms + i * 1000, headers=headers)
    assert producer.flush(30) == 0


def _rows(batch_rows: list[Any], headers: bool) -> list[Row]:
    out = []
    for r in batch_rows:
        row: Row = (r["topic"], r["partition"], r["offset"], r["timestamp"], r["key"], r["value"])
        if headers:
            hs = r["headers"]
            row += (None if hs is None else tuple((h["key"], h["value"]) for h in hs),)
        out.append(row)
    return sorted(out)


class Read:
    """One query's outcome: its rows (sorted), its non-empty batches, or the error that ended it."""

    def __init__(self, rows: list[Row], batches: int, error: str | None) -> None:
        self.rows, self.batches, self.error = rows, batches, error


def _read(spark: Any, source: str, options: dict[str, str], kafka: KafkaBroker, coordinator: ServerThread,
          available_now: bool = True, then: Any = None, want: int = 0) -> Read:
    reader = spark.readStream.format(source)
    if source == "kafka":
        reader = reader.option("kafka.bootstrap.servers", kafka.bootstrap_servers)
    else:
        reader = (reader.option("coordinator", coordinator.address).option("group", _name("parity"))
                  .option("bootstrap.servers", kafka.bootstrap_servers))
    for k, v in options.items():
        reader = reader.option(k, v)
    headers = options.get("includeHeaders") == "true"
    collected: list[Any] = []
    batches = 0

    def sink(batch: Any, batch_id: int) -> None:
        nonlocal batches
        rows = batch.collect()
        if rows:
            batches += 1
            collected.extend(rows)

    trigger = {"availableNow": True} if available_now else {"processingTime": "300 milliseconds"}
    query = reader.load().writeStream.foreachBatch(sink).trigger(**trigger).start()
    error = None
    try:
        if available_now:
            with contextlib.suppress(StreamingQueryException):  # a failed query: its exception() says why
                query.awaitTermination(180)
        else:
            then(query)
            deadline = time.monotonic() + 120
            while len(collected) < want and query.isActive and time.monotonic() < deadline:
                time.sleep(0.2)
        exc = query.exception()
        error = None if exc is None else str(exc)
    finally:
        query.stop()
    return Read(_rows(collected, headers), batches, error)


def _both(spark: Any, options: dict[str, str], kafka: KafkaBroker, coordinator: ServerThread,
          **kw: Any) -> tuple[Read, Read]:
    return (_read(spark, "kafka", options, kafka, coordinator, **kw),
            _read(spark, "groupcoord", options, kafka, coordinator, **kw))


def test_subscribe_earliest_headers_max_offsets_and_min_partitions_read_the_rows_spark_reads(
        spark: Any, kafka: KafkaBroker, coordinator: ServerThread) -> None:
    a, b, other = _name("par-a"), _name("par-b"), _name("par-other")
    _produce(kafka, {a: 3, b: 2, other: 1}, int(time.time() * 1000) - 600_000)
    options = {"subscribe": f"{a},{b}", "startingOffsets": "earliest", "includeHeaders": "true",
               "maxOffsetsPerTrigger": "130", "minPartitions": "7"}
    spark_read, ours = _both(spark, options, kafka, coordinator)
    print(f"\nsubscribe+earliest+includeHeaders+maxOffsetsPerTrigger=130+minPartitions=7: Spark {len(spark_read.rows)} "
          f"rows in {spark_read.batches} batches, groupcoord {len(ours.rows)} rows in {ours.batches} batches")
    assert spark_read.error is None and ours.error is None, (spark_read.error, ours.error)
    assert len(spark_read.rows) == 5 * RECORDS
    assert ours.rows == spark_read.rows
    # maxOffsetsPerTrigger: 300 records in batches of at most 130, both sources
    assert ours.batches == spark_read.batches == 3
    with_headers = [r for r in ours.rows if r[2] % 2 == 0]
    assert with_headers[0][6] == (("h", b"v%d" % with_headers[0][2]), ("n", None))
    assert all(r[6] is None for r in ours.rows if r[2] % 2 == 1)  # Spark's null for a record with no headers


def test_subscribe_pattern_and_starting_offsets_json_read_the_rows_spark_reads(
        spark: Any, kafka: KafkaBroker, coordinator: ServerThread) -> None:
    run = uuid.uuid4().hex[:8]
    t1, t2, other = f"pat-{run}-x1", f"pat-{run}-x2", f"pat-{run}-y"
    _produce(kafka, {t1: 3, t2: 2, other: 1}, int(time.time() * 1000) - 600_000)
    starting = {t1: {"0": 10, "1": -2, "2": -1}, t2: {"0": -2, "1": 45}}
    options = {"subscribePattern": f"pat-{run}-x.*", "startingOffsets": json.dumps(starting)}
    spark_read, ours = _both(spark, options, kafka, coordinator)
    print(f"\nsubscribePattern + startingOffsets JSON: Spark {len(spark_read.rows)} rows, groupcoord {len(ours.rows)}")
    assert spark_read.error is None and ours.error is None, (spark_read.error, ours.error)
    assert {(r[0], r[1]) for r in spark_read.rows} == {(t1, 0), (t1, 1), (t2, 0), (t2, 1)}
    assert len(spark_read.rows) == (RECORDS - 10) + RECORDS + RECORDS + (RECORDS - 45)
    assert ours.rows == spark_read.rows


def test_starting_timestamp_and_offsets_by_timestamp_pick_the_offsets_spark_picks(
        spark: Any, kafka: KafkaBroker, coordinator: ServerThread) -> None:
    topic, late = _name("ts"), _name("ts-late")
    base = int(time.time() * 1000) - 600_000
    _produce(kafka, {topic: 2, late: 1}, base)

    spark_read, ours = _both(spark, {"subscribe": topic, "startingTimestamp": str(base + 20_500)}, kafka,
                             coordinator)
    assert spark_read.error is None and ours.error is None, (spark_read.error, ours.error)
    assert min(r[2] for r in spark_read.rows) == 21 and len(spark_read.rows) == 2 * (RECORDS - 21)
    assert ours.rows == spark_read.rows

    # per partition; `late` has no record at or after its timestamp: strategy latest starts it at the end
    by_ts = {topic: {"0": base + 30_000, "1": base + 5_000}, late: {"0": base + 10_000_000}}
    options = {"subscribe": f"{topic},{late}", "startingOffsetsByTimestamp": json.dumps(by_ts),
               "startingOffsetsByTimestampStrategy": "latest"}
    spark_read, ours = _both(spark, options, kafka, coordinator)
    assert spark_read.error is None and ours.error is None, (spark_read.error, ours.error)
    assert len(spark_read.rows) == (RECORDS - 30) + (RECORDS - 5)
    assert ours.rows == spark_read.rows

    # strategy error (the default): both queries fail, with no rows
    spark_read, ours = _both(spark, {**options, "startingOffsetsByTimestampStrategy": "error"}, kafka, coordinator)
    print(f"\nno record after the timestamp, strategy error: Spark: {str(spark_read.error)[:160]!r}\n"
          f"  groupcoord: {str(ours.error)[:160]!r}")
    assert spark_read.error is not None and ours.error is not None
    assert spark_read.rows == ours.rows == []


def test_fail_on_data_loss_after_delete_records_fails_both_or_skips_the_same_records(
        spark: Any, kafka: KafkaBroker, coordinator: ServerThread) -> None:
    topic = _name("lossy")
    _produce(kafka, {topic: 2}, int(time.time() * 1000) - 600_000)
    assert kafka.delete_records(topic, 0, 40) == 40  # the real broker: partition 0's log now starts at 40
    options = {"subscribe": topic, "startingOffsets": json.dumps({topic: {"0": 10, "1": 0}})}

    spark_read, ours = _both(spark, options, kafka, coordinator)  # failOnDataLoss: true, both sources' default
    print(f"\nfailOnDataLoss=true after DeleteRecords: Spark: {str(spark_read.error)[:160]!r}\n"
          f"  groupcoord: {str(ours.error)[:160]!r}")
    assert spark_read.error is not None and ours.error is not None
    assert "data" in spark_read.error.lower() and "lost" in spark_read.error.lower()
    assert f"data lost in {topic}:0" in ours.error

    spark_read, ours = _both(spark, {**options, "failOnDataLoss": "false"}, kafka, coordinator)
    assert spark_read.error is None and ours.error is None, (spark_read.error, ours.error)
    assert {(p, min(r[2] for r in spark_read.rows if r[1] == p)) for p in (0, 1)} == {(0, 40), (1, 0)}
    assert ours.rows == spark_read.rows


def test_latest_reads_only_records_produced_after_the_query_started_as_spark_does(
        spark: Any, kafka: KafkaBroker, coordinator: ServerThread) -> None:
    topic = _name("latest")
    _produce(kafka, {topic: 2}, int(time.time() * 1000) - 600_000)
    reads: list[Read] = []
    for source in ("kafka", "groupcoord"):
        def after_start(query: Any, source: str = source) -> None:
            deadline = time.monotonic() + 120  # both: the start is fixed once a trigger has run (groupcoord:
            while time.monotonic() < deadline:  # once the group gave the partitions and the start is committed)
                if query.lastProgress is not None and (source == "kafka" or _committed(coordinator, topic)):
                    break
                time.sleep(0.2)
            producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
            for i in range(10):
                producer.produce(topic, key=b"late", value=b"%s-%d" % (source.encode(), i), partition=i % 2,
                                 timestamp=int(time.time() * 1000))
            assert producer.flush(30) == 0

        reads.append(_read(spark, source, {"subscribe": topic, "startingOffsets": "latest"}, kafka, coordinator,
                           available_now=False, then=after_start, want=10))
    spark_read, ours = reads
    assert spark_read.error is None and ours.error is None, (spark_read.error, ours.error)
    # each query read exactly the ten records produced after it started, at the same offsets per partition
    assert [r[5] for r in sorted(spark_read.rows, key=lambda r: r[5])] == [b"kafka-%d" % i for i in range(10)]
    assert [r[5] for r in sorted(ours.rows, key=lambda r: r[5])] == [b"groupcoord-%d" % i for i in range(10)]
    assert sorted((r[1], r[2] - RECORDS) for r in spark_read.rows) == \
        sorted((r[1], r[2] - RECORDS - 5) for r in ours.rows)


def _committed(coordinator: ServerThread, topic: str) -> bool:
    """Whether some group committed a start for both partitions of `topic` (the groupcoord query's group)."""
    import grpc

    from groupcoord.wire.v1 import coordinator_pb2 as pb
    from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

    with grpc.insecure_channel(coordinator.address) as channel:
        stub = pb_grpc.GroupCoordinatorStub(channel)
        groups = stub.ListGroups(pb.ListGroupsRequest(), timeout=5).groups
        for g in groups:
            resp = stub.OffsetFetch(pb.OffsetFetchRequest(group_id=g.group_id, member_epoch=-1), timeout=5)
            parts = {p.partition_index for t in resp.topics if t.name == topic for p in t.partitions
                     if p.committed_offset >= 0}
            if parts == {0, 1}:
                return True
    return False

