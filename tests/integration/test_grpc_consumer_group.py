"""The real server on loopback, driven by real gRPC clients (`clients.GroupMember`)."""

from __future__ import annotations

import random
import threading
import time
import urllib.request
from collections.abc import Callable

import grpc
import pytest

from groupcoord.clients.group_member import GroupMember, TopicPartition
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.integration.conftest import start_server

ALL_ORDERS = {("orders", p) for p in range(24)}


def wait_until(cond: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def held(member: GroupMember) -> frozenset[TopicPartition]:
    """What the client process holds: its assignment plus partitions it has not yet released."""
    return member.assignment() | member.pending_revocation()


def converged(members: list[GroupMember], expected: set[TopicPartition]) -> bool:
    assignments = [m.assignment() for m in members]
    union = set().union(*assignments) if assignments else set()
    sizes = [len(a) for a in assignments]
    return union == expected and sum(sizes) == len(expected) and max(sizes) - min(sizes) <= 1 and all(
        not m.pending_revocation() for m in members)


class OwnershipWatcher:
    """Samples every live member continuously and records any partition held by two members at once."""

    def __init__(self) -> None:
        self.live: list[GroupMember] = []
        self.violations: list[str] = []
        self.samples = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def add(self, m: GroupMember) -> None:
        with self._lock:
            self.live.append(m)

    def remove(self, m: GroupMember) -> None:
        with self._lock:
            self.live.remove(m)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                members = list(self.live)
            seen: dict[TopicPartition, str] = {}
            for m in members:
                for tp in held(m):
                    if tp in seen and seen[tp] != m.member_id:
                        self.violations.append(f"{tp} held by {seen[tp]} and {m.member_id}")
                    seen[tp] = m.member_id
            self.samples += 1
            time.sleep(0.002)

    def __enter__(self) -> OwnershipWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_twelve_members_converge_to_a_balanced_assignment_and_rebalance_as_members_come_and_go(
        server: ServerThread) -> None:
    members: list[GroupMember] = []
    rng = random.Random(7)
    with OwnershipWatcher() as watcher:
        for _ in range(12):
            m = GroupMember(server.address, "churn", ["orders"]).start()
            members.append(m)
            watcher.add(m)
        wait_until(lambda: converged(members, ALL_ORDERS), what="12 members to converge")

        for step in range(6):
            if step % 2 == 0:  # a member leaves cleanly
                victim = members.pop(rng.randrange(len(members)))
                watcher.remove(victim)
                victim.close()
            else:  # a new member joins
                m = GroupMember(server.address, "churn", ["orders"]).start()
                members.append(m)
                watcher.add(m)
            wait_until(lambda: converged(members, ALL_ORDERS), what=f"convergence after step {step}")
        assert watcher.samples > 100
    assert watcher.violations == []
    for m in members:
        m.close()


def test_a_crashed_member_is_fenced_after_the_session_timeout_and_its_partitions_move(server: ServerThread) -> None:
    members = [GroupMember(server.address, "crash", ["orders"]).start() for _ in range(3)]
    wait_until(lambda: converged(members, ALL_ORDERS), what="3 members to converge")
    crashed = members.pop()
    crashed.close(leave=False)  # stops heartbeating without leaving: the coordinator must notice by itself
    started = time.monotonic()
    wait_until(lambda: converged(members, ALL_ORDERS), what="the survivors to take over")
    assert time.monotonic() - started >= 1.0  # not before the 1.5 s session timeout (minus scheduling slack)
    for m in members:
        m.close()


def test_static_member_rejoining_under_a_new_member_id_keeps_its_partitions(server: ServerThread) -> None:
    a = GroupMember(server.address, "static", ["orders"], instance_id="host-a").start()
    b = GroupMember(server.address, "static", ["orders"], instance_id="host-b").start()
    wait_until(lambda: converged([a, b], ALL_ORDERS), what="static members to converge")
    before = a.assignment()
    stub = pb_grpc.GroupCoordinatorStub(grpc.insecure_channel(server.address))
    epoch_before = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["static"])).groups[0].group_epoch
    a.close()  # static leave: epoch -2, assignment kept for the instance
    a2 = GroupMember(server.address, "static", ["orders"], instance_id="host-a").start()
    wait_until(lambda: a2.assignment() == before, what="the rejoined instance to get its partitions back")
    group = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["static"])).groups[0]
    assert group.group_epoch == epoch_before  # no rebalance
    assert a2.member_id != a.member_id
    a2.close()
    b.close()


