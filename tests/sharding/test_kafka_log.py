"""The Kafka record log: where records go, how they are keyed, and that replaying the topic rebuilds the state."""

from __future__ import annotations

import asyncio
import json

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from groupcoord.clients.group_member import GroupMember
from groupcoord.coordinator.core import records as r
from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.coordinator.core.snapshot import snapshot_records
from groupcoord.coordinator.runtime import record_codec
from groupcoord.coordinator.runtime.kafka_log import KafkaRecordLog, StateTopicError
from groupcoord.coordinator.runtime.record_codec import RecordTooLargeError
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.embedded_kafka import EmbeddedKafka
from groupcoord.wire.v1 import coordinator_pb2 as pb

from .conftest import PARTITIONS, STATE_TOPIC, partitions_served, start_instance, stub, wait_for


def raw_messages(kafka: EmbeddedKafka, partition: int) -> list[tuple[bytes, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "test-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(STATE_TOPIC, partition, OFFSET_BEGINNING)])
    out: list[tuple[bytes, bytes | None]] = []
    try:
        while True:
            msg = consumer.poll(5)
            assert msg is not None, "no end of partition"
            err = msg.error()
            if err is not None and err.code() == KafkaError._PARTITION_EOF:
                return out
            assert err is None, err
            key = msg.key()
            assert key is not None
            out.append((key, msg.value()))  # a null value: a Kafka tombstone (test_kafka_tombstones)
    finally:
        consumer.close()


def state_of(instance: ServerThread) -> set[bytes]:
    async def read() -> set[bytes]:
        runtime = instance.server.runtime
        assert runtime is not None
        return {record_codec.encode(rec) for rec in snapshot_records(runtime.shard)}

    result: set[bytes] = instance.call(read())
    return result


def test_each_operation_is_one_message_per_group_partition_and_a_single_record_keeps_its_compaction_key(
        kafka: EmbeddedKafka) -> None:
    log = KafkaRecordLog(kafka.bootstrap_servers, STATE_TOPIC, PARTITIONS, create_topic=False)
    log.start()
    operation = [
        r.ConsumerGroupMetadata("orders-app", 3, 7),
        r.ConsumerGroupMemberMetadataTombstone("orders-app", "member-1"),
        r.OffsetCommit("orders-app", "orders", 5, 42, -1, "", 1000),
        r.OffsetCommitTombstone("billing", "orders", 2),
    ]
    single = [r.GroupConfig("billing", {"consumer.session.timeout.ms": 20000})]

    async def append() -> None:
        for records in (operation, single):
            pending = log.append(records)
            assert pending is not None
            await pending

    try:
        asyncio.run(append())
    finally:
        log.close()

    ours = ("orders-app", "billing")
    by_partition: dict[int, list[object]] = {}
    for rec in operation:
        by_partition.setdefault(state_partition(rec.group_id, PARTITIONS), []).append(rec)
    for partition, expected in by_partition.items():
        messages = [m for m in raw_messages(kafka, partition) if json.loads(m[0])[1] in ours]
        key, value = messages[0]  # the operation's records on this partition: one message, replayed whole
        assert record_codec.decode_operation(value) == expected
        if len(expected) > 1:  # never superseded, so compaction never drops it
            assert json.loads(key)[:2] == ["operation", expected[0].group_id]  # type: ignore[attr-defined]
        else:
            assert json.loads(key)[0] != "operation"
    (config_message,) = [m for m in raw_messages(kafka, state_partition("billing", PARTITIONS))
                         if json.loads(m[0])[0] == "group_config"]
    assert json.loads(config_message[0]) == ["group_config", "billing"]  # one record: keyed as before
    assert record_codec.decode_operation(config_message[1]) == single


def test_an_operation_over_the_producers_message_max_bytes_is_refused_and_nothing_is_produced(
        kafka: EmbeddedKafka) -> None:
    log = KafkaRecordLog(kafka.bootstrap_servers, STATE_TOPIC, PARTITIONS, create_topic=False,
                         producer_config={"message.max.bytes": 10_000})
    log.start()
    partition = state_partition("big", PARTITIONS)
    try:
        with pytest.raises(RecordTooLargeError) as e:
            log.append([r.OffsetCommit("big", "orders", p, p, -1, "x" * 100, 1) for p in range(200)])
        assert e.value.limit == 10_000 and e.value.group_ids == frozenset({"big"})
        assert log.pending() == []
        before = [m for m in raw_messages(kafka, partition) if json.loads(m[0])[1] == "big"]
        assert before == []

        async def append() -> None:
            pending = log.append([r.OffsetCommit("big", "orders", 0, 5, -1, "", 1)])
            assert pending is not None
            await pending

        asyncio.run(append())
        replayed: list[object] = []
        log.load_partition(partition, replayed.append)
    finally:
        log.close()
    assert [x for x in replayed if getattr(x, "group_id", "") == "big"] == [
        r.OffsetCommit("big", "orders", 0, 5, -1, "", 1)]


def test_messages_of_one_record_from_before_operations_still_load(kafka: EmbeddedKafka) -> None:
    from confluent_kafka import Producer

    old = [r.OffsetCommit("legacy", "orders", p, 10 + p, -1, "", 1) for p in range(3)]
    partition = state_partition("legacy", PARTITIONS)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for rec in old:
        producer.produce(STATE_TOPIC, key=b"k", value=record_codec.encode(rec), partition=partition)
    assert producer.flush(10) == 0
    log = KafkaRecordLog(kafka.bootstrap_servers, STATE_TOPIC, PARTITIONS, create_topic=False)
    replayed: list[object] = []
    log.load_partition(partition, replayed.append)
    assert [x for x in replayed if getattr(x, "group_id", "") == "legacy"] == old


def test_load_partition_replays_a_partition_in_order_up_to_its_high_watermark(kafka: EmbeddedKafka) -> None:
    log = KafkaRecordLog(kafka.bootstrap_servers, STATE_TOPIC, PARTITIONS, create_topic=False)
    log.start()
    commits = [r.OffsetCommit("g", "orders", p % 3, 10 * p, -1, "", p) for p in range(50)]

    async def append() -> None:
        for c in commits:
            pending = log.append([c])
            assert pending is not None
            await pending

    try:
        asyncio.run(append())
        replayed: list[object] = []
        report = log.load_partition(state_partition("g", PARTITIONS), replayed.append)
    finally:
        log.close()
    assert replayed == commits
    assert report.records == 50 and report.end_offset == 50


def test_a_state_topic_with_another_partition_count_is_refused(kafka: EmbeddedKafka) -> None:
    log = KafkaRecordLog(kafka.bootstrap_servers, STATE_TOPIC, PARTITIONS + 1, create_topic=False)
    with pytest.raises(StateTopicError, match="has 6 partitions but 7 are configured"):
        log.start()


def test_a_fresh_instance_replays_the_topic_to_the_same_members_assignments_offsets_and_configs(
        kafka: EmbeddedKafka) -> None:
    first = start_instance(kafka)
    try:
        wait_for(lambda: partitions_served([first]), "the instance owns every partition")
        members = [GroupMember(first.address, group, ["orders"], rpc_timeout_s=5)
                   for group in ("app-a", "app-b") for _ in range(2)]
        for m in members:
            m.start()
        wait_for(lambda: all(len(m.assignment()) == 6 for m in members), "the members converge")
        for i, m in enumerate(members):
            assert set(m.commit_offsets({tp: 100 + i for tp in m.assignment()}).values()) == {0}
        channel, coordinator = stub(first.address)
        altered = coordinator.AlterGroupConfigs(pb.AlterGroupConfigsRequest(group_id="app-b", configs=[
            pb.AlterableConfig(name="consumer.session.timeout.ms", value="30000")]), timeout=5)
        assert altered.error_code == 0
        channel.close()
        for m in members:
            m.close(leave=False)
        before = state_of(first)
    finally:
        first.stop()
    assert len(before) > 10

    fresh = start_instance(kafka)
    try:
        wait_for(lambda: partitions_served([fresh]), "the fresh instance loads every partition")
        assert state_of(fresh) == before
    finally:
        fresh.stop()


def test_in_transactions_each_record_is_its_own_message_under_its_key_and_old_messages_still_load(
        kafka: EmbeddedKafka) -> None:
    """Transactional mode writes what Kafka's coordinator writes: one message per record keyed by the record
    (the transaction makes the operation atomic), so compaction keeps only live keys. A partition holding
    messages of the earlier formats (one record, one operation) before these replays all of them in order."""
    from confluent_kafka import Producer

    group = "per-record"
    partition = state_partition(group, PARTITIONS)
    before = [r.OffsetCommit(group, "orders", 0, 1, -1, "", 1),
              r.ConsumerGroupMemberMetadata(group, "old", None, None, "c", "h", ("orders",), None, None, 5000),
              r.ConsumerGroupCurrentMemberAssignment(group, "old", 1, 0, "STABLE", {}, {})]
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    producer.produce(STATE_TOPIC, key=b'["offset_commit"]', value=record_codec.encode(before[0]), partition=partition)
    producer.produce(STATE_TOPIC, key=json.dumps(["operation", group, "x-1"]).encode(),
                     value=record_codec.encode_operation(before[1:]), partition=partition)
    assert producer.flush(10) == 0
    operation = [r.ConsumerGroupMetadata(group, 2, 7),
                 r.ConsumerGroupMemberMetadataTombstone(group, "old"),
                 r.ConsumerGroupCurrentMemberAssignmentTombstone(group, "old"),
                 r.OffsetCommit(group, "orders", 0, 2, -1, "", 2)]
    log = KafkaRecordLog(kafka.bootstrap_servers, STATE_TOPIC, PARTITIONS, create_topic=False, transactional=True)
    log.start()
    try:
        log.acquire(partition)

        async def append() -> None:
            pending = log.append(operation)
            assert pending is not None
            await pending

        asyncio.run(append())
        replayed: list[object] = []
        log.load_partition(partition, replayed.append)
    finally:
        log.close()
    ours = [(json.loads(k), v) for k, v in raw_messages(kafka, partition)
            if json.loads(k)[1:2] == [group] or k == b'["offset_commit"]']
    written = ours[2:]
    assert [k for k, _ in written] == [
        ["group_metadata", group], ["member_metadata", group, "old"], ["current_assignment", group, "old"],
        ["offset_commit", group, "orders", 0],
        ["member_metadata", group, "old"], ["current_assignment", group, "old"]]  # then Kafka's tombstones
    assert [record_codec.decode_operation(v) for _, v in written[:4] if v is not None] == [[x] for x in operation]
    assert [v for _, v in written[4:]] == [None, None]
    assert [x for x in replayed if getattr(x, "group_id", "") == group] == before + operation
