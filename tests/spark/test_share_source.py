"""The source's share mode (``group.type=share``) as Spark calls its reader, against the real coordinator and
the embedded Kafka, without a Spark session: a slow batch keeps its locks by renewing them, and a batch that
lost its locks says so (status, log, failOnLockExpiry) and never publishes its output."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from pyspark.sql.streaming.datasource import ReadMaxRows

from groupcoord.clients.share_member import ShareMember
from groupcoord.clients.spark_share_source import (
    LockExpiredError,
    ShareSourceOptions,
    ShareStreamReader,
    decode_share_offset,
    tasks_for,
)
from groupcoord.clients.spark_source import SCHEMA, GroupcoordDataSource
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.embedded_kafka import EmbeddedKafka

from .share_helpers import set_group_configs, share_coordinator

pytestmark = pytest.mark.timeout(120)

LOCK_MS = 1000


@pytest.fixture(scope="module")
def coordinator(kafka: EmbeddedKafka) -> Iterator[ServerThread]:
    with share_coordinator(kafka, group_share_record_lock_duration_ms=LOCK_MS) as server:
        yield server


def _wait(condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out after {timeout_s:.0f} s waiting for {what}"
        time.sleep(0.05)
    return value


def _produce(kafka: EmbeddedKafka, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for i in range(n):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(10) == 0


def _reader(kafka: EmbeddedKafka, coordinator: ServerThread, topic: str, group: str, tmp_path: Path,
            **extra: str) -> ShareStreamReader:
    options = {"group.type": "share", "coordinator": coordinator.address, "group": group, "topics": topic,
               "bootstrap.servers": kafka.bootstrap_servers, "status.file": str(tmp_path / "status.json"),
               "acquisitions.file": str(tmp_path / "acquisitions.jsonl"), **extra}
    source = GroupcoordDataSource(options)
    reader = source.streamReader(SCHEMA)
    assert isinstance(reader, ShareStreamReader)
    return reader


def test_share_mode_refuses_options_that_only_mean_something_to_a_consumer_group() -> None:
    base = {"group.type": "share", "coordinator": "h:1", "group": "g", "topics": "t", "bootstrap.servers": "k:9"}
    with pytest.raises(ValueError, match="startingoffsets"):
        ShareSourceOptions.parse({**base, "startingOffsets": "earliest"})
    with pytest.raises(ValueError, match="group.type"):
        GroupcoordDataSource({**base, "group.type": "queue"}).streamReader(SCHEMA)
    assert ShareSourceOptions.parse({**base, "maxOffsetsPerTrigger": "300"}).max_records == 300


def test_a_task_reads_at_most_one_range_of_a_partition() -> None:
    tasks = tasks_for([("t", 0, 0, 9, 2), ("t", 0, 20, 29, 1), ("t", 1, 0, 4, 1)], 2)
    for task in tasks:
        tps = [(r.topic, r.partition) for r in task.ranges]
        assert len(tps) == len(set(tps))
    assert sorted((r.partition, r.start, r.end) for t in tasks for r in t.ranges) == [(0, 0, 10), (0, 20, 30),
                                                                                      (1, 0, 5)]


def test_a_batch_slower_than_the_lock_duration_keeps_its_records_by_renewing_the_locks(
        kafka: EmbeddedKafka, coordinator: ServerThread, tmp_path: Path) -> None:
    topic, group = "slow-batch", "slow"
    kafka.create_topic(topic, 1)
    set_group_configs(coordinator.address, group, share_auto_offset_reset="earliest")
    _produce(kafka, topic, 50)
    reader = _reader(kafka, coordinator, topic, group, tmp_path)
    other = ShareMember(coordinator.address, group, [topic], kafka.bootstrap_servers)
    try:
        start = reader.initialOffset()
        end = _wait(lambda: reader.latestOffset(start, ReadMaxRows(100)) or None, 30, "the reader to acquire")
        assert end != start and decode_share_offset(end) == [(topic, 0, 0, 49, 1)]
        other.start()
        _wait(lambda: other.assignment(), 30, "the other member's assignment")
        time.sleep(3 * LOCK_MS / 1000)  # the batch "runs" for three lock durations
        assert other.acquire(max_records=100) == []  # still locked: renewed, not expired
        after = reader.latestOffset(end, ReadMaxRows(100))  # settles the batch: ACCEPT
        assert after == end  # nothing more to acquire
        status = json.loads((tmp_path / "status.json").read_text())
        assert status["accepted_records"] == 50 and status["expired_records"] == 0 and status["renewals"] >= 2
        events = [json.loads(line)["event"] for line in (tmp_path / "acquisitions.jsonl").read_text().splitlines()]
        assert events == ["acquired", "accepted"]
    finally:
        reader.stop()
        other.close()


def test_a_batch_that_lost_its_locks_says_so_fails_the_query_and_publishes_nothing(
        kafka: EmbeddedKafka, coordinator: ServerThread, tmp_path: Path) -> None:
    topic, group = "expiring", "expiring"
    kafka.create_topic(topic, 1)
    set_group_configs(coordinator.address, group, share_auto_offset_reset="earliest")
    _produce(kafka, topic, 20)
    staging, publish = tmp_path / "staging", tmp_path / "published"
    reader = _reader(kafka, coordinator, topic, group, tmp_path, **{
        "lock.renew": "false", "failOnLockExpiry": "true", "staging.dir": str(staging),
        "publish.dir": str(publish)})
    other = ShareMember(coordinator.address, group, [topic], kafka.bootstrap_servers)
    try:
        start = reader.initialOffset()
        end = _wait(lambda: reader.latestOffset(start, ReadMaxRows(100)) or None, 30, "the reader to acquire")
        assert decode_share_offset(end) == [(topic, 0, 0, 19, 1)]
        pq.write_table(pa.table({"topic": [topic] * 20, "partition": [0] * 20, "offset": list(range(20))}),
                       staging / "run-000001.parquet")  # the sink staged the batch; then the batch is too slow
        other.start()
        got = _wait(lambda: other.acquire(max_records=100), 30, "the records to come back to the other member")
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got] == [(0, 19, 2)]
        with pytest.raises(LockExpiredError, match="lost its locks on 20 record"):
            reader.latestOffset(end, ReadMaxRows(100))
        assert list(staging.iterdir()) == [] and list(publish.iterdir()) == []
        status = json.loads((tmp_path / "status.json").read_text())
        assert status["expired_records"] == 20 and status["accepted_records"] == 0
        lines = [json.loads(line) for line in (tmp_path / "acquisitions.jsonl").read_text().splitlines()]
        assert [line["event"] for line in lines] == ["acquired", "expired"] and lines[1]["error_codes"] == [121]
    finally:
        reader.stop()
        other.close()


def test_a_batch_whose_locks_partly_expired_publishes_only_the_rows_of_the_accepted_ranges(tmp_path: Path) -> None:
    from groupcoord.clients.share_member import AcquiredRange
    from groupcoord.clients.spark_share_source import _settle_staged
    from groupcoord.clients.spark_staging import StagingArea

    staging = StagingArea(tmp_path / "staging", tmp_path / "published")
    pq.write_table(pa.table({"topic": ["t"] * 10, "partition": [0] * 10, "offset": list(range(10))}),
                   staging.staging / "run-000001.parquet")
    accepted = [AcquiredRange("t", "id", 0, 0, 4, 1, 0.0)]
    expired = [AcquiredRange("t", "id", 0, 5, 9, 2, 0.0)]
    _settle_staged(staging, accepted, expired)
    assert staging.staged() == []
    published = pq.read_table(tmp_path / "published" / "run-000001.parquet")
    assert published.column("offset").to_pylist() == [0, 1, 2, 3, 4]