def test_offsets_committed_with_the_member_epoch_are_fetched_back(server: ServerThread) -> None:
    m = GroupMember(server.address, "offsets", ["orders"]).start()
    wait_until(lambda: len(m.assignment()) == 24, what="assignment")
    errors = m.commit_offsets({("orders", 0): 42, ("orders", 5): 7})
    assert errors == {("orders", 0): 0, ("orders", 5): 0}
    assert m.fetch_offsets([("orders", 0), ("orders", 5), ("orders", 6)]) == {
        ("orders", 0): 42, ("orders", 5): 7, ("orders", 6): -1}
    m.close()


def test_metrics_are_scraped_over_http_with_kafka_names(server: ServerThread) -> None:
    members = [GroupMember(server.address, "metrics", ["orders"]).start() for _ in range(3)]
    wait_until(lambda: converged(members, ALL_ORDERS), what="convergence")
    body = urllib.request.urlopen(f"http://127.0.0.1:{server.server.metrics_port}/metrics", timeout=10).read()
    text = body.decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    for q in ("0.5", "0.95", "0.99", "0.999"):
        for base in ("background_queue_time_ms", "background_processing_time_ms", "event_queue_time_ms",
                     "event_processing_time_ms"):
            assert f'group_coordinator_{base}{{quantile="{q}"}}' in samples
    assert samples["group_coordinator_background_processing_time_ms_max"] > 0
    assert samples["group_coordinator_event_processing_time_ms_count"] > 10
    assert 0.0 <= samples["group_coordinator_thread_idle_ratio_avg"] <= 1.0
    assert 0.0 <= samples["group_coordinator_background_thread_idle_ratio_avg"] <= 1.0
    assert samples['group_coordinator_groups{state="STABLE",type="consumer"}'] == 1.0
    assert samples["group_coordinator_members"] == 3.0
    assert samples['group_coordinator_consumer_group_heartbeats_total{error="NONE"}'] > 3
    assert samples['group_coordinator_assignor_runs_total{mode="offloaded"}'] >= 1
    assert samples["group_coordinator_rebalances_total"] >= 3
    for m in members:
        m.close()


def test_malformed_requests_get_kafka_error_codes_and_the_server_keeps_serving(server: ServerThread) -> None:
    stub = pb_grpc.GroupCoordinatorStub(grpc.insecure_channel(server.address))
    bad = [
        (pb.ConsumerGroupHeartbeatRequest(), 42),  # empty group id
        (pb.ConsumerGroupHeartbeatRequest(group_id="g", member_epoch=0), 42),  # no rebalance timeout
        (pb.ConsumerGroupHeartbeatRequest(group_id="g", member_id="x", member_epoch=-7), 42),
        (pb.ConsumerGroupHeartbeatRequest(group_id="g", member_id="x", member_epoch=3), 69),
        (pb.ConsumerGroupHeartbeatRequest(group_id="g", member_epoch=0, rebalance_timeout_ms=1000,
                                          subscribed_topic_regex="(unclosed"), 128),
        (pb.ConsumerGroupHeartbeatRequest(group_id="g", member_epoch=0, rebalance_timeout_ms=1000,
                                          server_assignor="nope",
                                          subscribed_topic_names=pb.StringList(values=["orders"])), 112),
        (pb.ConsumerGroupHeartbeatRequest(group_id="g" * 5000, member_epoch=0), 42),
    ]
    for request, code in bad:
        assert stub.ConsumerGroupHeartbeat(request, timeout=5).error_code == code, request
    resp = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
        group_id="g", member_epoch=0, rebalance_timeout_ms=1000,
        subscribed_topic_names=pb.StringList(values=["orders"]), topic_partitions=pb.TopicPartitionsList()), timeout=5)
    assert resp.error_code == 0 and resp.member_id and resp.member_epoch >= 1


@pytest.mark.parametrize("offload", [True, False])
def test_offload_setting_changes_nothing_a_client_can_see_except_timing(offload: bool) -> None:
    srv = start_server({"orders": 24}, **{"group.consumer.assignor.offload.enable": offload})
    try:
        members = [GroupMember(srv.address, "o", ["orders"]).start() for _ in range(4)]
        wait_until(lambda: converged(members, ALL_ORDERS), what="convergence")
        for m in members:
            m.close()
    finally:
        srv.stop()
