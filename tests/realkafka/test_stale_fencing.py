"""A writer fenced by a stale acquisition: the instance Kafka still assigns the partition serves it again.

Found by the Kafka-backed fault suite (`groupcoord faults --mode kafka`, a broker killed while instances restarted):
an instance that was assigned a state partition and lost it again at once had its `init_transactions` still
running (the transaction coordinator was moving); it completed after the next owner's, bumped the producer epoch
and fenced the next owner's writer. That owner dropped the partition for good although Kafka still assigned it
there, and the groups in it answered NOT_COORDINATOR from every instance until the next rebalance.

Here the stale acquisition is the same call made from the test: `init_transactions` with the partition's
transactional id while one instance owns every partition.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from confluent_kafka import Producer

from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.coordinator.runtime.kafka_txn import transactional_id
from groupcoord.kafka_broker import KafkaBroker
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.realkafka.test_split_brain import PARTITIONS, free_port, serve, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def commit(address: str, group_id: str, offset: int) -> int:
    request = pb.OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=-1, topics=[
        pb.OffsetCommitRequestTopic(name="orders", partitions=[
            pb.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset, committed_leader_epoch=-1)])])
    try:
        with grpc.insecure_channel(address) as channel:
            resp = pb_grpc.GroupCoordinatorStub(channel).OffsetCommit(request, timeout=5)
    except grpc.RpcError:
        return -1
    return int(resp.error_code or resp.topics[0].partitions[0].error_code)


@contextlib.contextmanager
def one_instance(kafka_broker: KafkaBroker, state_topic: str, log_path: Path) -> Iterator[str]:
    """One instance of the Kafka-backed mode on a fresh compacted state topic (and the `orders` topic its groups
    subscribe to); yields its address, killed at the end."""
    kafka_broker.create_topic(state_topic, PARTITIONS, config={"cleanup.policy": "compact"})
    if "orders" not in kafka_broker.admin.list_topics(timeout=10).topics:
        kafka_broker.create_topic("orders", 1)
    port = free_port()
    proc = serve(kafka_broker.bootstrap_servers, state_topic, port, log_path)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)


def test_an_instance_fenced_by_a_stale_acquisition_serves_the_partition_again_while_kafka_assigns_it_there(
        kafka_broker: KafkaBroker, unique: str, tmp_path: Path) -> None:
    group = "stale-fencing"
    partition = state_partition(group, PARTITIONS)
    with one_instance(kafka_broker, unique, tmp_path / "instance.log") as address:
        wait_for(lambda: commit(address, group, 1) == 0, "the instance serves the group")
        stale = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                          "transactional.id": transactional_id(unique, partition)})
        stale.init_transactions(30)  # what a former assignee's late acquisition does
        codes = []

        def served_again() -> bool:
            codes.append(commit(address, group, 2 + len(codes)))
            return codes[-1] == 0 and any(c != 0 for c in codes[:-1])  # refused once fenced, then served

        wait_for(served_again, "the instance serves the group again after its writer was fenced", timeout_s=60)
        stale.flush(0)
    assert subprocess.run(["grep", "-c", "Traceback", str(tmp_path / "instance.log")],
                          capture_output=True, text=True, check=False).stdout.strip() == "0"
