"""Static membership (KIP-345) in the classic protocol: group instance ids."""

from __future__ import annotations

from groupcoord.coordinator.core.classic.records import ClassicGroupState
from groupcoord.coordinator.core.errors import Errors
from tests.classic.context import INITIAL_DELAY_MS, REBALANCE_MS, SESSION_MS, ClassicContext


def static_stable_group(ctx: ClassicContext, *instances: str) -> dict[str, str]:
    """Static members of a new group, one rebalance completed; returns instance id -> member id."""
    calls = [ctx.join("", instance_id=i) for i in instances]
    ctx.advance(2 * INITIAL_DELAY_MS)
    assert all(ctx.join_answer(c).error_code is Errors.NONE for c in calls)
    ids = dict(ctx.group().static_members)
    ctx.complete_sync(ids.values(), 1)
    return ids


def test_a_static_member_joins_without_the_member_id_round_trip() -> None:
    ctx = ClassicContext()
    call = ctx.join("", instance_id="host-a")
    ctx.advance(INITIAL_DELAY_MS)
    response = ctx.join_answer(call)
    assert response.error_code is Errors.NONE and response.member_id == ctx.group().static_members["host-a"]


def test_a_static_member_restarting_in_stable_keeps_its_assignment_without_a_rebalance() -> None:
    ctx = ClassicContext()
    ids = static_stable_group(ctx, "host-a", "host-b")
    old_b = ids["host-b"]
    response = ctx.join_answer(ctx.join("", instance_id="host-b"))  # host-b restarted: no member id
    new_b = response.member_id
    assert new_b != old_b and response.generation_id == 1 and not response.skip_assignment
    assert ctx.state() is ClassicGroupState.STABLE
    assert ctx.sync_answer(ctx.sync(new_b, 1, instance_id="host-b")).assignment == old_b.encode()
    assert ctx.heartbeat(old_b, 1, instance_id="host-b").error_code is Errors.FENCED_INSTANCE_ID
    assert ctx.heartbeat(new_b, 1, instance_id="host-b").error_code is Errors.NONE
    assert ctx.records[-1].state == "Stable" and new_b in {m.member_id for m in ctx.records[-1].members}


def test_a_restarted_static_leader_is_told_to_skip_the_assignment() -> None:
    ctx = ClassicContext()
    static_stable_group(ctx, "host-a", "host-b")
    response = ctx.join_answer(ctx.join("", instance_id="host-a"))
    assert response.leader == response.member_id and response.skip_assignment
    assert len(response.members) == 2
    assert ctx.state() is ClassicGroupState.STABLE


def test_a_static_member_restarting_with_a_protocol_that_changes_the_choice_triggers_a_rebalance() -> None:
    ctx = ClassicContext()
    both = (("range", b""), ("roundrobin", b""))
    calls = [ctx.join("", instance_id=i, protocols=both) for i in ("host-a", "host-b")]
    ctx.advance(2 * INITIAL_DELAY_MS)
    assert ctx.join_answer(calls[0]).protocol_name == "range"
    ctx.complete_sync(ctx.group().members, 1)
    call = ctx.join("", instance_id="host-b", protocols=(("roundrobin", b""),))
    assert ctx.answer(call) is None
    assert ctx.state() is ClassicGroupState.JOINING
    ctx.join(ctx.group().static_members["host-a"], protocols=both)
    assert ctx.join_answer(call).protocol_name == "roundrobin"


def test_a_static_member_restarting_during_awaiting_sync_fences_the_old_id_and_rebalances() -> None:
    ctx = ClassicContext()
    ids = static_stable_group(ctx, "host-a", "host-b")
    calls = ctx.rejoin_all(ids.values(), protocols=(("range", b"v2"),))
    assert ctx.state() is ClassicGroupState.AWAITING_SYNC
    old_sync = ctx.sync(ids["host-b"], 2, instance_id="host-b")
    restarted = ctx.join("", instance_id="host-b", protocols=(("range", b"v2"),))
    assert ctx.sync_answer(old_sync).error_code is Errors.FENCED_INSTANCE_ID
    assert ctx.state() is ClassicGroupState.JOINING
    ctx.join(ids["host-a"], protocols=(("range", b"v2"),))
    assert ctx.join_answer(restarted).generation_id == 3
    assert ctx.join_answer(calls[ids["host-a"]]).generation_id == 2


def test_a_static_member_that_misses_a_join_phase_stays_in_the_group_a_dynamic_one_does_not() -> None:
    ctx = ClassicContext(group_max_session_timeout_ms=120_000)
    ctx.join("", instance_id="host-s", session_timeout_ms=60_000)
    d_id, d_call = ctx.join_new(session_timeout_ms=60_000)
    l_id, l_call = ctx.join_new(session_timeout_ms=60_000)
    ctx.advance(2 * INITIAL_DELAY_MS)
    s_id = ctx.group().static_members["host-s"]
    ctx.complete_sync([s_id, d_id, l_id], 1)
    leader = ctx.group().leader_id
    assert leader == s_id
    # d and the static member stay alive (heartbeats) but do not rejoin; l forces a rebalance.
    lc = ctx.join(l_id, session_timeout_ms=60_000, protocols=(("range", b"changed"),))
    for _ in range(REBALANCE_MS // 10_000):
        ctx.advance(10_000)
        ctx.heartbeat(s_id, 1, instance_id="host-s")
        ctx.heartbeat(d_id, 1)
    response = ctx.join_answer(lc)
    assert response.generation_id == 2 and response.leader == l_id  # the leader passes to one who rejoined
    assert set(ctx.group().members) == {s_id, l_id}


def test_a_static_member_whose_session_expires_is_removed() -> None:
    ctx = ClassicContext()
    ids = static_stable_group(ctx, "host-a", "host-b")
    for _ in range(2):
        ctx.advance(SESSION_MS // 2)
        ctx.heartbeat(ids["host-a"], 1, instance_id="host-a")
    assert ids["host-b"] not in ctx.group().members
    assert "host-b" not in ctx.group().static_members


def test_a_join_group_naming_a_static_member_with_someone_elses_member_id_is_fenced_instance_id() -> None:
    ctx = ClassicContext()
    static_stable_group(ctx, "host-a")
    response = ctx.join_answer(ctx.join("impostor", instance_id="host-a"))
    assert response.error_code is Errors.FENCED_INSTANCE_ID
