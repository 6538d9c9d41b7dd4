"""Online migration over real gRPC: a 6-member classic group (cooperative-sticky) is rolled member by member to
the consumer protocol, and back, while a sampler checks that no partition is ever owned by two members at once
and that every partition is owned again before the next member is rolled (within one rebalance). Run with
KIP-1263's batching and offload off and on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import pytest

from groupcoord.clients.classic_member import ClassicGroupMember
from groupcoord.clients.consumer_protocol import TopicPartition
from groupcoord.clients.group_member import GroupMember
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.faults.tcp_proxy import TcpProxy
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.clients.cluster import OverlapSampler
from tests.integration.conftest import FAST, start_server

pytestmark = pytest.mark.integration

TOPIC_PARTITIONS = 24
ALL = frozenset(("orders", p) for p in range(TOPIC_PARTITIONS))
CLASSIC_TIMING: dict[str, Any] = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 100,
                                  "rebalance_timeout_ms": 5000}
MODES = {
    "sync": {"group.consumer.assignment.interval.ms": 0, "group.consumer.assignor.offload.enable": False},
    "batched-offloaded": {"group.consumer.assignment.interval.ms": 300,
                          "group.consumer.assignor.offload.enable": True},
}


@pytest.fixture(params=sorted(MODES))
def server(request: pytest.FixtureRequest) -> Iterator[ServerThread]:
    srv = start_server({"orders": TOPIC_PARTITIONS}, **{
        "group.min.session.timeout.ms": 100, "group.initial.rebalance.delay.ms": 200,
        "group.consumer.session.timeout.ms": 2000, **MODES[request.param]})
    try:
        yield srv
    finally:
        srv.stop()


class CoverageSampler:
    """Samples the union of what the members may act on; keeps the longest time a partition went unowned."""

    def __init__(self, members: list[Any]) -> None:
        self._members = members
        self._since: dict[TopicPartition, float] = {}
        self.longest_gap_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> CoverageSampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            owned: set[TopicPartition] = set().union(*(m.assignment() for m in self._members))
            now = time.monotonic()
            for tp in ALL:
                if tp in owned:
                    start = self._since.pop(tp, None)
                    if start is not None:
                        self.longest_gap_s = max(self.longest_gap_s, now - start)
                else:
                    self._since.setdefault(tp, now)
            time.sleep(0.005)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def wait_until(cond: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def covered_once(members: list[Any]) -> bool:
    """Every partition owned, by exactly one member, and every live member holds some."""
    assignments = [m.assignment() for m in members]
    return set().union(*assignments) == ALL and sum(len(a) for a in assignments) == len(ALL) and all(assignments)


def classic(srv: ServerThread, i: int) -> ClassicGroupMember:
    return ClassicGroupMember(srv.address, "migrating", ["orders"], partitions={"orders": TOPIC_PARTITIONS},
                              assignors=("cooperative-sticky",), **CLASSIC_TIMING)


def consumer(srv: ServerThread, i: int) -> GroupMember:
    return GroupMember(srv.address, "migrating", ["orders"], rebalance_timeout_ms=5000)


def roll(srv: ServerThread, start_with: Callable[[ServerThread, int], Any],
         roll_to: Callable[[ServerThread, int], Any]) -> tuple[OverlapSampler, CoverageSampler, list[str]]:
    """Roll every member of `start_with`'s kind to `roll_to`'s; returns the samplers and the group's type after
    each step."""
    stub = pb_grpc.GroupCoordinatorStub(grpc.insecure_channel(srv.address))
    types: list[str] = []
    old = [start_with(srv, i) for i in range(6)]
    new = [roll_to(srv, i) for i in range(6)]
    for m in old:
        m.start()
    wait_until(lambda: covered_once(old), what="the first group to converge")
    overlaps = OverlapSampler(old + new).start()
    coverage = CoverageSampler(old + new).start()
    i = -1
    try:
        for i in range(6):
            old[i].close()
            new[i].start()
            live = old[i + 1:] + new[:i + 1]
            wait_until(partial(covered_once, live), what=f"every partition owned again after step {i}")
            (group,) = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["migrating"]), timeout=10).groups
            types.append(group.group_type)
    finally:
        overlaps.stop()
        coverage.stop()
        for m in old[i + 1:] + new:
            m.close()
    return overlaps, coverage, types


def test_a_classic_group_rolled_member_by_member_to_the_consumer_protocol_never_owns_a_partition_twice(
        server: ServerThread) -> None:
    overlaps, coverage, types = roll(server, classic, consumer)
    assert types == ["consumer"] * 6  # the first consumer-protocol member upgraded the group
    print(f"upgrade: {overlaps.samples} samples, longest unowned gap {coverage.longest_gap_s:.3f}s")
    assert overlaps.samples > 0 and overlaps.overlaps == []


def test_a_consumer_group_rolled_back_member_by_member_to_the_classic_protocol_never_owns_a_partition_twice(
        server: ServerThread) -> None:
    overlaps, coverage, types = roll(server, consumer, classic)
    assert types == ["consumer"] * 5 + ["classic"]  # mixed until the last consumer-protocol member left
    print(f"downgrade: {overlaps.samples} samples, longest unowned gap {coverage.longest_gap_s:.3f}s")
    assert overlaps.samples > 0 and overlaps.overlaps == []


def test_a_mixed_group_is_reloaded_from_the_log_with_its_classic_members(tmp_path: Path) -> None:
    """The classic members' metadata records reach the log and come back: after a restart the classic member is
    still a classic member of the consumer group (its heartbeat is answered, not UNKNOWN_MEMBER_ID)."""
    def options() -> ServerOptions:
        config = BrokerConfig.from_mapping({**FAST, "group.min.session.timeout.ms": 100,
                                            "group.initial.rebalance.delay.ms": 0})
        return ServerOptions(listen="127.0.0.1:0", config=config, state_dir=tmp_path,
                             metadata_source=StaticMetadataSource({"orders": TOPIC_PARTITIONS}))

    srv = ServerThread(options()).start()
    try:
        old = ClassicGroupMember(srv.address, "durable", ["orders"], partitions={"orders": TOPIC_PARTITIONS},
                                 assignors=("cooperative-sticky",), session_timeout_ms=60_000,
                                 heartbeat_interval_ms=100, rebalance_timeout_ms=5000).start()
        wait_until(lambda: old.assignment() == ALL, what="the classic member's assignment")
        new = GroupMember(srv.address, "durable", ["orders"], rebalance_timeout_ms=5000).start()
        wait_until(lambda: covered_once([old, new]), what="the mixed group to converge")
        member_id, generation = old.member_id, old.generation
        old.kill()
        new.close(leave=False)
    finally:
        srv.stop()
    srv = ServerThread(options()).start()
    try:
        stub = pb_grpc.GroupCoordinatorStub(grpc.insecure_channel(srv.address))
        (group,) = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["durable"]), timeout=10).groups
        assert group.group_type == "consumer" and member_id in [d.member_id for d in group.members]
        beat = stub.Heartbeat(pb.HeartbeatRequest(group_id="durable", generation_id=generation, member_id=member_id),
                              timeout=10)
        assert beat.error_code == 0
    finally:
        srv.stop()


def test_a_closing_group_member_stops_claiming_its_partitions_before_it_sends_its_leave() -> None:
    """Found by the rolled-back migration test under load: GroupMember.close() sent its leave heartbeat and
    only then dropped its partitions, so while the leave's answer was on its way back the coordinator had
    already handed them to others and two members claimed them. A consumer revokes before it leaves (as the
    classic member's close() does)."""
    srv = start_server({"orders": TOPIC_PARTITIONS})
    proxy = TcpProxy(srv.address).start()
    stub = pb_grpc.GroupCoordinatorStub(grpc.insecure_channel(srv.address))
    leaving = GroupMember(proxy.address, "closing", ["orders"], rebalance_timeout_ms=5000).start()
    try:
        wait_until(lambda: leaving.assignment() == ALL, what="the member's assignment")
        proxy.delay(1.0)
        closer = threading.Thread(target=leaving.close)
        closer.start()

        def gone() -> bool:
            (group,) = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["closing"]), timeout=10).groups
            return not group.members

        wait_until(gone, what="the coordinator to process the leave")
        assert leaving.assignment() == frozenset()  # the coordinator may give them away now
        closer.join(timeout=30)
    finally:
        proxy.close()
        srv.stop()
