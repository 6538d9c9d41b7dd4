"""GroupMember never acts on partitions it may have lost: coordinator restarts, pauses, silent networks,
fatal errors. Real coordinator processes, real signals, the real loopback TCP proxy."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupcoord.clients.group_member import GroupMember, GroupMemberError
from groupcoord.faults.tcp_proxy import TcpProxy
from tests.clients.cluster import Coordinator, OverlapSampler, TopicPartition, wait_until

HEARTBEAT_MS = 100


def settings(session_ms: int, heartbeat_ms: int = HEARTBEAT_MS) -> dict[str, int]:
    return {"group.consumer.min.heartbeat.interval.ms": 20, "group.consumer.heartbeat.interval.ms": heartbeat_ms,
            "group.consumer.min.session.timeout.ms": 500, "group.consumer.session.timeout.ms": session_ms,
            "group.consumer.assignment.interval.ms": 0}


class Recorder:
    """What one member's callbacks said, with time.monotonic() stamps."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.assigned: list[tuple[float, frozenset[TopicPartition]]] = []
        self.lost: list[tuple[float, frozenset[TopicPartition]]] = []
        self.fatal: list[tuple[float, GroupMemberError]] = []

    def on_assigned(self, tps: frozenset[TopicPartition]) -> None:
        with self.lock:
            self.assigned.append((time.monotonic(), tps))

    def on_lost(self, tps: frozenset[TopicPartition]) -> None:
        with self.lock:
            self.lost.append((time.monotonic(), tps))

    def on_fatal_error(self, error: GroupMemberError) -> None:
        with self.lock:
            self.fatal.append((time.monotonic(), error))


def member(address: str, rec: Recorder, **kw: object) -> GroupMember:
    return GroupMember(address, "safety", ["orders"], on_assigned=rec.on_assigned, on_lost=rec.on_lost,
                       on_fatal_error=rec.on_fatal_error, rpc_timeout_s=2, **kw)  # type: ignore[arg-type]


def converged(members: list[GroupMember], partitions: int = 12) -> bool:
    views = [m.assignment() for m in members]
    claimed = [tp for v in views for tp in v]
    return len(claimed) == partitions == len(set(claimed)) and all(views)


@pytest.fixture
def started() -> Iterator[list[Coordinator]]:
    coordinators: list[Coordinator] = []
    yield coordinators
    for c in coordinators:
        c.stop()


def test_members_release_and_rejoin_when_coordinator_restarts_without_state(started: list[Coordinator]) -> None:
    coordinator = Coordinator(settings(6000)).start()
    started.append(coordinator)
    recs = [Recorder() for _ in range(3)]
    members = [member(coordinator.address, r).start() for r in recs]
    try:
        wait_until(lambda: converged(members), 20, "first convergence")
        sampler = OverlapSampler(members).start()
        killed = time.monotonic()
        coordinator.kill()
        coordinator.start()  # same port, no state: it has forgotten the group
        back = time.monotonic()
        wait_until(lambda: all(r.lost for r in recs), 20, "on_lost on every member")
        lost_after = max(r.lost[0][0] for r in recs) - killed
        wait_until(lambda: converged(members), 30, "convergence after the restart")
        converged_after = time.monotonic() - back
        sampler.stop()
        print(f"\nrestart without state: on_lost on every member {lost_after * 1000:.0f} ms after the kill, "
              f"restart took {(back - killed) * 1000:.0f} ms; converged after {converged_after * 1000:.0f} ms "
              f"(rejoin held one lease, 5400 ms); "
              f"{sampler.samples} samples, {len(sampler.overlaps)} overlaps")
        assert sampler.overlaps == [], f"two members claimed a partition at once: {sampler.overlaps[:5]}"
        assert sampler.samples > 100
        assert all(m.fatal_error is None for m in members)
    finally:
        for m in members:
            m.close()


def test_members_release_within_lease_when_coordinator_pauses_and_rejoin_when_it_resumes(
        started: list[Coordinator]) -> None:
    session_ms = 3000
    coordinator = Coordinator(settings(session_ms)).start()
    started.append(coordinator)
    recs = [Recorder() for _ in range(3)]
    members = [member(coordinator.address, r).start() for r in recs]
    try:
        wait_until(lambda: converged(members), 20, "first convergence")
        assert all(m.session_timeout_ms == session_ms for m in members), "learned from the coordinator"
        sampler = OverlapSampler(members).start()
        stopped = time.monotonic()
        coordinator.pause()
        wait_until(lambda: all(r.lost for r in recs), 20, "on_lost on every member")
        lost_after = max(r.lost[0][0] for r in recs) - stopped
        assert all(not m.assignment() for m in members)
        time.sleep(session_ms / 1000)  # paused well past the session
        resumed = time.monotonic()
        coordinator.resume()
        wait_until(lambda: converged(members), 30, "convergence after the pause")
        rejoined_after = time.monotonic() - resumed
        sampler.stop()
        assert sampler.overlaps == []
        print(f"\nSIGSTOP: on_lost on every member {lost_after * 1000:.0f} ms after the pause "
              f"(session {session_ms} ms); converged {rejoined_after * 1000:.0f} ms after SIGCONT "
              f"(heartbeat {HEARTBEAT_MS} ms)")
    finally:
        for m in members:
            m.close()


