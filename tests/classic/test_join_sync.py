"""The two phases of a classic rebalance: Joining (parked JoinGroups, generation bump, leader) and AwaitingSync
(followers parked until the leader's assignment), on a virtual clock."""

from __future__ import annotations

from groupcoord.coordinator.core.classic.group import NEW_MEMBER_JOIN_TIMEOUT_MS
from groupcoord.coordinator.core.classic.records import ClassicGroupState
from groupcoord.coordinator.core.errors import Errors
from tests.classic.context import INITIAL_DELAY_MS, REBALANCE_MS, SESSION_MS, ClassicContext

DOWN, JOINING, AWAITING_SYNC, STABLE = (ClassicGroupState.DOWN, ClassicGroupState.JOINING,
                                        ClassicGroupState.AWAITING_SYNC, ClassicGroupState.STABLE)


def test_first_join_without_member_id_gets_member_id_required_and_a_generated_id() -> None:
    ctx = ClassicContext()
    response = ctx.join_answer(ctx.join(""))
    assert response.error_code is Errors.MEMBER_ID_REQUIRED
    assert response.member_id == "m1"
    assert ctx.state() is DOWN
    assert ctx.group().pending_members == {"m1"}


def test_a_member_id_required_member_joins_when_it_comes_back_with_its_id() -> None:
    ctx = ClassicContext()
    member_id, call = ctx.join_new()
    assert ctx.answer(call) is None  # parked: the new group waits the initial rebalance delay
    assert ctx.state() is JOINING
    ctx.advance(INITIAL_DELAY_MS)
    response = ctx.join_answer(call)
    assert (response.error_code, response.member_id, response.generation_id, response.leader) == (
        Errors.NONE, member_id, 1, member_id)
    assert ctx.state() is AWAITING_SYNC


def test_a_pending_member_that_never_comes_back_is_forgotten_after_its_session_timeout() -> None:
    ctx = ClassicContext()
    ctx.join("")
    ctx.advance(SESSION_MS)
    assert ctx.group().pending_members == set()
    assert ctx.state() is DOWN


def test_a_new_group_waits_the_initial_rebalance_delay_before_completing_its_first_join() -> None:
    ctx = ClassicContext(group_initial_rebalance_delay_ms=3000)
    _, call = ctx.join_new()
    ctx.advance(2999)
    assert ctx.answer(call) is None
    ctx.advance(1)
    assert ctx.join_answer(call).generation_id == 1


def test_the_initial_delay_extends_while_members_arrive_but_not_beyond_the_rebalance_timeout() -> None:
    ctx = ClassicContext(group_initial_rebalance_delay_ms=3000)
    calls = [ctx.join_new(rebalance_timeout_ms=7000)[1]]
    for _ in range(3):  # a new member in every delay window (t = 2, 4, 6 s): the delay keeps extending...
        ctx.advance(2000)
        calls.append(ctx.join_new(rebalance_timeout_ms=7000)[1])
    assert all(ctx.answer(c) is None for c in calls)
    ctx.advance(999)
    assert all(ctx.answer(c) is None for c in calls)
    ctx.advance(1)  # ...until the rebalance timeout (7 s) is used up: 3 s + 3 s + the 1 s that remains
    assert {ctx.join_answer(c).generation_id for c in calls} == {1}


def test_joining_parks_join_group_until_every_member_of_the_previous_generation_has_rejoined() -> None:
    ctx = ClassicContext()
    a, b, c = ctx.stable_group(3)
    ca = ctx.join(a)
    assert ctx.state() is JOINING
    cb = ctx.join(b)
    assert ctx.answer(ca) is None and ctx.answer(cb) is None
    cc = ctx.join(c)
    assert {ctx.join_answer(x).generation_id for x in (ca, cb, cc)} == {2}
    assert ctx.state() is AWAITING_SYNC


def test_the_generation_increments_when_joining_completes_and_only_the_leader_gets_the_members() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2, protocols=(("range", b"meta"),))
    calls = ctx.rejoin_all([a, b], protocols=(("range", b"meta2"),))
    leader, follower = ctx.join_answer(calls[a]), ctx.join_answer(calls[b])
    assert leader.generation_id == follower.generation_id == 2
    assert leader.leader == follower.leader == a
    assert [(m.member_id, m.metadata) for m in leader.members] == [(a, b"meta2"), (b, b"meta2")]
    assert follower.members == ()
    assert leader.protocol_type == "consumer" and leader.protocol_name == "range"


