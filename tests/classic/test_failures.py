"""The seed's failure cases: every one invalidates the generation and sends the members back to Joining."""

from __future__ import annotations

from groupcoord.coordinator.core.classic.effects import session_timer
from groupcoord.coordinator.core.classic.records import ClassicGroupState
from groupcoord.coordinator.core.errors import Errors
from tests.classic.context import REBALANCE_MS, SESSION_MS, ClassicContext

JOINING, AWAITING_SYNC, STABLE = ClassicGroupState.JOINING, ClassicGroupState.AWAITING_SYNC, ClassicGroupState.STABLE


def awaiting_sync_group(ctx: ClassicContext, n: int = 3) -> list[str]:
    """A Stable group of `n` whose members all rejoined: generation 2, AwaitingSync."""
    ids = ctx.stable_group(n)
    calls = ctx.rejoin_all(ids)
    assert {ctx.join_answer(c).generation_id for c in calls.values()} == {2}
    assert ctx.state() is AWAITING_SYNC
    return ids


def test_a_leader_that_misses_its_session_timeout_in_awaiting_sync_invalidates_the_generation() -> None:
    ctx = ClassicContext()
    leader, b, c = awaiting_sync_group(ctx)
    sb, sc = ctx.sync(b, 2), ctx.sync(c, 2)
    ctx.advance(SESSION_MS - 1)
    assert ctx.answer(sb) is None
    ctx.advance(1)  # the leader never synced nor heartbeated
    assert ctx.sync_answer(sb).error_code is ctx.sync_answer(sc).error_code is Errors.REBALANCE_IN_PROGRESS
    assert ctx.state() is JOINING
    assert leader not in ctx.group().members
    calls = ctx.rejoin_all([b, c])
    response = ctx.join_answer(calls[b])
    assert (response.generation_id, response.leader) == (3, b)


def test_a_leader_that_reports_an_error_in_sync_group_invalidates_the_generation_and_the_error_propagates() -> None:
    ctx = ClassicContext()
    leader, b, c = awaiting_sync_group(ctx)
    sb = ctx.sync(b, 2)
    sl = ctx.sync(leader, 2, error_code=Errors.INCONSISTENT_GROUP_PROTOCOL)
    assert ctx.sync_answer(sb).error_code is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.sync_answer(sl).error_code is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.state() is JOINING
    assert ctx.sync_answer(ctx.sync(c, 2)).error_code is Errors.REBALANCE_IN_PROGRESS
    calls = ctx.rejoin_all([leader, b, c])
    assert {ctx.join_answer(x).generation_id for x in calls.values()} == {3}


def test_a_join_group_during_awaiting_sync_aborts_the_synchronization() -> None:
    ctx = ClassicContext()
    a, b, c = awaiting_sync_group(ctx)
    sb = ctx.sync(b, 2)
    cc = ctx.join(c)  # e.g. it missed its JoinGroup response, or the coordinator failed over (seed case 2)
    assert ctx.sync_answer(sb).error_code is Errors.REBALANCE_IN_PROGRESS
    assert ctx.state() is JOINING
    assert ctx.answer(cc) is None
    assert ctx.sync_answer(ctx.sync(a, 2, assignments={a: b"x"})).error_code is Errors.REBALANCE_IN_PROGRESS
    calls = ctx.rejoin_all([a, b])
    assert {ctx.join_answer(x).generation_id for x in [cc, *calls.values()]} == {3}


def test_a_new_member_joining_during_awaiting_sync_aborts_the_synchronization() -> None:
    ctx = ClassicContext()
    _, b, _ = awaiting_sync_group(ctx)
    sb = ctx.sync(b, 2)
    first = ctx.join("")  # MEMBER_ID_REQUIRED does not abort...
    assert ctx.answer(sb) is None
    ctx.join(ctx.join_answer(first).member_id)  # ...joining with the id does
    assert ctx.sync_answer(sb).error_code is Errors.REBALANCE_IN_PROGRESS


def test_members_that_never_send_sync_group_are_removed_after_the_rebalance_timeout() -> None:
    ctx = ClassicContext(group_max_session_timeout_ms=120_000)
    a, b, c = ctx.stable_group(3, session_timeout_ms=60_000)
    calls = ctx.rejoin_all([a, b, c], session_timeout_ms=60_000)
    assert ctx.join_answer(calls[a]).generation_id == 2
    sb = ctx.sync(b, 2)
    ctx.sync(a, 2, assignments={a: b"A", b: b"B", c: b"C"})
    assert ctx.state() is STABLE
    ctx.heartbeat(c, 2)
    ctx.advance(REBALANCE_MS)  # c heartbeats (its session is 60 s) but never syncs
    assert ctx.sync_answer(sb).assignment == b"B"
    assert c not in ctx.group().members
    assert ctx.state() is JOINING


def test_a_follower_parked_in_sync_group_counts_as_alive_and_its_session_restarts_when_answered() -> None:
    ctx = ClassicContext()
    a, b = awaiting_sync_group(ctx, 2)
    sb = ctx.sync(b, 2)
    for _ in range(3):  # the leader heartbeats but takes longer than b's session to assign
        ctx.advance(SESSION_MS // 2)
        ctx.heartbeat(a, 2)
    assert b in ctx.group().members
    ctx.sync(a, 2, assignments={a: b"A", b: b"B"})
    assert ctx.sync_answer(sb).assignment == b"B"
    assert ctx.timers[session_timer("grp", b)] == ctx.now + SESSION_MS
    ctx.advance(SESSION_MS)  # b died right after its SyncGroup returned: it is noticed
    assert b not in ctx.group().members


def test_a_follower_whose_session_expires_in_stable_is_removed_and_the_group_rebalances() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    ctx.advance(SESSION_MS // 2)
    ctx.heartbeat(a, 1)
    ctx.advance(SESSION_MS // 2)
    assert b not in ctx.group().members
    assert ctx.heartbeat(a, 1).error_code is Errors.REBALANCE_IN_PROGRESS
    response = ctx.join_answer(ctx.join(a))
    assert (response.generation_id, [m.member_id for m in response.members]) == (2, [a])


def test_a_session_timer_that_fires_after_it_was_rearmed_is_ignored() -> None:
    ctx = ClassicContext()
    a, _ = ctx.stable_group(2)
    deadline = ctx.timers[session_timer("grp", a)]
    ctx.now = deadline - 1
    ctx.heartbeat(a, 1)  # the runtime may already have queued the old timer: it fires late
    ctx.apply(ctx.shard.on_timer(session_timer("grp", a), deadline))
    assert a in ctx.group().members
    assert ctx.state() is STABLE


def test_a_removed_member_parked_in_join_group_is_answered_unknown_member_id() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    ca = ctx.join(a)
    ctx.leave(a)
    assert ctx.join_answer(ca).error_code is Errors.UNKNOWN_MEMBER_ID
    assert ctx.join_answer(ctx.join(b)).generation_id == 2
