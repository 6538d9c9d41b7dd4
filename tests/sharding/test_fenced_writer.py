"""A state partition's writer fenced by a newer owner (real broker: the mock does not fence).

Another producer calling `init_transactions` with the partition's `transactional.id` is what a new owner does on
gaining it. From then on the old owner's next transaction fails: the operation in it is answered NOT_COORDINATOR
(never acknowledged), the topic holds nothing of it, and the instance's other partitions are served as before.
Here Kafka still assigns the partition to the instance and its lease holds, so the fencer cannot be a rightful
owner: the instance replays the partition and serves it again (tests/realkafka/test_stale_fencing.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer

from groupcoord.coordinator.core import records as r
from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.coordinator.runtime.kafka_log import KafkaRecordLog
from groupcoord.coordinator.runtime.kafka_txn import transactional_id
from groupcoord.coordinator.runtime.sharding import PartitionState
from groupcoord.kafka_broker import KafkaBroker
from groupcoord.wire.v1 import coordinator_pb2 as pb

from .conftest import PARTITIONS, owned, start_instance, stub, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def commit(coordinator: Any, group_id: str, offset: int) -> int:
    resp = coordinator.OffsetCommit(pb.OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=-1, topics=[
        pb.OffsetCommitRequestTopic(name="orders", partitions=[
            pb.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset, committed_leader_epoch=-1)])]),
        timeout=10)
    return int(resp.error_code or resp.topics[0].partitions[0].error_code)


def fetch_code(coordinator: Any, group_id: str) -> int:
    return int(coordinator.OffsetFetch(pb.OffsetFetchRequest(group_id=group_id, member_epoch=-1), timeout=5).error_code)


def test_a_fenced_partition_answers_not_coordinator_drops_its_groups_and_writes_nothing(
        kafka_broker: KafkaBroker, unique: str) -> None:
    kafka_broker.create_topic(unique, PARTITIONS, config={"cleanup.policy": "compact"})
    instance = start_instance(kafka_broker, topic=unique)
    channel, coordinator = stub(instance.address)
    fencer = None
    try:
        wait_for(lambda: len(owned(instance)) == PARTITIONS and set(owned(instance).values()) == {PartitionState.OWNED},
                 "the instance owns every partition", timeout_s=60)
        p = state_partition("g", PARTITIONS)
        other = next(f"h{i}" for i in range(100) if state_partition(f"h{i}", PARTITIONS) != p)
        wait_for(lambda: commit(coordinator, "g", 1) == 0, "the first commit is acknowledged")
        assert commit(coordinator, other, 1) == 0

        fencer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                           "transactional.id": transactional_id(unique, p)})
        fencer.init_transactions(30)  # what the partition's next owner does

        assert commit(coordinator, "g", 2) == 16  # NOT_COORDINATOR: not written, not acknowledged
        runtime = instance.server.runtime
        assert runtime is not None and runtime.failed is None  # only that partition stopped
        assert commit(coordinator, other, 2) == 0

        reader = KafkaRecordLog(kafka_broker.bootstrap_servers, unique, PARTITIONS, create_topic=False)
        records: list[Any] = []
        reader.load_partition(p, records.append, 30)
        commits = [rec.committed_offset for rec in records if isinstance(rec, r.OffsetCommit) and rec.group_id == "g"]
        assert commits == [1]
    finally:
        if fencer is not None:
            fencer.flush(0)
        channel.close()
        instance.stop()