def test_dynamic_members_that_do_not_rejoin_within_the_rebalance_timeout_are_removed() -> None:
    ctx = ClassicContext()
    a, b, c = ctx.stable_group(3)
    ca = ctx.join(a)
    for _ in range(REBALANCE_MS // 5000 - 1):  # b and c stay alive, but heartbeating is not rejoining
        ctx.advance(5000)
        assert ctx.heartbeat(b, 1).error_code is ctx.heartbeat(c, 1).error_code is Errors.REBALANCE_IN_PROGRESS
    ctx.advance(4999)
    assert ctx.answer(ca) is None
    ctx.advance(1)
    response = ctx.join_answer(ca)
    assert response.generation_id == 2
    assert [m.member_id for m in response.members] == [a]
    assert set(ctx.group().members) == {a}
    assert ctx.heartbeat(c, 1).error_code is Errors.UNKNOWN_MEMBER_ID


def test_a_new_leader_is_elected_among_the_members_that_rejoined() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    cb = ctx.join(b, protocols=(("range", b"changed"),))  # starts a rebalance; the leader a never rejoins
    ctx.advance(SESSION_MS)  # a's session expires: everyone left has rejoined
    assert ctx.join_answer(cb).leader == b
    assert list(ctx.group().members) == [b]


def test_followers_sync_group_parks_in_awaiting_sync_until_the_leaders_arrives() -> None:
    ctx = ClassicContext()
    a, b, c = ctx.stable_group(3)
    calls = ctx.rejoin_all([a, b, c])
    assert all(ctx.join_answer(x).generation_id == 2 for x in calls.values())
    sb, sc = ctx.sync(b, 2), ctx.sync(c, 2)
    ctx.advance(5000)
    assert ctx.answer(sb) is None and ctx.answer(sc) is None
    assert ctx.state() is AWAITING_SYNC
    sa = ctx.sync(a, 2, assignments={a: b"A", b: b"B", c: b"C"})
    assert [ctx.sync_answer(x).assignment for x in (sa, sb, sc)] == [b"A", b"B", b"C"]
    assert ctx.sync_answer(sb).protocol_name == "range"
    assert ctx.state() is STABLE


def test_a_sync_group_in_stable_is_answered_at_once_with_the_members_assignment() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    assert ctx.sync_answer(ctx.sync(b, 1)).assignment == b.encode()


def test_a_member_the_leader_left_out_of_the_assignment_gets_empty_bytes() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    calls = ctx.rejoin_all([a, b])
    generation = ctx.join_answer(calls[a]).generation_id
    sb = ctx.sync(b, generation)
    ctx.sync(a, generation, assignments={a: b"all", "not-a-member": b"x"})
    assert ctx.sync_answer(sb).assignment == b""
    assert "not-a-member" not in ctx.group().members


def test_sync_group_while_joining_answers_rebalance_in_progress() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    ctx.join(a)
    assert ctx.sync_answer(ctx.sync(b, 1)).error_code is Errors.REBALANCE_IN_PROGRESS


def test_sync_group_of_another_generation_is_illegal_generation() -> None:
    ctx = ClassicContext()
    a, _ = ctx.stable_group(2)
    assert ctx.sync_answer(ctx.sync(a, 7)).error_code is Errors.ILLEGAL_GENERATION


def test_sync_group_naming_another_protocol_is_inconsistent_group_protocol() -> None:
    ctx = ClassicContext()
    a, _ = ctx.stable_group(2)
    assert ctx.sync_answer(ctx.sync(a, 1, protocol_name="roundrobin")).error_code \
        is Errors.INCONSISTENT_GROUP_PROTOCOL


def test_sync_group_from_a_stranger_is_unknown_member_id() -> None:
    ctx = ClassicContext()
    ctx.stable_group(1)
    assert ctx.sync_answer(ctx.sync("stranger", 1)).error_code is Errors.UNKNOWN_MEMBER_ID
    assert ctx.sync_answer(ctx.sync("stranger", 1, group_id="nope")).error_code is Errors.UNKNOWN_MEMBER_ID


def test_a_leader_rejoining_in_stable_starts_a_rebalance() -> None:
    ctx = ClassicContext()
    a, _ = ctx.stable_group(2)
    call = ctx.join(a)
    assert ctx.answer(call) is None
    assert ctx.state() is JOINING


def test_an_unchanged_follower_rejoining_in_stable_gets_the_current_generation_without_a_rebalance() -> None:
    ctx = ClassicContext()
    _, b = ctx.stable_group(2)
    response = ctx.join_answer(ctx.join(b))
    assert (response.error_code, response.generation_id, response.members) == (Errors.NONE, 1, ())
    assert ctx.state() is STABLE


def test_a_follower_rejoining_with_changed_metadata_starts_a_rebalance() -> None:
    ctx = ClassicContext()
    _, b = ctx.stable_group(2)
    call = ctx.join(b, protocols=(("range", b"new subscription"),))
    assert ctx.answer(call) is None
    assert ctx.state() is JOINING


def test_a_new_member_joining_a_stable_group_starts_a_rebalance() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    c, cc = ctx.join_new()
    assert ctx.state() is JOINING
    calls = ctx.rejoin_all([a, b])
    assert {ctx.join_answer(x).generation_id for x in [cc, *calls.values()]} == {2}


def test_a_second_join_group_of_a_parked_member_supersedes_the_first() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    first = ctx.join(a)
    second = ctx.join(a)
    assert ctx.join_answer(first).error_code is Errors.REBALANCE_IN_PROGRESS
    ctx.join(b)
    assert ctx.join_answer(second).generation_id == 2


def test_a_new_member_parked_in_join_group_too_long_is_removed_after_the_new_member_join_timeout() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    _, cc = ctx.join_new(rebalance_timeout_ms=10 * NEW_MEMBER_JOIN_TIMEOUT_MS)
    for _ in range(NEW_MEMBER_JOIN_TIMEOUT_MS // 5000):  # a and b stay alive but never rejoin
        ctx.advance(5000)
        ctx.heartbeat(a, 1)
        ctx.heartbeat(b, 1)
    assert ctx.join_answer(cc).error_code is Errors.UNKNOWN_MEMBER_ID
    assert set(ctx.group().members) == {a, b}
