"""Deletions in the state topic end with Kafka tombstones (null values), so compaction can drop deleted keys;
replay skips them. The compaction itself is tests/realkafka/test_compaction.py (the mock cannot compact)."""

from __future__ import annotations

import asyncio
import json

from groupcoord.coordinator.core import records as r
from groupcoord.coordinator.core.classic.records import ClassicGroupMetadataTombstone
from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.coordinator.runtime.kafka_log import KafkaRecordLog, record_key
from groupcoord.coordinator.runtime.kafka_tombstones import deleted_keys

from .conftest import PARTITIONS, STATE_TOPIC, AnyKafka
from .test_kafka_log import raw_messages


def keys(records: list[object]) -> list[list[object]]:
    return [json.loads(key) for _, key in deleted_keys(records, record_key)]


def test_each_tombstone_record_deletes_the_key_it_shares_with_what_it_deletes() -> None:
    assert keys([r.ConsumerGroupMemberMetadataTombstone("g", "m"),
                 r.ConsumerGroupTargetAssignmentMemberTombstone("g", "m"),
                 r.ConsumerGroupCurrentMemberAssignmentTombstone("g", "m"),
                 r.OffsetCommitTombstone("g", "orders", 3),
                 ClassicGroupMetadataTombstone("c")]) == [
        ["member_metadata", "g", "m"], ["target_member", "g", "m"], ["current_assignment", "g", "m"],
        ["offset_commit", "g", "orders", 3], ["classic_group", "c"]]


def test_a_group_tombstone_also_deletes_the_target_metadata_that_would_bring_the_group_back() -> None:
    assert keys([r.ConsumerGroupMetadataTombstone("g")]) == [["group_metadata", "g"], ["target_metadata", "g"]]


def test_a_key_written_again_later_in_the_operation_is_not_deleted() -> None:
    assert keys([r.ConsumerGroupMetadataTombstone("g"), r.ConsumerGroupMetadata("g", 1, 0),
                 r.ConsumerGroupTargetAssignmentMetadata("g", 1, 0)]) == []
    assert keys([r.OffsetCommit("g", "orders", 1, 5, -1, "", 0), r.OffsetCommitTombstone("g", "orders", 1)]) == [
        ["offset_commit", "g", "orders", 1]]


def test_only_empty_group_configs_and_tombstones_delete() -> None:
    assert keys([r.GroupConfig("g", {})]) == [["group_config", "g"]]
    assert keys([r.GroupConfig("g", {"consumer.session.timeout.ms": 30000}), r.ConsumerGroupMetadata("g", 1, 0),
                 r.OffsetCommit("g", "orders", 1, 5, -1, "", 0)]) == []


def test_deletions_are_followed_by_null_values_that_replay_skips(kafka: AnyKafka) -> None:
    log = KafkaRecordLog(kafka.bootstrap_servers, STATE_TOPIC, PARTITIONS, create_topic=False)
    log.start()
    records = [r.ConsumerGroupMetadata("g", 3, 7), r.OffsetCommitTombstone("g", "orders", 5),
               r.ConsumerGroupMetadataTombstone("g")]

    async def append() -> None:
        pending = log.append(records)
        assert pending is not None
        await pending

    try:
        asyncio.run(append())
        replayed: list[object] = []
        load = log.load_partition(state_partition("g", PARTITIONS), replayed.append)
    finally:
        log.close()
    messages = [(json.loads(k)[:2], v is None) for k, v in raw_messages(kafka, state_partition("g", PARTITIONS))]
    assert messages == [(["operation", "g"], False),  # the operation, one message
                        (["offset_commit", "g"], True), (["group_metadata", "g"], True),
                        (["target_metadata", "g"], True)]
    assert replayed == records
    assert (load.records, load.end_offset) == (3, 4)


def test_every_record_type_shares_its_compaction_key_with_its_tombstone_and_never_with_a_sibling() -> None:
    """Two subscribed regexes of one group must not share a key (compaction would keep only the later one), and a
    tombstone must share the key of what it deletes (else it never supersedes it, and its null drops nothing)."""
    pairs = [
        (r.ConsumerGroupRegularExpression("g", "orders-.*", ("orders-1",), 5),
         r.ConsumerGroupRegularExpressionTombstone("g", "orders-.*")),
        (r.GroupEmptySince("g", 5), r.GroupEmptySinceTombstone("g")),
    ]
    for record, tombstone in pairs:
        assert record_key(record) == record_key(tombstone), type(record).__name__
        assert keys([tombstone]) == [json.loads(record_key(record))]
    other_regex = r.ConsumerGroupRegularExpression("g", "billing-.*", (), 5)
    assert record_key(other_regex) != record_key(pairs[0][0])
