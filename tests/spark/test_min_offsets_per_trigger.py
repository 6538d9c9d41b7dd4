"""Spark's minOffsetsPerTrigger and maxTriggerDelay, and minPartitions, on the source's real reader as Spark
calls it (initialOffset, latestOffset, partitions), with the real coordinator and the embedded Kafka. No Spark
session: when a batch may run is decided by latestOffset alone, and a Spark run would only add its start-up."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from pyspark.sql.streaming.datasource import ReadAllAvailable

from groupcoord.clients.spark_source import SCHEMA, GroupcoordStreamReader, ReadTask, SourceOptions, decode_offset
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.embedded_kafka import EmbeddedKafka

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 2


def _produce(kafka: EmbeddedKafka, topic: str, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for p in range(PARTITIONS):
        for _ in range(per_partition):
            producer.produce(topic, value=b"x", partition=p)
    producer.flush(10)


def _reader(kafka: EmbeddedKafka, coordinator: ServerThread, topic: str, **extra: str) -> GroupcoordStreamReader:
    options = SourceOptions.parse({"coordinator": coordinator.address, "group": f"g-{topic}", "subscribe": topic,
                                   "bootstrap.servers": kafka.bootstrap_servers, "startingOffsets": "earliest",
                                   **extra})
    return GroupcoordStreamReader(options, SCHEMA)


def _wait(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s:.0f} s waiting for {what}"
        time.sleep(0.05)


def _records(end: dict[str, list[int]]) -> int:
    return sum(b - a for a, b in decode_offset(end).values())


def test_no_batch_runs_below_min_offsets_per_trigger_until_enough_records_arrive(
        kafka: EmbeddedKafka, coordinator: ServerThread) -> None:
    topic = "min-offsets"
    kafka.create_topic(topic, PARTITIONS)
    _produce(kafka, topic, 5)
    reader = _reader(kafka, coordinator, topic, minOffsetsPerTrigger="100", maxTriggerDelay="1h",
                     minPartitions="8")
    try:
        start = reader.initialOffset()
        state = reader._reader_state()
        _wait(lambda: len(state.member.assignment()) == PARTITIONS, 30, "the reader's member to own the topic")
        for _ in range(20):  # 10 records owned and planned against, fewer than 100: no batch
            assert reader.latestOffset(start, ReadAllAvailable()) == start
            time.sleep(0.05)
        _produce(kafka, topic, 50)
        ends: list[dict[str, list[int]]] = []

        def batch() -> bool:
            ends.append(reader.latestOffset(start, ReadAllAvailable()))
            return ends[-1] != start

        _wait(batch, 30, "a batch once 110 records are there")
        end = ends[-1]
        assert _records(end) == 110
        tasks = reader.partitions(start, end)  # minPartitions: 2 ranges of 55 cut into 8 tasks
        assert all(isinstance(t, ReadTask) for t in tasks)
        ranges = [r for t in tasks if isinstance(t, ReadTask) for r in t.ranges]
        assert len(tasks) == len(ranges) == 8 and sum(r.end - r.start for r in ranges) == 110
    finally:
        reader.stop()


def test_a_batch_below_min_offsets_per_trigger_runs_once_max_trigger_delay_has_passed(
        kafka: EmbeddedKafka, coordinator: ServerThread) -> None:
    topic = "max-trigger-delay"
    kafka.create_topic(topic, PARTITIONS)
    _produce(kafka, topic, 5)
    reader = _reader(kafka, coordinator, topic, minOffsetsPerTrigger="1000", maxTriggerDelay="2s")
    try:
        began = time.monotonic()
        start = reader.initialOffset()
        ends: list[dict[str, list[int]]] = []

        def batch() -> bool:
            end = reader.latestOffset(start, ReadAllAvailable())
            if end != start:
                ends.append(end)
            return bool(ends)

        _wait(batch, 60, "a batch after maxTriggerDelay")
        assert time.monotonic() - began >= 2.0  # never before the delay (a lower bound: load only delays it)
        assert _records(ends[0]) == 10
    finally:
        reader.stop()
