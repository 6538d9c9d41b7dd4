"""Compaction keeps what replay needs and drops what was deleted: on a real broker that compacts the state topic
within a second, a deleted group and departed members leave no key behind, and a fresh instance replays the
compacted topic to exactly the state of the instance that wrote it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from groupcoord.clients.group_member import GroupMember
from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.kafka_broker import KafkaBroker
from groupcoord.wire.v1 import coordinator_pb2 as pb
from tests.sharding.conftest import (
    PARTITIONS,
    delete_group,
    group_ids_covering_every_partition,
    partitions_served,
    start_instance,
    stub,
    wait_for,
)
from tests.sharding.test_kafka_log import state_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

# The fast-compacting topic; the broker side (log.cleaner.backoff.ms=100) is in TEST_BROKER_CONFIG.
FAST_COMPACTION = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
                   "delete.retention.ms": "100"}


@pytest.fixture
def compacted_topic(kafka_broker: KafkaBroker, unique: str) -> Iterator[str]:
    kafka_broker.create_topic(unique, PARTITIONS, config=FAST_COMPACTION)
    yield unique
    kafka_broker.delete_topic(unique)
    delete_group(kafka_broker, f"groupcoord-coordinators.{unique}")


def retained_keys_and_written(kafka: KafkaBroker, topic: str) -> tuple[list[list[object]], int]:
    """(the keys of the messages still in the topic, messages ever written = the sum of the high watermarks)."""
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "compaction-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        written = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                      for p in range(PARTITIONS))
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        keys: list[list[object]] = []
        at_end: set[int] = set()
        while len(at_end) < PARTITIONS:
            msg = consumer.poll(5)
            assert msg is not None, "no end of partition"
            err = msg.error()
            if err is not None and err.code() == KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
                continue
            assert err is None, err
            keys.append(json.loads(msg.key()))
        return keys, written
    finally:
        consumer.close()


def test_a_fresh_instance_replays_a_compacted_state_topic_to_the_writers_exact_state(
        kafka_broker: KafkaBroker, compacted_topic: str) -> None:
    groups = group_ids_covering_every_partition()  # one group per state partition
    writer = start_instance(kafka_broker, topic=compacted_topic)
    members: dict[str, list[GroupMember]] = {}
    try:
        wait_for(lambda: partitions_served([writer]), "the writer owns every partition", timeout_s=60)
        members = {g: [GroupMember(writer.address, g, ["orders"], rpc_timeout_s=5) for _ in range(2)]
                   for g in groups}
        for m in (m for ms in members.values() for m in ms):
            m.start()
        wait_for(lambda: all(len(m.assignment()) == 6 for ms in members.values() for m in ms), "members converge")
        # History that compaction may drop: every offset committed 6 times, one partition per operation.
        for round_ in range(6):
            for ms in members.values():
                for m in ms:
                    for tp in sorted(m.assignment()):
                        assert m.commit_offsets({tp: 100 * round_ + tp[1]}) == {tp: 0}
        # Deletions whose tombstones replay must still see: members leave, a whole group goes.
        departed = set()
        for g in groups[:3]:
            leaving = members[g].pop()
            departed.add(leaving.member_id)
            leaving.close(leave=True)
        doomed = groups[3]
        for m in members.pop(doomed):
            m.close(leave=True)
        channel, coordinator = stub(writer.address)
        try:
            deleted = coordinator.DeleteGroups(pb.DeleteGroupsRequest(group_ids=[doomed]), timeout=5).results
            assert [(d.group_id, d.error_code) for d in deleted] == [(doomed, 0)]
            assert coordinator.AlterGroupConfigs(pb.AlterGroupConfigsRequest(group_id=groups[0], configs=[
                pb.AlterableConfig(name="consumer.session.timeout.ms", value="30000")]), timeout=5).error_code == 0
        finally:
            channel.close()
        # Another group in the deleted group's partition, so that partition keeps rolling segments too.
        neighbour = next(g for g in (f"neighbour-{i}" for i in range(10_000))
                         if state_partition(g, PARTITIONS) == state_partition(doomed, PARTITIONS))
        members[neighbour] = [GroupMember(writer.address, neighbour, ["orders"], rpc_timeout_s=5)]
        members[neighbour][0].start()
        wait_for(lambda: len(members[neighbour][0].assignment()) == 12, "the neighbour group's member has all")

        # Keep writing (a commit per partition every 150 ms rolls each active segment past segment.ms) until
        # the cleaner has dropped at least half of what was written, and every record key of the deleted group
        # and of the departed members: their null-valued tombstones, once past delete.retention.ms, go too.
        # Each record is its own message under its key (no ["operation", ...] messages in transactions).
        tick = 10_000
        deadline = time.monotonic() + 90
        while True:
            keys, written = retained_keys_and_written(kafka_broker, compacted_topic)
            assert not [k for k in keys if k[0] == "operation"]
            of_deleted = [k for k in keys if k[1] == doomed or (len(k) == 3 and k[2] in departed)]
            if len(keys) * 2 <= written and not of_deleted:
                break
            assert time.monotonic() < deadline, (f"not compacted: {len(keys)} of {written} messages retained, "
                                                 f"{len(of_deleted)} of deleted things, e.g. {of_deleted[:3]}")
            for ms in members.values():
                m = ms[0]
                tp = min(m.assignment())
                tick += 1
                assert m.commit_offsets({tp: tick}) == {tp: 0}
            time.sleep(0.15)
        for m in (m for ms in members.values() for m in ms):
            m.close(leave=False)
        before = state_of(writer)
    finally:
        for m in (m for ms in members.values() for m in ms):
            m.close(leave=False)
        writer.stop()
    assert len(before) > 20

    fresh = start_instance(kafka_broker, topic=compacted_topic)
    try:
        wait_for(lambda: partitions_served([fresh]), "the fresh instance replays every partition", timeout_s=60)
        after = state_of(fresh)
    finally:
        fresh.stop()
    assert after == before, (f"replay after compaction differs: {len(before - after)} records missing, "
                             f"{len(after - before)} extra")
