"""The source's reader, cut off from the coordinator until it is fenced, plans nothing it lost and publishes
nothing it read before: the real reader (as Spark calls it), the real coordinator, the embedded Kafka and a
TCP proxy between the reader's member and the coordinator. No Spark session: Spark's part is the calls."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from pyspark.sql.streaming.datasource import ReadAllAvailable

from groupcoord.clients.group_member import GroupMember
from groupcoord.clients.spark_source import SCHEMA, GroupcoordStreamReader, SourceOptions, decode_offset
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.embedded_kafka import EmbeddedKafka
from groupcoord.faults.tcp_proxy import TcpProxy

pytestmark = pytest.mark.timeout(120)

TOPIC = "lost"
PARTITIONS = 4
GROUP = "losing"
RECORDS = 100  # per partition


def _wait(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s:.0f} s waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def proxy(coordinator: ServerThread) -> Iterator[TcpProxy]:
    with TcpProxy(coordinator.address) as p:
        yield p


def test_a_fenced_reader_discards_the_batch_it_planned_and_plans_only_what_it_owns_again(
        kafka: EmbeddedKafka, coordinator: ServerThread, proxy: TcpProxy, tmp_path: Path) -> None:
    kafka.create_topic(TOPIC, PARTITIONS)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"%d" % i, partition=p)
    producer.flush(10)
    staging, publish = tmp_path / "staging", tmp_path / "published"
    staging.mkdir()
    publish.mkdir()
    options = SourceOptions.parse({"coordinator": proxy.address, "group": GROUP, "topics": TOPIC,
                                   "bootstrap.servers": kafka.bootstrap_servers, "startingOffsets": "earliest",
                                   "staging.dir": str(staging), "publish.dir": str(publish)})
    reader = GroupcoordStreamReader(options, SCHEMA)
    other = GroupMember(coordinator.address, GROUP, [TOPIC])
    try:
        start = reader.initialOffset()
        every = {(TOPIC, p): (0, RECORDS) for p in range(PARTITIONS)}
        deadline = time.monotonic() + 30
        while decode_offset(end := reader.latestOffset(start, ReadAllAvailable())) != every:
            assert time.monotonic() < deadline, "the reader never planned every partition"
            time.sleep(0.05)
        # Spark ran the batch and its sink staged the output; then the reader is cut off past its session.
        table = pa.table({"topic": [TOPIC] * PARTITIONS, "partition": list(range(PARTITIONS))})
        pq.write_table(table, staging / "run-000000.parquet")
        proxy.silence()
        other.start()
        _wait(lambda: len(other.assignment()) == PARTITIONS, 30, "the other member to take every partition")
        assert all(code == 0 for code in other.commit_offsets({tp: 50 for tp in every}).values())
        proxy.drop()  # the reader's member sees the error, then the coordinator's answer: fenced
        proxy.forward()
        state = reader._reader_state()
        _wait(lambda: state._losses > 0 and state.member.status().member_epoch > 0, 30,
              "the reader's member to be fenced and rejoin")

        held_before = other.assignment()
        after = decode_offset(reader.latestOffset(end, ReadAllAvailable()))  # settles the batch, plans the next
        held_throughout = held_before & other.assignment()
        assert not set(after) & held_throughout, "the reader planned partitions the other member holds"
        assert all(a == 50 for a, _ in after.values()), after  # the group's offsets, not its own stale ones
        assert list(staging.iterdir()) == [] and list(publish.iterdir()) == [], "a fenced batch was published"
        assert state.staging is not None and state.staging.discarded_files == 1
        committed = other.fetch_offsets(every)
        assert committed == {tp: 50 for tp in every}, "the fenced reader committed its batch"
    finally:
        reader.stop()
        other.close()


def test_a_reader_cut_off_past_its_lease_plans_none_of_the_partitions_given_away(
        kafka: EmbeddedKafka, coordinator: ServerThread, proxy: TcpProxy, tmp_path: Path) -> None:
    """Silence, not an error: the member hears nothing, and its client-side lease (GroupMember) must lapse
    before the coordinator gives its partitions away, so the reader's next plan leaves them out."""
    topic, group = "cut-off", "cutting-off"
    kafka.create_topic(topic, PARTITIONS)
    options = SourceOptions.parse({"coordinator": proxy.address, "group": group, "topics": topic,
                                   "bootstrap.servers": kafka.bootstrap_servers, "startingOffsets": "earliest",
                                   "staging.dir": str(tmp_path / "staging"), "publish.dir": str(tmp_path / "out")})
    reader = GroupcoordStreamReader(options, SCHEMA)
    other = GroupMember(coordinator.address, group, [topic])
    try:
        start = reader.initialOffset()
        deadline = time.monotonic() + 30
        while len(decode_offset(end := reader.latestOffset(start, ReadAllAvailable()))) != PARTITIONS:
            assert time.monotonic() < deadline, "the reader never planned every partition"
            time.sleep(0.05)
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
        for p in range(PARTITIONS):
            producer.produce(topic, value=b"new", partition=p)
        producer.flush(10)
        proxy.silence()
        other.start()
        _wait(lambda: len(other.assignment()) == PARTITIONS, 30, "the other member to take every partition")
        result = reader.latestOffset(end, ReadAllAvailable())
        planned = set() if result == end else set(decode_offset(result))  # `end` again: no new batch
        assert not planned & other.assignment(), f"planned {sorted(planned)} while cut off"
    finally:
        proxy.forward()
        reader.stop()
        other.close()
