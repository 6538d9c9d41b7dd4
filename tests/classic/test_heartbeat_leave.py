"""Heartbeat (keeps a member alive, signals a rebalance) and batched LeaveGroup."""

from __future__ import annotations

from groupcoord.coordinator.core.classic.messages import MemberIdentity
from groupcoord.coordinator.core.classic.records import ClassicGroupState
from groupcoord.coordinator.core.errors import Errors
from tests.classic.context import SESSION_MS, ClassicContext


def test_heartbeats_in_stable_are_accepted_and_keep_a_member_alive_past_its_session_timeout() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    for _ in range(10):
        ctx.advance(SESSION_MS // 2)
        assert ctx.heartbeat(a, 1).error_code is ctx.heartbeat(b, 1).error_code is Errors.NONE
    assert ctx.state() is ClassicGroupState.STABLE


def test_heartbeats_answer_rebalance_in_progress_while_joining_and_awaiting_sync() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    ctx.join(a)
    assert ctx.state() is ClassicGroupState.JOINING
    assert ctx.heartbeat(b, 1).error_code is Errors.REBALANCE_IN_PROGRESS
    ctx.join(b)
    assert ctx.state() is ClassicGroupState.AWAITING_SYNC
    assert ctx.heartbeat(b, 2).error_code is Errors.REBALANCE_IN_PROGRESS


def test_a_heartbeat_of_another_generation_is_illegal_generation() -> None:
    ctx = ClassicContext()
    a, _ = ctx.stable_group(2)
    assert ctx.heartbeat(a, 0).error_code is Errors.ILLEGAL_GENERATION
    assert ctx.heartbeat(a, 2).error_code is Errors.ILLEGAL_GENERATION


def test_a_heartbeat_from_a_stranger_or_to_a_missing_group_is_unknown_member_id() -> None:
    ctx = ClassicContext()
    ctx.stable_group(1)
    assert ctx.heartbeat("stranger", 1).error_code is Errors.UNKNOWN_MEMBER_ID
    assert ctx.heartbeat("stranger", 1, group_id="nope").error_code is Errors.UNKNOWN_MEMBER_ID
    assert ctx.heartbeat("stranger", 1, group_id="").error_code is Errors.INVALID_GROUP_ID


def test_leave_group_removes_a_batch_of_members_reports_each_and_rebalances_once() -> None:
    ctx = ClassicContext()
    a, b, c = ctx.stable_group(3)
    response = ctx.leave(b, "stranger", c)
    assert [(m.member_id, m.error_code) for m in response.members] == [
        (b, Errors.NONE), ("stranger", Errors.UNKNOWN_MEMBER_ID), (c, Errors.NONE)]
    assert list(ctx.group().members) == [a]
    assert ctx.state() is ClassicGroupState.JOINING
    assert ctx.join_answer(ctx.join(a)).generation_id == 2


def test_the_last_member_leaving_makes_the_group_down_with_a_new_generation() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    ctx.leave(a, b)
    assert ctx.state() is ClassicGroupState.DOWN
    assert ctx.group().generation == 2
    assert ctx.group().protocol_name is None and ctx.group().leader_id is None


def test_a_static_member_can_be_removed_by_instance_id_alone() -> None:
    ctx = ClassicContext()
    ctx.stable_group(1)
    call = ctx.join("", instance_id="host-1")  # parked: the group is rebalancing for it
    member_id = ctx.group().static_members["host-1"]
    response = ctx.leave(MemberIdentity("", "host-1", "decommissioned"), MemberIdentity("", "host-2"))
    assert [(m.instance_id, m.error_code) for m in response.members] == [
        ("host-1", Errors.NONE), ("host-2", Errors.UNKNOWN_MEMBER_ID)]
    assert member_id not in ctx.group().members
    assert ctx.join_answer(call).error_code is Errors.UNKNOWN_MEMBER_ID


def test_a_leave_naming_a_static_member_by_the_wrong_member_id_is_fenced_instance_id() -> None:
    ctx = ClassicContext()
    ctx.join("", instance_id="host-1")
    response = ctx.leave(MemberIdentity("impostor", "host-1"))
    assert response.members[0].error_code is Errors.FENCED_INSTANCE_ID


def test_a_pending_member_holds_up_the_join_phase_until_it_leaves() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    pending = ctx.join_answer(ctx.join("")).member_id
    calls = ctx.rejoin_all([a, b], protocols=(("range", b"changed"),))
    assert all(ctx.answer(c) is None for c in calls.values())  # everyone rejoined, but the pending member may
    assert ctx.leave(pending).members[0].error_code is Errors.NONE
    assert {ctx.join_answer(c).generation_id for c in calls.values()} == {2}
    assert ctx.group().pending_members == set()


def test_leave_group_for_a_missing_group_is_unknown_member_id_for_each_member() -> None:
    """As Kafka 4.4 answers (tests/differential): the request succeeds, each member is UNKNOWN_MEMBER_ID."""
    ctx = ClassicContext()
    response = ctx.leave("a", group_id="nope")
    assert response.error_code is Errors.NONE
    assert response.members[0].error_code is Errors.UNKNOWN_MEMBER_ID
