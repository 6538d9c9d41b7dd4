"""A member whose heartbeat answers come back later than a heartbeat interval keeps its membership.

Why: the coordinator processes a heartbeat whether or not the client still waits for the answer, and the
answer may move the member's epoch. Kafka's coordinator tolerates one missed answer, and only when the
member's owned partitions are a subset of its current assignment (GroupMetadataManager
throwIfConsumerGroupMemberEpochIsInvalid). A client that gives up on a slow answer and heartbeats again at
its old epoch is fenced (FENCED_MEMBER_EPOCH, "Member epoch N is stale (current N+1 or N+2)") when the
missed answer was one step of a revocation (its owned partitions are no longer a subset) or when two answers
in a row were missed. Kafka's consumer waits for its one heartbeat in flight for request.timeout.ms (30 s).
Real coordinator process, real loopback TCP proxy delaying the member's bytes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from groupcoord.clients.group_member import GroupMember
from groupcoord.faults.tcp_proxy import TcpProxy
from tests.clients.cluster import Coordinator, wait_until
from tests.clients.test_group_member_safety import Recorder, converged, settings


@pytest.fixture
def coordinator() -> Iterator[Coordinator]:
    c = Coordinator(settings(6000)).start()
    yield c
    c.stop()


def test_member_answered_later_than_a_heartbeat_interval_is_neither_fenced_nor_loses_its_partitions(
        coordinator: Coordinator, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="groupcoord.client")
    rec = Recorder()
    with TcpProxy(coordinator.address) as proxy:
        slow = GroupMember(proxy.address, "safety", ["orders"], on_assigned=rec.on_assigned, on_lost=rec.on_lost,
                           rpc_timeout_s=5).start()
        others = [GroupMember(coordinator.address, "safety", ["orders"], rpc_timeout_s=5).start() for _ in range(2)]
        try:
            wait_until(lambda: converged([slow, *others]), 20, "first convergence")
            epoch_before, heartbeats_before = slow.member_epoch, slow.heartbeats
            # Every byte the slow member exchanges with the coordinator now takes 0.3 s each way: a heartbeat's
            # answer comes back after ~0.6 s or more, past one heartbeat interval (100 ms) and past the 0.5 s the
            # client used to wait, well within its 5.4 s lease.
            proxy.delay(0.3)
            for _ in range(2):  # the group changes under it: its epoch moves, it revokes and receives
                newcomer = GroupMember(coordinator.address, "safety", ["orders"], rpc_timeout_s=5).start()
                wait_until(lambda: bool(newcomer.assignment()), 20,  # noqa: B023 (called in this iteration)
                           "the newcomer receives partitions")
                time.sleep(1.0)
                newcomer.close()
                time.sleep(1.0)
            wait_until(lambda: slow.member_epoch > epoch_before and slow.heartbeats > heartbeats_before + 3, 20,
                       "the slow member heartbeats through the churn")
            proxy.forward()
            wait_until(lambda: converged([slow, *others]), 20, "convergence after the delay")
            fenced = [r.getMessage() for r in caplog.records if "heartbeat answered" in r.getMessage()]
            assert fenced == [], fenced
            assert rec.lost == [], "the slow member never lost its partitions"
        finally:
            for m in [slow, *others]:
                m.close()


def test_close_does_not_wait_out_a_heartbeat_answer_that_never_comes() -> None:
    """The wait for a slow answer (half the lease: 13.5 s here) ends when the application closes the member."""
    c = Coordinator(settings(30_000)).start()
    try:
        with TcpProxy(c.address) as proxy:
            m = GroupMember(proxy.address, "safety", ["orders"], rpc_timeout_s=20).start()
            try:
                wait_until(lambda: converged([m]), 20, "the member owns every partition")
                proxy.silence()
                sent = m.heartbeats
                time.sleep(0.5)  # a heartbeat is sent every 100 ms: one is in flight now, unanswered
                assert m.heartbeats == sent, "no answer passes the silent proxy"
                started = time.monotonic()
                m.close(leave=False)
                assert time.monotonic() - started < 5.0, "close waited for the unanswered heartbeat"
            finally:
                m.close(leave=False)
    finally:
        c.stop()
