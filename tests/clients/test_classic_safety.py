"""ClassicGroupMember and LeaderElection release first: the lease (from the session timeout sent in
JoinGroup) runs out while a silent proxy cuts one member off, before anyone else is given what it held."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from groupcoord.clients.classic_member import ClassicGroupMember
from groupcoord.clients.leader_election import LeaderElection
from groupcoord.faults.tcp_proxy import TcpProxy
from tests.clients.cluster import Coordinator, TopicPartition, wait_until

SESSION_MS = 2000
HEARTBEAT_MS = 100
SETTINGS = {"group.min.session.timeout.ms": 500, "group.initial.rebalance.delay.ms": 0}


@pytest.fixture
def coordinator() -> Iterator[Coordinator]:
    c = Coordinator(SETTINGS).start()
    yield c
    c.stop()


class Events:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log: list[tuple[float, str, str, frozenset[TopicPartition]]] = []

    def recorder(self, who: str, what: str):  # type: ignore[no-untyped-def]
        def record(tps: frozenset[TopicPartition] = frozenset()) -> None:
            with self.lock:
                self.log.append((time.monotonic(), who, what, tps))
        return record


def classic(address: str, who: str, events: Events) -> ClassicGroupMember:
    return ClassicGroupMember(address, "classic-safety", ["orders"], partitions={"orders": 12},
                              on_assigned=events.recorder(who, "assigned"), on_lost=events.recorder(who, "lost"),
                              session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                              rebalance_timeout_ms=3000, rpc_timeout_s=2)


def test_cut_off_classic_member_releases_before_anyone_else_gets_its_partitions(coordinator: Coordinator) -> None:
    events = Events()
    with TcpProxy(coordinator.address) as proxy:
        cut = classic(proxy.address, "cut", events).start()
        others = [classic(coordinator.address, f"m{i}", events).start() for i in range(2)]
        members = [cut, *others]
        try:
            wait_until(lambda: sum(len(m.assignment()) for m in members) == 12 and all(m.assignment()
                                                                                      for m in members),
                       30, "first convergence")
            held = cut.assignment()
            silenced = time.monotonic()
            proxy.silence()
            wait_until(lambda: any(w == "cut" and e == "lost" for _, w, e, _ in events.log), 20, "on_lost")
            wait_until(lambda: sum(len(m.assignment()) for m in others) == 12, 30, "the others take over")
            lost_at = min(t for t, w, e, _ in events.log if w == "cut" and e == "lost")
            taken = [t for t, w, e, tps in events.log
                     if w != "cut" and e == "assigned" and tps & held and t > silenced]
            assert taken and lost_at < min(taken)
            assert cut.assignment() == frozenset()
            print(f"\nclassic, silent proxy: on_lost {(lost_at - silenced) * 1000:.0f} ms after the cut "
                  f"(session {SESSION_MS} ms), {(min(taken) - lost_at) * 1000:.0f} ms before another member "
                  f"was assigned its partitions")
            proxy.forward()
            wait_until(lambda: bool(cut.assignment()), 30, "the cut-off member rejoins and gets partitions")
        finally:
            for m in members:
                m.close()


def test_cut_off_writer_is_demoted_before_another_writer_is_elected(coordinator: Coordinator) -> None:
    events = Events()
    elections: list[LeaderElection] = []

    def election(address: str, who: str) -> LeaderElection:
        e = LeaderElection(address, "writer", identity=who, on_elected=lambda epoch: events.recorder(who, "elected")(),
                           on_demoted=events.recorder(who, "demoted"), session_timeout_ms=SESSION_MS,
                           heartbeat_interval_ms=HEARTBEAT_MS, rebalance_timeout_ms=3000, rpc_timeout_s=2)
        elections.append(e)
        return e.start()

    with TcpProxy(coordinator.address) as proxy:
        first = election(proxy.address, "first")
        try:
            wait_until(first.is_writer, 30, "the first member is the writer")
            second = election(coordinator.address, "second")
            wait_until(lambda: second.wait_stable(0.05) and first.is_writer(), 30, "both in one generation")
            silenced = time.monotonic()
            proxy.silence()
            wait_until(second.is_writer, 30, "the second member takes over")
            demoted = [t for t, w, e, _ in events.log if w == "first" and e == "demoted" and t > silenced]
            elected = [t for t, w, e, _ in events.log if w == "second" and e == "elected"]
            assert demoted and elected and demoted[0] < elected[0]
            assert not first.is_writer()
        finally:
            for e in elections:
                e.close()


def test_classic_member_cut_off_while_its_join_waits_releases_at_its_lease_end(coordinator: Coordinator) -> None:
    """Found by the Kafka-backed fault suite (30-minute run, classic group): a member that had just revoked and
    sent JoinGroup was cut off; the call waited out its deadline (rebalance timeout plus RPC timeout), so its
    `on_lost` came 1 s after its lease had ended and 0.5 s after the other member was given its partitions. Its
    `assignment()` was empty at the lease end, but `on_lost` is what tells the application to stop."""
    events = Events()
    with TcpProxy(coordinator.address) as proxy:
        cut = classic(proxy.address, "cut", events).start()
        other = classic(coordinator.address, "other", events).start()
        try:
            wait_until(lambda: len(cut.assignment()) + len(other.assignment()) == 12 and bool(cut.assignment()),
                       30, "first convergence")
            held = cut.assignment()
            silenced = time.monotonic()
            proxy.silence()
            cut.request_rejoin()  # its JoinGroup goes out on the cut link and waits there for its deadline
            wait_until(lambda: other.assignment() >= held, 30, "the other member takes over")
            taken = min(t for t, w, e, tps in events.log if w == "other" and e == "assigned" and tps & held
                        and t > silenced)
            lost = [t for t, w, e, _ in events.log if w == "cut" and e == "lost" and t > silenced]
            assert lost and lost[0] < taken, (
                f"on_lost {'not yet' if not lost else f'{(lost[0] - silenced) * 1000:.0f} ms after the cut'} when "
                f"the other member had its partitions, {(taken - silenced) * 1000:.0f} ms after the cut")
        finally:
            proxy.forward()
            cut.close()
            other.close()
