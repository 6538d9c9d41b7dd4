"""Spark's Kafka options on a real Spark driver (local mode) and the embedded Kafka: one availableNow run that
subscribes by pattern, starts each partition where `startingOffsets` (JSON) says, carries the headers and cuts
the batch into `minPartitions` tasks. The query must end by itself with exactly the records asked for."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from groupcoord.embedded_kafka import EmbeddedKafka

from .conftest import LaunchDriver, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

RECORDS = 200  # per partition
TOPICS = {"opt-a-1": 3, "opt-a-2": 2, "opt-other": 1}  # opt-other does not match the pattern
STARTING = {"opt-a-1": {"0": 50, "1": -2, "2": -1}, "opt-a-2": {"0": 150, "1": -2}}


def _produce(kafka: EmbeddedKafka) -> None:
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for topic, partitions in TOPICS.items():
        kafka.create_topic(topic, partitions)
        for p in range(partitions):
            for i in range(RECORDS):  # even offsets carry two headers, odd ones none
                headers: list[tuple[str, str | bytes | None]] | None = \
                    [("h", b"v%d" % i), ("n", None)] if i % 2 == 0 else None
                producer.produce(topic, key=b"k%d" % i, value=b"x", partition=p, headers=headers)
    producer.flush(30)


def test_available_now_reads_what_the_pattern_json_start_and_headers_ask_for_then_stops(
        kafka: EmbeddedKafka, launch_driver: LaunchDriver) -> None:
    _produce(kafka)
    driver = launch_driver("opts", "options-group", "", "--sink", "rows", "--available-now",
                           "--option", "subscribePattern=opt-a-.*",
                           "--option", f"startingOffsets={json.dumps(STARTING)}",
                           "--option", "includeHeaders=true", "--option", "minPartitions=12")
    wait_until(lambda: not driver.alive(), 240, "the availableNow query to end by itself", (driver,))
    assert driver.proc is not None and driver.proc.returncode == 0, driver.progress()

    rows = [r for f in sorted((driver.output / "batches").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    copies = Counter((r["topic"], r["partition"], r["offset"]) for r in rows)
    expected = {("opt-a-1", 0, o) for o in range(50, RECORDS)} | {("opt-a-1", 1, o) for o in range(RECORDS)} | \
        {("opt-a-2", 0, o) for o in range(150, RECORDS)} | {("opt-a-2", 1, o) for o in range(RECORDS)}
    print(f"\n{len(rows)} rows in {driver.progress().get('nonempty_batches')} batch(es), "
          f"{driver.status().get('max_tasks')} tasks at most")
    assert set(copies) == expected  # nothing of opt-a-1:2 (-1: latest) nor of opt-other
    assert max(copies.values()) == 1
    assert driver.status()["max_tasks"] >= 12  # minPartitions: 4 non-empty ranges cut into about 12 pieces
    for r in rows:
        if r["offset"] % 2 == 0:
            assert r["headers"] == [{"key": "h", "value": b"v%d" % r["offset"]}, {"key": "n", "value": None}], r
        else:
            assert r["headers"] is None, r
    committed = driver.status().get("committed", {})
    assert committed == {"opt-a-1:0": RECORDS, "opt-a-1:1": RECORDS, "opt-a-1:2": RECORDS,
                         "opt-a-2:0": RECORDS, "opt-a-2:1": RECORDS}


def test_min_offsets_per_trigger_holds_the_batch_until_enough_records_arrive(
        kafka: EmbeddedKafka, launch_driver: LaunchDriver) -> None:
    """Processing-time triggers every 200 ms find 100 records, fewer than minOffsetsPerTrigger=300, and run no
    batch; once 400 more arrive, one batch reads all 500 (maxTriggerDelay, 1h, never passes)."""
    topic = "min-offsets-spark"
    kafka.create_topic(topic, 2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})

    def produce(n: int) -> None:
        for i in range(n):
            producer.produce(topic, value=b"x", partition=i % 2)
        producer.flush(30)

    produce(100)
    driver = launch_driver("min", "min-offsets-group", topic, "--sink", "rows", "--starting-offsets", "earliest",
                           "--trigger-ms", "200", "--max-records", "500",
                           "--option", "minOffsetsPerTrigger=300", "--option", "maxTriggerDelay=1h")
    wait_until(lambda: len(driver.status().get("assignment", [])) == 2, 240, "the driver to own the topic", (driver,))
    seen = driver.status().get("time", 0)
    wait_until(lambda: driver.status().get("time", 0) > seen + 1, 60, "more triggers", (driver,))
    assert driver.progress().get("records") == 0  # triggers ran over 100 records and planned no batch
    produce(400)
    wait_until(lambda: not driver.alive(), 240, "the driver to read 500 records and stop", (driver,))
    assert driver.proc is not None and driver.proc.returncode == 0
    progress = driver.progress()
    assert (progress["records"], progress["nonempty_batches"]) == (500, 1)
