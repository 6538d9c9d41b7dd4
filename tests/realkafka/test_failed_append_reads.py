"""A failed append holds back only the replies that saw its records, not every later read of the instance.

Found by the Kafka-backed fault suite (`groupcoord faults --mode kafka --minutes 30 --seed 1`, steps 132-133): an
instance paused past its session lost two state partitions while their transactions were open; the writers were
fenced and the appends failed ("not written: fenced"). The instance gained one of them again at once and loaded it,
but every reply that wrote nothing (the share group's heartbeats, every OffsetFetch) kept waiting for "the newest
append not yet known durable", which was that failed append: each answered NOT_COORDINATOR "not written: fenced
... ask FindCoordinator". The only group it served was that share group, whose steady heartbeats write nothing and
whose member acquires only while its heartbeats succeed, so no newer append ever replaced the failed one: the group
answered NOT_COORDINATOR for 4 minutes, until the next broker kill moved the partition.

Here the failed append is made as in `test_stale_fencing`: `init_transactions` with one partition's transactional
id from the test fences the writer of the instance that owns every partition; a commit to a group in that
partition then fails. After that, nothing writes: reads of a group in another partition, and of the fenced
partition's group once the instance has loaded it again, must be answered.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import grpc
import pytest
from confluent_kafka import Producer

from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.coordinator.runtime.kafka_txn import transactional_id
from groupcoord.kafka_broker import KafkaBroker
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.realkafka.test_split_brain import PARTITIONS, wait_for
from tests.realkafka.test_stale_fencing import commit, one_instance

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

NOT_COORDINATOR = 16


def fetch(address: str, group_id: str) -> tuple[int, str]:
    """OffsetFetch of every committed offset of `group_id`: (error code, message); -1 when there was no answer."""
    try:
        with grpc.insecure_channel(address) as channel:
            resp = pb_grpc.GroupCoordinatorStub(channel).OffsetFetch(
                pb.OffsetFetchRequest(group_id=group_id, member_epoch=-1), timeout=5)
    except grpc.RpcError as e:
        return -1, str(e.code())
    return int(resp.error_code), resp.error_message


def groups_on_two_partitions(prefix: str) -> tuple[str, str]:
    names = (f"{prefix}-{i}" for i in itertools.count())
    first = next(names)
    other = next(n for n in names if state_partition(n, PARTITIONS) != state_partition(first, PARTITIONS))
    return first, other


def test_reads_are_answered_after_an_append_failed_when_nothing_writes_since(
        kafka_broker: KafkaBroker, unique: str, tmp_path: Path) -> None:
    fenced_group, other_group = groups_on_two_partitions("failed-append")
    answers: list[tuple[int, str]] = []
    with one_instance(kafka_broker, unique, tmp_path / "instance.log") as address:
        try:
            wait_for(lambda: commit(address, fenced_group, 1) == 0, "the instance serves the first group")
            wait_for(lambda: commit(address, other_group, 1) == 0, "the instance serves the second group")
            stale = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                              "transactional.id": transactional_id(unique, state_partition(fenced_group, PARTITIONS))})
            stale.init_transactions(30)  # another instance's late acquisition: the owner's writer is fenced
            deadline = time.monotonic() + 30
            while (code := commit(address, fenced_group, 2)) == 0:  # the writer learns it is fenced at its next commit
                assert time.monotonic() < deadline, "a commit after the fencing still succeeds"
            assert code == NOT_COORDINATOR, code

            # From here on nothing writes: the failed append is the newest this instance made.
            wait_for(lambda: answers.append(fetch(address, other_group)) or answers[-1][0] == 0,
                     "a read of a group in another state partition is answered", timeout_s=30)
            answers.clear()
            wait_for(lambda: answers.append(fetch(address, fenced_group)) or answers[-1][0] == 0,
                     "once the instance loaded the fenced partition again, a read of its group is answered",
                     timeout_s=60)
            stale.flush(0)
        except AssertionError as e:
            raise AssertionError(f"{e}; last answers: {answers[-3:]}") from None
