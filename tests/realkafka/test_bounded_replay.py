"""Replay is bounded by live state, not by history (issue 11): in transactions each record is its own message
under its record key, so after thousands of operations that rewrite the same small state (members joining and
leaving, offsets committed), compaction leaves about one message per live record, and a fresh instance replays
those to exactly the writer's state."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from groupcoord.clients.group_member import GroupMember
from groupcoord.coordinator.runtime.kafka_log import KafkaRecordLog
from groupcoord.kafka_broker import KafkaBroker
from groupcoord.wire.v1 import coordinator_pb2 as pb
from tests.realkafka.test_compaction import compacted_topic, retained_keys_and_written  # noqa: F401 (fixture)
from tests.sharding.conftest import (
    PARTITIONS,
    group_ids_covering_every_partition,
    partitions_served,
    start_instance,
    stub,
    wait_for,
)
from tests.sharding.test_kafka_log import state_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

log = logging.getLogger(__name__)
OPERATIONS = 2_000  # joins and leaves of a churning member, each several records in one transaction


def churn(address: str, group: str, cycles: int, errors: list[str]) -> None:
    """A member joins and leaves `cycles` times, a new member id each time (so history has ever more keys)."""
    channel, coordinator = stub(address)
    try:
        for i in range(cycles):
            member = f"churn-{group}-{i}"
            joined = coordinator.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=5000,
                subscribed_topic_names=pb.StringList(values=["orders"]), topic_partitions=pb.TopicPartitionsList()),
                timeout=10)
            left = coordinator.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=member, member_epoch=-1), timeout=10)
            if joined.error_code or left.error_code:
                errors.append(f"{group} cycle {i}: join {joined.error_code}, leave {left.error_code}")
                return
    finally:
        channel.close()


def test_after_thousands_of_operations_replay_reads_about_one_message_per_live_record(
        kafka_broker: KafkaBroker, compacted_topic: str) -> None:  # noqa: F811 (the fixture)
    groups = group_ids_covering_every_partition()
    writer = start_instance(kafka_broker, topic=compacted_topic)
    members: list[GroupMember] = []
    try:
        wait_for(lambda: partitions_served([writer]), "the writer owns every partition", timeout_s=60)
        members = [GroupMember(writer.address, g, ["orders"], rpc_timeout_s=10) for g in groups]
        for m in members:
            m.start()
        wait_for(lambda: all(len(m.assignment()) == 12 for m in members), "the stable members own everything")
        errors: list[str] = []
        cycles = OPERATIONS // 2 // len(groups) + 1
        threads = [threading.Thread(target=churn, args=(writer.address, g, cycles, errors)) for g in groups]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:3]
        churn_s = time.monotonic() - started
        wait_for(lambda: all(len(m.assignment()) == 12 for m in members), "the stable members own all again")
        for round_ in range(5):  # offsets rewritten too
            for m in members:
                for tp in sorted(m.assignment()):
                    assert m.commit_offsets({tp: 100 * round_ + tp[1]}) == {tp: 0}
        live = len(state_of(writer))
        _, written_before_trickle = retained_keys_and_written(kafka_broker, compacted_topic)

        # Keep touching every partition (rolling its active segment past segment.ms) until the cleaner has
        # compacted the history: the retained messages then number about the live records.
        bound = 2 * live + 10 * PARTITIONS
        deadline = time.monotonic() + 150
        tick = 10_000
        while True:
            keys, written = retained_keys_and_written(kafka_broker, compacted_topic)
            if len(keys) <= bound:
                break
            assert time.monotonic() < deadline, f"not compacted: {len(keys)} of {written} retained, bound {bound}"
            for m in members:
                tick += 1
                tp = min(m.assignment())
                assert m.commit_offsets({tp: tick}) == {tp: 0}
            time.sleep(0.15)
        for m in members:
            m.close(leave=False)
        before = state_of(writer)
    finally:
        for m in members:
            m.close(leave=False)
        writer.stop()

    # Replay, as an owner does it: every partition from its beginning.
    reader = KafkaRecordLog(kafka_broker.bootstrap_servers, compacted_topic, PARTITIONS, create_topic=False)
    started = time.monotonic()
    replayed = sum(reader.load_partition(p, lambda _: None).records for p in range(PARTITIONS))
    replay_s = time.monotonic() - started
    print(f"\nbounded replay: {written_before_trickle} offsets written by {OPERATIONS} churn operations "
          f"({churn_s:.1f} s) and 5 commit rounds, {written} in all; {len(keys)} messages retained, "
          f"{replayed} records replayed in {replay_s:.2f} s; {live} live records (snapshot)")
    assert written_before_trickle >= 5 * OPERATIONS  # history: several records per operation
    assert replayed <= bound < written_before_trickle / 5

    fresh = start_instance(kafka_broker, topic=compacted_topic)
    try:
        wait_for(lambda: partitions_served([fresh]), "the fresh instance replays every partition", timeout_s=60)
        after = state_of(fresh)
    finally:
        fresh.stop()
    assert after == before, (f"replay after compaction differs: {len(before - after)} records missing, "
                             f"{len(after - before)} extra")
