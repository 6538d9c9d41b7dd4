"""ConsumerGroupHeartbeatBatchStream over real gRPC: many members' heartbeats in one message, each handled as
the unary call handles it, answered in order; a batch over the limit is refused heartbeat by heartbeat and
the stream keeps serving; and what a batch acknowledged survives kill -9."""

from __future__ import annotations

import queue
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc

from groupcoord.coordinator.core import limits
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.durability.test_kill9 import describe, free_port, start, wait_serving
from tests.integration.conftest import start_server

INVALID_REQUEST = int(Errors.INVALID_REQUEST)


class BatchStream:
    """One open batch stream: `send` writes a batch and waits for its answer."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.messages = 0  # response messages the last batch's answers came in
        self._requests: queue.Queue[pb.ConsumerGroupHeartbeatBatchRequest | None] = queue.Queue()
        self._responses: Iterator[pb.ConsumerGroupHeartbeatBatchResponse] = pb_grpc.GroupCoordinatorStub(
            channel).ConsumerGroupHeartbeatBatchStream(iter(self._requests.get, None), timeout=60)

    def send(self, heartbeats: list[pb.ConsumerGroupHeartbeatRequest]) -> list[pb.ConsumerGroupHeartbeatResponse]:
        """The batch's answers, read from as many messages as they come in."""
        self._requests.put(pb.ConsumerGroupHeartbeatBatchRequest(heartbeats=heartbeats))
        answers: list[pb.ConsumerGroupHeartbeatResponse] = []
        self.messages = 0
        while len(answers) < len(heartbeats):
            answers += next(self._responses).responses
            self.messages += 1
        assert len(answers) == len(heartbeats)
        return answers

    def close(self) -> None:
        self._requests.put(None)


def join(group_id: str, topic: str) -> pb.ConsumerGroupHeartbeatRequest:
    return pb.ConsumerGroupHeartbeatRequest(group_id=group_id, member_epoch=0, rebalance_timeout_ms=5000,
                                            subscribed_topic_names=pb.StringList(values=[topic]),
                                            topic_partitions=pb.TopicPartitionsList())


class Members:
    """Members driven through batches, as a process hosting many members would: each heartbeat reports what
    its member owns (its last assignment), so the group reconciles."""

    def __init__(self, stream: BatchStream, groups: list[str], joined: list[pb.ConsumerGroupHeartbeatResponse]) -> None:
        assert [a.error_code for a in joined] == [0] * len(joined)
        self.stream, self.groups = stream, groups
        self.ids = [a.member_id for a in joined]
        self.epochs = [a.member_epoch for a in joined]
        self.owned: list[dict[str, list[int]]] = [self._owned(a) or {} for a in joined]

    @staticmethod
    def _owned(answer: pb.ConsumerGroupHeartbeatResponse) -> dict[str, list[int]] | None:
        if not answer.HasField("assignment"):
            return None
        return {tp.topic_id: sorted(tp.partitions) for tp in answer.assignment.topic_partitions}

    def reconciled(self, partitions: dict[str, int]) -> bool:
        """Each group's partitions are owned, each by one member, and no member is still catching up."""
        by_group: dict[str, list[tuple[str, int]]] = {group: [] for group in partitions}
        for group, owned in zip(self.groups, self.owned, strict=True):
            by_group[group] += [(topic, p) for topic, ps in owned.items() for p in ps]
        return all(len(by_group[g]) == len(set(by_group[g])) == n for g, n in partitions.items())

    def heartbeat_all(self) -> None:
        batch = []
        for group, member_id, epoch, owned in zip(self.groups, self.ids, self.epochs, self.owned, strict=True):
            req = pb.ConsumerGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=epoch)
            req.topic_partitions.SetInParent()
            for topic_id, partitions in sorted(owned.items()):
                req.topic_partitions.topics.add(topic_id=topic_id, partitions=partitions)
            batch.append(req)
        answers = self.stream.send(batch)
        assert [a.member_id for a in answers] == self.ids  # answered in the batch's order
        assert [a.error_code for a in answers] == [0] * len(batch)
        for k, a in enumerate(answers):
            self.epochs[k] = a.member_epoch
            owned = self._owned(a)
            if owned is not None:
                self.owned[k] = owned


def test_a_batch_answers_each_heartbeat_in_order_and_members_of_two_groups_reconcile_through_batches(
        server: ServerThread) -> None:
    with grpc.insecure_channel(server.address) as channel:
        stream = BatchStream(channel)
        joins = [join("orders-app", "orders") for _ in range(3)] + [join("audit-app", "audit") for _ in range(2)]
        bad = pb.ConsumerGroupHeartbeatRequest(group_id="orders-app", member_epoch=0)  # no subscription
        answers = stream.send([*joins[:2], bad, *joins[2:]])
        assert [a.error_code for a in answers] == [0, 0, INVALID_REQUEST, 0, 0, 0]
        assert answers[2].member_id == ""  # the invalid join in the middle was answered at its own place
        members = Members(stream, [j.group_id for j in joins], [a for k, a in enumerate(answers) if k != 2])
        assert len(set(members.ids)) == 5
        deadline = time.monotonic() + 20
        while not members.reconciled({"orders-app": 24, "audit-app": 6}):
            assert time.monotonic() < deadline, "the members did not reconcile through batches"
            time.sleep(0.05)  # the heartbeat interval is 100 ms, the assignment interval 100 ms
            members.heartbeat_all()
        stream.close()


