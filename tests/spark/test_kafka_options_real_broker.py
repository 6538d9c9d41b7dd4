"""Spark's Kafka options whose meaning rests on the broker, on the real Kafka 4.4 broker: failOnDataLoss after
DeleteRecords moved a log start offset past the group's committed offset, and startingOffsetsByTimestamp
(librdkafka's mock answers no ListOffsets by timestamp). Spark drivers in local mode, Trigger.AvailableNow."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from pyspark.sql.streaming.datasource import ReadAllAvailable

from groupcoord.clients.group_member import GroupMember
from groupcoord.clients.spark_kafka_read import close_cached_consumers, read_task
from groupcoord.clients.spark_options import DataLossError
from groupcoord.clients.spark_source import (
    SCHEMA,
    GroupcoordStreamReader,
    KafkaRange,
    ReadTask,
    SourceOptions,
    decode_offset,
)
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.kafka_broker import KafkaBroker

from .conftest import LaunchDriver, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(420)]

RECORDS = 100  # per partition


@pytest.fixture(scope="module")
def kafka(kafka_broker: KafkaBroker) -> Iterator[KafkaBroker]:
    """The coordinator and the drivers of this module (tests/spark/conftest.py) use the real broker. Tasks read
    in this process leave cached consumers; they are closed with the module, not left retrying its port."""
    yield kafka_broker
    close_cached_consumers()


def _produce(kafka: KafkaBroker, topic: str, partitions: int, base_ms: int) -> None:
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for p in range(partitions):
        for i in range(RECORDS):  # record i has timestamp base + i seconds
            producer.produce(topic, value=b"x", partition=p, timestamp=base_ms + i * 1000)
    producer.flush(30)


def _rows(output: Path) -> Counter[tuple[str, int, int]]:
    return Counter((r["topic"], r["partition"], r["offset"]) for f in sorted((output / "batches").glob("*.parquet"))
                   for r in pq.read_table(f, columns=["topic", "partition", "offset"]).to_pylist())


def test_fail_on_data_loss_fails_the_query_or_skips_deleted_records_and_timestamps_pick_the_start(
        kafka: KafkaBroker, coordinator: ServerThread, launch_driver: LaunchDriver) -> None:
    run = uuid.uuid4().hex[:8]
    lossy, timed, future = f"lossy-{run}", f"timed-{run}", f"future-{run}"
    group = f"options-{run}"
    base = int(time.time() * 1000) - 600_000
    kafka.create_topic(lossy, 2)
    kafka.create_topic(timed, 1)
    kafka.create_topic(future, 1)
    for topic, partitions in ((lossy, 2), (timed, 1), (future, 1)):
        _produce(kafka, topic, partitions, base)
    # The group has read lossy up to 10; then DeleteRecords moves lossy:0's log start to 50.
    member = GroupMember(coordinator.address, group, [lossy])
    member.start()
    try:
        wait_until(lambda: len(member.assignment()) == 2, 60, "a member to own lossy")
        assert member.commit_offsets({(lossy, 0): 10, (lossy, 1): 10}) == {(lossy, 0): 0, (lossy, 1): 0}
    finally:
        member.close()
    assert kafka.delete_records(lossy, 0, 50) == 50

    by_timestamp = {timed: {"0": base + 40_000}, future: {"0": base + 10_000_000}}
    args = ("--sink", "rows", "--available-now", "--topic", lossy, "--topic", timed, "--topic", future,
            "--option", f"startingOffsetsByTimestamp={json.dumps(by_timestamp)}",
            "--option", "startingOffsetsByTimestampStrategy=latest")

    failing = launch_driver("fail-on-loss", group, "", *args)  # failOnDataLoss: Spark's default, true
    wait_until(lambda: not failing.alive(), 240, "the query to fail on the deleted records")
    assert failing.proc is not None and failing.proc.returncode == 1
    error = failing.progress().get("error", "")
    assert f"data lost in {lossy}:0: committed offset 10, but records 10-49 were deleted (log start 50)" in error
    assert not _rows(failing.output)

    skipping = launch_driver("skip-loss", group, "", *args, "--option", "failOnDataLoss=false")
    wait_until(lambda: not skipping.alive(), 240, "the availableNow query to end by itself", (skipping,))
    assert skipping.proc is not None and skipping.proc.returncode == 0, skipping.progress()
    rows = _rows(skipping.output)
    expected = {(lossy, 0, o) for o in range(50, RECORDS)} | {(lossy, 1, o) for o in range(10, RECORDS)} | \
        {(timed, 0, o) for o in range(40, RECORDS)}  # future: no record that late, so `latest`: nothing
    assert set(rows) == expected and max(rows.values()) == 1
    assert skipping.status().get("committed", {}) == {f"{lossy}:0": RECORDS, f"{lossy}:1": RECORDS,
                                                       f"{timed}:0": RECORDS, f"{future}:0": RECORDS}


def test_a_range_deleted_before_its_task_reads_it_fails_the_task_or_is_skipped(kafka: KafkaBroker) -> None:
    """The executor side: the batch was planned from offset 0, then DeleteRecords ran before the task read it."""
    topic = f"deleted-under-task-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1)
    _produce(kafka, topic, 1, int(time.time() * 1000))
    assert kafka.delete_records(topic, 0, 30) == 30
    task = ReadTask((KafkaRange(topic, 0, 0, RECORDS),))
    base = {"coordinator": "127.0.0.1:1", "group": "g", "subscribe": topic,
            "bootstrap.servers": kafka.bootstrap_servers}
    with pytest.raises(DataLossError, match=f"data lost in {topic}:0: offsets from 0 are no longer in Kafka"):
        list(read_task(SourceOptions.parse(base), SCHEMA, task))
    batches = list(read_task(SourceOptions.parse({**base, "failOnDataLoss": "false"}), SCHEMA, task))
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == list(range(30, RECORDS))


def test_no_record_at_or_after_the_starting_timestamp_fails_the_query_with_the_error_strategy(
        kafka: KafkaBroker, coordinator: ServerThread) -> None:
    """Spark's default strategy, `error`, on the real reader as Spark calls it (an exception in latestOffset
    fails the query)."""
    topic = f"too-early-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1)
    base = int(time.time() * 1000) - 600_000
    _produce(kafka, topic, 1, base)
    options = SourceOptions.parse({"coordinator": coordinator.address, "group": f"g-{topic}", "subscribe": topic,
                                   "bootstrap.servers": kafka.bootstrap_servers,
                                   "startingTimestamp": str(base + RECORDS * 1000)})  # after the last record
    reader = GroupcoordStreamReader(options, SCHEMA)
    try:
        start = reader.initialOffset()
        deadline = time.monotonic() + 60
        late = base + RECORDS * 1000
        with pytest.raises(RuntimeError, match=f"{topic}:0 has no record at or after timestamp {late}; "
                                               "set startingOffsetsByTimestampStrategy=latest"):
            while time.monotonic() < deadline:  # until the member owns the partition and plans it
                reader.latestOffset(start, ReadAllAvailable())
                time.sleep(0.05)
    finally:
        reader.stop()


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_topic_deleted_under_the_reader_fails_the_query_or_is_dropped(
        kafka: KafkaBroker, coordinator: ServerThread, fail_on_data_loss: bool) -> None:
    """Spark's "partitions are gone" data loss: the coordinator takes the deleted topic's partition back like any
    revoked one; the reader sees that the topic is gone when it releases it."""
    run = uuid.uuid4().hex[:8]
    kept, deleted = f"kept-{run}", f"deleted-{run}"
    for topic in (kept, deleted):
        kafka.create_topic(topic, 1)
        _produce(kafka, topic, 1, int(time.time() * 1000))
    options = SourceOptions.parse({"coordinator": coordinator.address, "group": f"g-{run}",
                                   "subscribe": f"{kept},{deleted}", "bootstrap.servers": kafka.bootstrap_servers,
                                   "startingOffsets": "earliest",
                                   "failOnDataLoss": str(fail_on_data_loss).lower()})
    reader = GroupcoordStreamReader(options, SCHEMA)
    both = {(kept, 0): (0, RECORDS), (deleted, 0): (0, RECORDS)}
    try:
        start = reader.initialOffset()
        deadline = time.monotonic() + 60
        while decode_offset(end := reader.latestOffset(start, ReadAllAvailable())) != both:
            assert time.monotonic() < deadline, "the reader never planned both topics"
            time.sleep(0.05)
        assert reader.latestOffset(end, ReadAllAvailable()) == end  # the batch ran: settled, nothing new
        kafka.delete_topic(deleted)
        deadline = time.monotonic() + 60
        if fail_on_data_loss:
            with pytest.raises(DataLossError, match=f"data lost: {deleted}:0 gone \\(topic deleted\\)"):
                while time.monotonic() < deadline:
                    reader.latestOffset(end, ReadAllAvailable())
                    time.sleep(0.05)
        else:
            while (after := reader.latestOffset(end, ReadAllAvailable())) == end:
                assert time.monotonic() < deadline, "the reader never dropped the deleted topic"
                time.sleep(0.05)
            assert decode_offset(after) == {(kept, 0): (RECORDS, RECORDS)}
    finally:
        reader.stop()


def test_a_topic_recreated_under_the_reader_with_a_shorter_log_fails_the_query(
        kafka: KafkaBroker, coordinator: ServerThread) -> None:
    """Deleted and created again while the reader owns it: the log now ends below the reader's position. Either
    the reader plans against that shorter log, or the coordinator saw the deletion, took the partition back and
    gave it again, and the group's committed offset lies beyond the new end: both are data loss."""
    topic = f"recreated-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1)
    _produce(kafka, topic, 1, int(time.time() * 1000))
    options = SourceOptions.parse({"coordinator": coordinator.address, "group": f"g-{topic}", "subscribe": topic,
                                   "bootstrap.servers": kafka.bootstrap_servers, "startingOffsets": "earliest"})
    reader = GroupcoordStreamReader(options, SCHEMA)
    try:
        start = reader.initialOffset()
        deadline = time.monotonic() + 60
        while decode_offset(end := reader.latestOffset(start, ReadAllAvailable())) != {(topic, 0): (0, RECORDS)}:
            assert time.monotonic() < deadline, "the reader never planned the topic"
            time.sleep(0.05)
        assert reader.latestOffset(end, ReadAllAvailable()) == end  # the batch ran: settled, nothing new
        kafka.delete_topic(topic)
        kafka.create_topic(topic, 1)
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
        for _ in range(10):
            producer.produce(topic, value=b"y", partition=0)
        producer.flush(30)
        deadline = time.monotonic() + 60
        with pytest.raises(DataLossError, match="data lost") as lost:
            while time.monotonic() < deadline:
                reader.latestOffset(end, ReadAllAvailable())
                time.sleep(0.05)
        print(f"\n{lost.value}")
    finally:
        reader.stop()