def test_cut_off_member_releases_before_anyone_else_gets_its_partitions(started: list[Coordinator]) -> None:
    session_ms = 2000
    coordinator = Coordinator(settings(session_ms)).start()
    started.append(coordinator)
    with TcpProxy(coordinator.address) as proxy:
        cut_rec = Recorder()
        cut = member(proxy.address, cut_rec).start()
        recs = [Recorder() for _ in range(2)]
        others = [member(coordinator.address, r).start() for r in recs]
        members = [cut, *others]
        try:
            wait_until(lambda: converged(members), 20, "first convergence")
            held = cut.assignment()
            sampler = OverlapSampler(members).start()
            silenced = time.monotonic()
            proxy.silence()
            wait_until(lambda: cut_rec.lost, 20, "on_lost on the cut-off member")
            wait_until(lambda: converged(others), 20, "the others take over")
            sampler.stop()
            lost_at = cut_rec.lost[0][0]
            taken = [t for r in recs for t, tps in r.assigned if tps & held and t > silenced]
            assert taken, "the others were given the cut-off member's partitions"
            assert lost_at < min(taken), "on_lost must fire before anyone else is assigned the partitions"
            assert sampler.overlaps == []
            print(f"\nsilent proxy: on_lost {(lost_at - silenced) * 1000:.0f} ms after the cut "
                  f"(session {session_ms} ms), {(min(taken) - lost_at) * 1000:.0f} ms before another member "
                  f"was assigned its partitions")
            proxy.forward()
            back = time.monotonic()
            wait_until(lambda: cut.status().member_epoch > 0, 20, "the cut-off member rejoins")
            print(f"silent proxy: rejoined {(time.monotonic() - back) * 1000:.0f} ms after the path came back")
        finally:
            for m in members:
                m.close()


def test_member_releases_then_reports_fatal_error(started: list[Coordinator]) -> None:
    coordinator = Coordinator(settings(3000)).start()
    started.append(coordinator)
    rec = Recorder()
    m = member(coordinator.address, rec).start()
    try:
        wait_until(lambda: len(m.assignment()) == 12, 20, "assignment")
        m.server_assignor = "no-such-assignor"
        m.subscribe(["orders"])  # the next heartbeat carries the new assignor: UNSUPPORTED_ASSIGNOR
        wait_until(lambda: rec.fatal, 20, "on_fatal_error")
        assert rec.lost and rec.lost[0][0] <= rec.fatal[0][0], "released before reporting"
        assert rec.lost[0][1] == frozenset(("orders", p) for p in range(12))
        assert m.assignment() == frozenset()
        with pytest.raises(GroupMemberError) as e:
            m.wait_joined(1)
        assert e.value.code == 112
    finally:
        m.close()


def test_assignment_is_empty_from_the_moment_the_lease_runs_out(
        started: list[Coordinator]) -> None:
    coordinator = Coordinator(settings(2000)).start()
    started.append(coordinator)
    rec = Recorder()
    m = member(coordinator.address, rec).start()
    try:
        wait_until(lambda: len(m.assignment()) == 12, 20, "assignment")
        coordinator.pause()
        time.sleep(0.3)  # a heartbeat already answered before the pause has been processed by now
        expires = m.lease_expires_at()
        assert expires is not None
        # Read as fast as possible: no read that starts after the lease's end may show partitions, whether or
        # not the heartbeat thread has noticed yet.
        late_claims = 0
        while time.monotonic() < expires + 0.5:
            started_at = time.monotonic()
            if m.assignment() and started_at >= expires:
                late_claims += 1
        assert late_claims == 0
        assert not m.owns(("orders", 0))
        wait_until(lambda: rec.lost, 10, "on_lost")
    finally:
        coordinator.resume()
        m.close()


def test_members_reconnect_within_a_heartbeat_interval_of_the_coordinator_coming_back(
        started: list[Coordinator], tmp_path: Path) -> None:
    """kill -9 with a state dir, down for 6 s (past several steps of gRPC's default 1 s x 1.6 reconnect
    backoff), back within the lease: members keep their partitions and reconnect within one heartbeat interval
    (plus scheduling slack on a loaded machine)."""
    heartbeat_ms = 500
    coordinator = Coordinator(settings(15_000, heartbeat_ms), state_dir=str(tmp_path / "state")).start()
    started.append(coordinator)
    recs = [Recorder() for _ in range(3)]
    members = [member(coordinator.address, r).start() for r in recs]
    try:
        wait_until(lambda: converged(members), 20, "first convergence")
        before = [m.assignment() for m in members]
        coordinator.kill()
        time.sleep(6)
        coordinator.start()  # returns once the coordinator answers
        back = time.monotonic()
        counts = [m.heartbeats for m in members]
        wait_until(lambda: all(m.heartbeats > c and m.last_error == 0 for m, c in zip(members, counts, strict=True)),
                   20, "a successful heartbeat from every member")
        reconnect = time.monotonic() - back
        assert [m.assignment() for m in members] == before, "kept within the lease, no rebalance"
        assert not any(r.lost for r in recs)
        print(f"\nkill -9, 6 s down: every member heartbeating again {reconnect * 1000:.0f} ms after the "
              f"coordinator answered (heartbeat {heartbeat_ms} ms)")
        assert reconnect < 2 * heartbeat_ms / 1000, f"reconnect took {reconnect:.2f} s"
    finally:
        for m in members:
            m.close()
