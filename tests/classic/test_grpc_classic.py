"""The classic protocol over real gRPC on loopback: consumers (cooperative and eager) converge and survive a
killed member without a partition ever owned twice; a leader-election group fails over; the leader's error
reaches the other members; a classic group survives a restart from its log."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from groupcoord.clients.classic_member import ASSIGNMENT_ERROR_METADATA_KEY, ClassicGroupMember
from groupcoord.clients.consumer_protocol import TopicPartition
from groupcoord.clients.leader_election import LeaderElection
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.integration.conftest import start_server

pytestmark = pytest.mark.integration

CLASSIC_FAST: dict[str, Any] = {
    "group.min.session.timeout.ms": 100,
    "group.initial.rebalance.delay.ms": 300,
}
ALL_ORDERS = {("orders", p) for p in range(24)}
TIMING: dict[str, Any] = {"session_timeout_ms": 1500, "heartbeat_interval_ms": 100, "rebalance_timeout_ms": 5000}


@pytest.fixture
def classic_server() -> Iterator[ServerThread]:
    srv = start_server({"orders": 24}, **CLASSIC_FAST)
    try:
        yield srv
    finally:
        srv.stop()


def wait_until(cond: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def converged(members: list[ClassicGroupMember], expected: set[TopicPartition]) -> bool:
    assignments = [m.assignment() for m in members]
    sizes = [len(a) for a in assignments]
    union = set().union(*assignments)
    return union == expected and sum(sizes) == len(expected) and max(sizes) - min(sizes) <= 1 and all(
        m.wait_stable(0) for m in members)


class Watcher:
    """Samples every live member continuously and records any violation of `check` (e.g. a partition owned by
    two members at once)."""

    def __init__(self, check: Callable[[list[Any]], str | None]) -> None:
        self.live: list[Any] = []
        self.violations: list[str] = []
        self.samples = 0
        self._check = check
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def add(self, member: Any) -> None:
        with self._lock:
            self.live.append(member)

    def remove(self, member: Any) -> None:
        with self._lock:
            self.live.remove(member)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                violation = self._check(list(self.live))
            if violation is not None:
                self.violations.append(violation)
            self.samples += 1
            time.sleep(0.002)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def owned_twice(members: list[ClassicGroupMember]) -> str | None:
    seen: dict[TopicPartition, str] = {}
    for m in members:
        for tp in m.assignment():
            if tp in seen and seen[tp] != m.member_id:
                return f"{tp} owned by {seen[tp]} and {m.member_id}"
            seen[tp] = m.member_id
    return None


def test_five_cooperative_sticky_consumers_converge_and_reconverge_after_one_is_killed_never_sharing_a_partition(
        classic_server: ServerThread) -> None:
    members: list[ClassicGroupMember] = []
    revocations: list[tuple[int, frozenset[TopicPartition]]] = []

    def start(i: int) -> None:
        m = ClassicGroupMember(classic_server.address, "coop", ["orders"], partitions={"orders": 24},
                               assignors=("cooperative-sticky",),
                               on_revoked=lambda tps: revocations.append((i, tps)), **TIMING)
        assert m.cooperative
        members.append(m)
        watcher.add(m)
        m.start()

    with Watcher(owned_twice) as watcher:
        for i in range(2):
            start(i)
        wait_until(lambda: converged(members, ALL_ORDERS), what="2 members to converge")
        for i in range(2, 5):  # partitions must now move from the first two to the newcomers
            start(i)
        wait_until(lambda: converged(members, ALL_ORDERS), what="5 members to converge")
        # KIP-429: the first two gave up only what moved (12 -> 4 or 5 each), in a rebalance they stayed in.
        assert {i for i, _ in revocations} == {0, 1}
        assert all(len(tps) < 12 for _, tps in revocations)
        before = {m.member_id: m.assignment() for m in members}

        victim = members.pop(2)
        watcher.remove(victim)
        victim.kill()  # no LeaveGroup: the coordinator notices when its session times out
        wait_until(lambda: converged(members, ALL_ORDERS), what="the 4 survivors to take over")
        for m in members:  # sticky: nobody lost a partition it had, only the victim's moved
            assert before[m.member_id] <= m.assignment()
        assert watcher.samples > 100
    assert watcher.violations == []
    for m in members:
        m.close()


@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
def test_eager_consumers_converge_and_rebalance_when_one_leaves(classic_server: ServerThread, assignor: str) -> None:
    revoked: list[frozenset[TopicPartition]] = []
    members = [ClassicGroupMember(classic_server.address, f"eager-{assignor}", ["orders"], partitions={"orders": 24},
                                  assignors=(assignor,), on_revoked=revoked.append, **TIMING).start()
               for _ in range(3)]
    assert not any(m.cooperative for m in members)
    with Watcher(owned_twice) as watcher:
        for m in members:
            watcher.add(m)
        wait_until(lambda: converged(members, ALL_ORDERS), what="3 eager members to converge")
        leaving = members.pop()
        watcher.remove(leaving)
        leaving.close()
        wait_until(lambda: converged(members, ALL_ORDERS), what="2 members to take over")
    assert watcher.violations == []
    assert revoked  # eager: everything was given back before rejoining
    for m in members:
        m.close()


def test_a_leader_election_group_fails_over_when_its_writer_is_killed(classic_server: ServerThread) -> None:
    elected: list[tuple[str, int]] = []

    def recorder(identity: str) -> Callable[[int], None]:
        return lambda epoch: elected.append((identity, epoch))

    members = [LeaderElection(classic_server.address, "writers", f"node-{i}", on_elected=recorder(f"node-{i}"),
                              **TIMING) for i in range(3)]

    def one_writer(live: list[LeaderElection]) -> str | None:
        writers = [m.identity for m in live if m.is_writer()]
        return f"two writers at once: {writers}" if len(writers) > 1 else None

    with Watcher(one_writer) as watcher:
        for m in members:
            watcher.add(m)
            m.start()
        wait_until(lambda: sum(m.is_writer() for m in members) == 1, what="a writer")
        writer = next(m for m in members if m.is_writer())
        wait_until(lambda: all(m.writer() == writer.identity for m in members), what="everyone to know the writer")
        watcher.remove(writer)
        members.remove(writer)
        writer.kill()
        assert not writer.is_writer()
        wait_until(lambda: sum(m.is_writer() for m in members) == 1, what="another writer")
        successor = next(m for m in members if m.is_writer())
        assert successor.epoch > writer.generation  # the fencing token moved on
    assert watcher.violations == []
    assert elected[0][0] == writer.identity and elected[-1] == (successor.identity, successor.epoch)
    for m in members:
        m.close()


def test_a_leaders_assignment_error_reaches_the_waiting_members_who_rejoin(classic_server: ServerThread) -> None:
    stub = pb_grpc.GroupCoordinatorStub(grpc.insecure_channel(classic_server.address))

    def join(member_id: str) -> Any:
        return stub.JoinGroup.future(pb.JoinGroupRequest(
            group_id="err", member_id=member_id, protocol_type="consumer", session_timeout_ms=5000,
            rebalance_timeout_ms=5000, protocols=[pb.JoinGroupRequestProtocol(name="range", metadata=b"")]),
            timeout=10)

    ids = [join("").result().member_id for _ in range(2)]
    joined = [join(mid) for mid in ids]
    responses = [f.result() for f in joined]
    leader = responses[0].leader
    follower = next(r for r in responses if r.member_id != leader)
    follower_sync = stub.SyncGroup.future(pb.SyncGroupRequest(
        group_id="err", generation_id=follower.generation_id, member_id=follower.member_id), timeout=10)
    leader_sync = stub.SyncGroup(pb.SyncGroupRequest(group_id="err", generation_id=follower.generation_id,
                                                     member_id=leader), timeout=10,
                                 metadata=[(ASSIGNMENT_ERROR_METADATA_KEY, "23")])
    assert leader_sync.error_code == 23
    assert follower_sync.result().error_code == 23
    heartbeat = stub.Heartbeat(pb.HeartbeatRequest(group_id="err", generation_id=follower.generation_id,
                                                   member_id=follower.member_id), timeout=10)
    assert heartbeat.error_code == 27  # REBALANCE_IN_PROGRESS: rejoin


def test_offsets_commit_under_the_generation_and_the_group_shows_in_describe_and_metrics(
        classic_server: ServerThread) -> None:
    m = ClassicGroupMember(classic_server.address, "offsets", ["orders"], partitions={"orders": 24},
                           assignors=("range",), **TIMING).start()
    wait_until(lambda: len(m.assignment()) == 24, what="the assignment")
    assert m.commit_offsets({("orders", 0): 42, ("orders", 5): 7}) == {("orders", 0): 0, ("orders", 5): 0}
    assert m.fetch_offsets([("orders", 0), ("orders", 5), ("orders", 6)]) == {
        ("orders", 0): 42, ("orders", 5): 7, ("orders", 6): -1}
    stub = pb_grpc.GroupCoordinatorStub(grpc.insecure_channel(classic_server.address))
    stale = stub.OffsetCommit(pb.OffsetCommitRequest(
        group_id="offsets", member_id=m.member_id, generation_id_or_member_epoch=m.generation + 1,
        topics=[pb.OffsetCommitRequestTopic(name="orders", partitions=[
            pb.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]), timeout=10)
    assert stale.topics[0].partitions[0].error_code == 22  # ILLEGAL_GENERATION
    (group,) = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["offsets"]), timeout=10).groups
    assert (group.group_type, group.group_state, group.protocol_type, group.assignor_name) == (
        "classic", "Stable", "consumer", "range")
    assert group.group_epoch == m.generation and [d.member_id for d in group.members] == [m.member_id]
    body = urllib.request.urlopen(f"http://127.0.0.1:{classic_server.server.metrics_port}/metrics", timeout=10)
    assert 'group_coordinator_groups{state="Stable",type="classic"} 1.0' in body.read().decode()
    consumer = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
        group_id="offsets", member_epoch=0, rebalance_timeout_ms=1000,
        subscribed_topic_names=pb.StringList(values=["orders"]), topic_partitions=pb.TopicPartitionsList()))
    # Kafka's online upgrade: the consumer-protocol member converts the group, keeping the classic member.
    assert consumer.error_code == 0
    (group,) = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["offsets"]), timeout=10).groups
    assert group.group_type == "consumer" and m.member_id in [d.member_id for d in group.members]
    m.close()


def test_a_classic_group_is_reloaded_from_the_log_after_a_restart(tmp_path: Path) -> None:
    def options() -> ServerOptions:
        config = BrokerConfig.from_mapping({**CLASSIC_FAST, "group.initial.rebalance.delay.ms": 0})
        return ServerOptions(listen="127.0.0.1:0", config=config, state_dir=tmp_path,
                             metadata_source=StaticMetadataSource({"orders": 24}))

    srv = ServerThread(options()).start()
    try:
        m = ClassicGroupMember(srv.address, "durable", ["orders"], partitions={"orders": 24}, assignors=("range",),
                               instance_id="host-1", **TIMING).start()
        wait_until(lambda: len(m.assignment()) == 24, what="the assignment")
        generation, member_id = m.generation, m.member_id
        m.kill()
    finally:
        srv.stop()
    srv = ServerThread(options()).start()
    try:
        stub = pb_grpc.GroupCoordinatorStub(grpc.insecure_channel(srv.address))
        (group,) = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["durable"]), timeout=10).groups
        assert (group.group_type, group.group_state, group.group_epoch) == ("classic", "Stable", generation)
        assert [(d.member_id, d.instance_id) for d in group.members] == [(member_id, "host-1")]
        assert group.members[0].member_assignment  # the leader's assignment was persisted
    finally:
        srv.stop()


def test_closing_a_member_whose_join_group_is_parked_cuts_the_call(classic_server: ServerThread) -> None:
    stub = pb_grpc.GroupCoordinatorStub(grpc.insecure_channel(classic_server.address))
    protocols = [pb.JoinGroupRequestProtocol(name="range", metadata=b"")]

    def join(member_id: str) -> pb.JoinGroupResponse:
        return stub.JoinGroup(pb.JoinGroupRequest(
            group_id="parked", member_id=member_id, protocol_type="consumer", session_timeout_ms=60_000,
            rebalance_timeout_ms=60_000, protocols=protocols), timeout=10)

    silent = join(join("").member_id)  # a member that will never rejoin: the next join phase waits for it
    stub.SyncGroup(pb.SyncGroupRequest(group_id="parked", generation_id=silent.generation_id,
                                       member_id=silent.member_id), timeout=10)
    static = ClassicGroupMember(classic_server.address, "parked", ["orders"], partitions={"orders": 24},
                                assignors=("range",), instance_id="host-1", session_timeout_ms=60_000,
                                rebalance_timeout_ms=60_000).start()

    def parked() -> bool:
        (group,) = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["parked"]), timeout=10).groups
        return group.group_state == "Joining" and len(group.members) == 2

    wait_until(parked, what="the static member's JoinGroup to be parked")
    static.close()
    assert static._thread is not None and not static._thread.is_alive()
