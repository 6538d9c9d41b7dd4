"""The executor side of the groupcoord Spark source: read a task's Kafka ranges as Arrow record batches.

Runs in Spark's Python workers, which only get the options and the `ReadTask` (no group member, no
coordinator): a range is read with confluent-kafka (assign at its start; no Kafka consumer group).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql.types import StructType

from groupcoord.clients.spark_options import DataLossError
from groupcoord.clients.spark_source import ReadTask, SourceOptions, TopicPartition

__all__ = ["close_cached_consumers", "read_task"]

_READER_GROUP_ID = "groupcoord-spark-reader"  # confluent-kafka needs one; assign() never joins it
_consumers: dict[tuple[tuple[str, Any], ...], Any] = {}  # per Python worker process (workers are reused)
_ARROW_BATCH = 10_000


def _consumer(options: SourceOptions) -> Any:
    config = options.kafka_config(**{
        "group.id": _READER_GROUP_ID,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        # A range below the log start (deleted by retention or DeleteRecords): with failOnDataLoss an error
        # (ERR__AUTO_OFFSET_RESET, reported in read_task), without it the read starts at the log start.
        "auto.offset.reset": "error" if options.spark.fail_on_data_loss else "earliest",
        # A task reads up to the end of the log; the fetch that follows would be held by the broker for
        # fetch.wait.max.ms (500 ms by default), and the next task's fetch waits behind it on the connection.
        "fetch.wait.max.ms": 10,
        "client.id": "groupcoord-spark-task",
    })
    key = tuple(sorted(config.items()))
    consumer = _consumers.get(key)
    if consumer is None:
        consumer = _consumers[key] = Consumer(config)
    return consumer


def close_cached_consumers() -> None:
    """Close this process's cached consumers. A Spark worker exits instead; a process that read tasks itself
    (a test) calls this before its Kafka goes away, or the consumers keep reconnecting to its port."""
    while _consumers:
        _, consumer = _consumers.popitem()
        with contextlib.suppress(Exception):
            consumer.close()


def read_task(options: SourceOptions, schema: StructType, task: ReadTask) -> Iterator[Any]:
    """Records ``start <= offset < end`` of each range of `task`, as Arrow record batches. The partitions are
    fetched together; one that reaches its end is unassigned at once, so its later records are not fetched."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    timestamp_type = arrow_schema.field("timestamp").type
    headers_type = arrow_schema.field("headers").type if "headers" in arrow_schema.names else None
    active = {(r.topic, r.partition): [r.start, r.end] for r in task.ranges if r.end > r.start}
    consumer = _consumer(options)
    consumer.assign([KafkaTopicPartition(t, p, start) for (t, p), (start, _) in active.items()])
    deadline = time.monotonic() + options.fetch_timeout_ms / 1000
    topics: list[str] = []
    partitions: list[int] = []
    offsets: list[int] = []
    timestamps: list[int | None] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[list[dict[str, Any]] | None] = []
    columns = (topics, partitions, offsets, timestamps, keys, values, headers)

    def flush() -> Any:
        batch = pa.RecordBatch.from_arrays([
            pa.array(topics, pa.string()),
            pa.array(partitions, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array(timestamps, pa.int64()).cast(timestamp_type),
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            *([pa.array(headers, headers_type)] if headers_type is not None else []),
        ], schema=arrow_schema)
        for column in columns:
            column.clear()
        return batch

    def finish(tp: TopicPartition) -> None:
        del active[tp]
        consumer.incremental_unassign([KafkaTopicPartition(tp[0], tp[1])])

    try:
        while active:
            wanted = sum(end - nxt for nxt, end in active.values())
            for m in consumer.consume(num_messages=min(wanted, _ARROW_BATCH), timeout=0.5):
                tp = (m.topic(), m.partition())
                err = m.error()
                if err is not None and err.code() == KafkaError._AUTO_OFFSET_RESET:
                    raise DataLossError(f"groupcoord source: data lost in {tp[0]}:{tp[1]}: offsets from "
                                        f"{active.get(tp, ['?'])[0]} are no longer in Kafka (deleted by retention "
                                        f"or DeleteRecords); set failOnDataLoss=false to skip them")
                position = active.get(tp)
                if position is None:
                    continue
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(err)
                    if m.offset() >= position[1]:  # compacted or aborted records at the tail: nothing more
                        finish(tp)
                    continue
                off = m.offset()
                if off < position[0]:
                    continue
                if off < position[1]:
                    kind, ts = m.timestamp()
                    topics.append(tp[0])
                    partitions.append(tp[1])
                    offsets.append(off)
                    timestamps.append(ts * 1000 if kind != 0 and ts >= 0 else None)  # 0: TIMESTAMP_NOT_AVAILABLE
                    keys.append(m.key())
                    values.append(m.value())
                    if headers_type is not None:
                        hs = m.headers()  # Spark's includeHeaders: null when the record has none
                        headers.append([{"key": k, "value": v} for k, v in hs] if hs else None)
                    position[0] = off + 1
                if position[0] >= position[1]:
                    finish(tp)
            if len(offsets) >= _ARROW_BATCH:
                yield flush()
            if active and time.monotonic() > deadline:
                late = ", ".join(f"{t}:{p} at {nxt} of {end}" for (t, p), (nxt, end) in sorted(active.items()))
                raise TimeoutError(f"groupcoord source: Kafka did not deliver within {options.fetch_timeout_ms} ms: "
                                   f"{late}")
        if offsets:
            yield flush()
        consumer.unassign()  # no fetching while the worker waits for its next task
    except BaseException:
        # A failed task may leave the consumer mid-fetch; the retry gets a fresh one.
        for key, c in list(_consumers.items()):
            if c is consumer:
                del _consumers[key]
        with contextlib.suppress(Exception):
            consumer.close()
        raise