def test_a_batch_over_the_limit_is_refused_heartbeat_by_heartbeat_and_the_stream_keeps_serving(
        server: ServerThread) -> None:
    with grpc.insecure_channel(server.address) as channel:
        stream = BatchStream(channel)
        over = [join("too-many", "orders") for _ in range(limits.HEARTBEAT_BATCH_MAX + 1)]
        answers = stream.send(over)
        assert len(answers) == len(over)
        assert {a.error_code for a in answers} == {INVALID_REQUEST}
        assert "at most 1,000 heartbeats" in answers[0].error_message and len(answers[0].error_message) < 200
        described = pb_grpc.GroupCoordinatorStub(channel).DescribeGroups(
            pb.DescribeGroupsRequest(group_ids=["too-many"]), timeout=10).groups[0]
        assert not described.members  # nothing of the refused batch joined

        joins = [join("too-many", "orders") for _ in range(limits.HEARTBEAT_BATCH_MAX)]
        members = Members(stream, [j.group_id for j in joins], stream.send(joins))
        assert len(set(members.ids)) == limits.HEARTBEAT_BATCH_MAX  # a batch at the limit is served in full
        stream.close()


def test_answers_over_the_response_size_limit_come_in_several_messages_and_the_stream_keeps_serving() -> None:
    srv = start_server({"orders": 24}, **{"groupcoord.response.max.bytes": 16384})
    try:
        with grpc.insecure_channel(srv.address) as channel:
            stream = BatchStream(channel)
            joins = [join("many-answers", "orders") for _ in range(limits.HEARTBEAT_BATCH_MAX)]
            members = Members(stream, [j.group_id for j in joins], stream.send(joins))
            assert len(set(members.ids)) == limits.HEARTBEAT_BATCH_MAX
            assert stream.messages >= 4  # about 60 bytes an answer, at most 15 KB a message
            members.heartbeat_all()  # the same stream serves the next batch
            stream.close()
    finally:
        srv.stop()


def test_every_join_a_batch_acknowledged_survives_kill_dash_nine(tmp_path: Path) -> None:
    port = free_port()
    proc = start(port, tmp_path / "state")
    try:
        wait_serving(port)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stream = BatchStream(channel)
            answers = stream.send([join("durable", "orders") for _ in range(50)])
            proc.send_signal(signal.SIGKILL)  # at once: the acknowledgement is all the client has
            proc.wait(timeout=10)
        assert [a.error_code for a in answers] == [0] * 50
        acknowledged = {a.member_id for a in answers}
        proc = start(port, tmp_path / "state")
        wait_serving(port)
        assert {m.member_id for m in describe(port).members} == acknowledged
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_full_batch_does_not_hold_back_another_groups_heartbeat_until_its_end(server: ServerThread) -> None:
    """A batch's heartbeats start a slice per event-loop pass, so a request of another group that arrives
    while a full batch (1,000 joins) is being handled is handled among the batch's heartbeats, not after all
    of them. The order is what the runtime applied: each operation's records, as its observers see them."""
    runtime = server.server.runtime
    assert runtime is not None
    applied: list[str] = []  # the group of each heartbeat operation, in the order they were applied
    runtime.observers.append(lambda name, records, now: applied.append(records[0].group_id)
                             if name == "ConsumerGroupHeartbeat" else None)
    with grpc.insecure_channel(server.address) as batch_channel, grpc.insecure_channel(server.address) as channel:
        stream = BatchStream(batch_channel)
        joins = [join("batched-app", "orders") for _ in range(limits.HEARTBEAT_BATCH_MAX)]
        answered: queue.Queue[list[pb.ConsumerGroupHeartbeatResponse]] = queue.Queue()
        threading.Thread(target=lambda: answered.put(stream.send(joins)), daemon=True).start()
        deadline = time.monotonic() + 30
        while "batched-app" not in applied:  # the batch is being handled
            assert time.monotonic() < deadline, "the batch was never handled"
            time.sleep(0.0005)
        other = pb_grpc.GroupCoordinatorStub(channel).ConsumerGroupHeartbeat(join("other-app", "audit"), timeout=30)
        assert other.error_code == 0
        assert [a.error_code for a in answered.get(timeout=60)] == [0] * len(joins)
        stream.close()
    before = applied[:applied.index("other-app")].count("batched-app")
    assert 0 < before < limits.HEARTBEAT_BATCH_MAX, (
        f"the other group's join was handled after {before} of the batch's {limits.HEARTBEAT_BATCH_MAX} joins")
