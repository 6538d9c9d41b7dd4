"""Static membership for streams groups (instance ids), driven by the virtual clock: Kafka's
getOrMaybeCreateStaticStreamsGroupMember and streamsGroupStaticMemberGroupLeave rules."""

from __future__ import annotations

from typing import Any

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.streams.records import NO_TASKS
from tests.core.streams_context import GROUP, Ctx, StreamsSettings

SYNC = StreamsSettings(assignor_offload_enable=False, initial_rebalance_delay_ms=0, assignment_interval_ms=0,
                          max_warmup_replicas=0, session_timeout_ms=3000, heartbeat_interval_ms=100)


def settle(ctx: Ctx, members: list[str], rounds: int = 4) -> None:
    """Every live member heartbeats what it was given, until the group is stable."""
    for _ in range(rounds):
        for m in members:
            cur = ctx.sg.groups[GROUP].current[m]
            ctx.owned(m, cur.member_epoch, cur.active, instance_id=ctx.sg.groups[GROUP].members[m].instance_id)


def static_pair(ctx: Ctx) -> None:
    ctx.join("a", process="pa", instance_id="ia")
    ctx.join("b", process="pb", instance_id="ib")
    settle(ctx, ["a", "b"])
    assert ctx.state() == "Stable"


def active(ctx: Ctx, m: str) -> Any:
    return ctx.sg.groups[GROUP].current[m].active


def test_a_static_leave_keeps_the_members_tasks_and_does_not_rebalance() -> None:
    ctx = Ctx(SYNC)
    static_pair(ctx)
    epoch, tasks_b = ctx.sg.groups[GROUP].group_epoch, active(ctx, "b")
    r = ctx.hb("b", -2, instance_id="ib")
    assert (r.error_code, r.member_epoch) == (0, -2)
    g = ctx.sg.groups[GROUP]
    assert g.group_epoch == epoch, "no rebalance"
    assert "b" in g.members and g.current["b"].member_epoch == -2 and active(ctx, "b") == tasks_b
    assert g.target["b"].active == tasks_b
    settle(ctx, ["a"])
    assert not active(ctx, "a") & tasks_b, "a never gets the away member's tasks"


def test_rejoining_with_the_same_instance_id_gets_the_same_tasks_back_without_a_rebalance() -> None:
    ctx = Ctx(SYNC)
    static_pair(ctx)
    epoch, tasks_b = ctx.sg.groups[GROUP].group_epoch, active(ctx, "b")
    ctx.hb("b", -2, instance_id="ib")
    ctx.advance(1000)
    r = ctx.join("b2", process="pb", instance_id="ib")
    assert r.error_code == 0 and r.active_tasks == tasks_b, "the new member id got the instance's tasks at once"
    g = ctx.sg.groups[GROUP]
    assert "b" not in g.members and g.static_members["ib"] == "b2"
    assert g.group_epoch == epoch, "same process, rack and tags: no new assignment"
    settle(ctx, ["a", "b2"])
    assert ctx.state() == "Stable" and active(ctx, "b2") == tasks_b
    assert ctx.replayed() == ctx.live()


def test_a_replacement_from_another_process_keeps_its_tasks_through_the_new_assignment() -> None:
    ctx = Ctx(SYNC)
    static_pair(ctx)
    epoch, tasks_b = ctx.sg.groups[GROUP].group_epoch, active(ctx, "b")
    ctx.hb("b", -2, instance_id="ib")
    ctx.join("b2", process="pb-restarted", instance_id="ib")
    assert ctx.sg.groups[GROUP].group_epoch == epoch + 1, "the process changed: a new assignment"
    settle(ctx, ["a", "b2"])
    assert active(ctx, "b2") == tasks_b, "sticky: the tasks stay with the instance"


def test_the_static_member_is_removed_when_its_session_expires_and_its_tasks_move() -> None:
    ctx = Ctx(SYNC)
    static_pair(ctx)
    tasks_b = active(ctx, "b")
    ctx.hb("b", -2, instance_id="ib")
    for _ in range(5):  # a keeps heartbeating; b does not come back
        ctx.advance(1000)
        settle(ctx, ["a"], rounds=1)
    g = ctx.sg.groups[GROUP]
    assert "b" not in g.members and "ib" not in g.static_members
    settle(ctx, ["a"])
    assert tasks_b <= active(ctx, "a")
    assert ctx.state() == "Stable"


def test_an_instance_id_held_by_a_live_member_is_unreleased() -> None:
    ctx = Ctx(SYNC)
    static_pair(ctx)
    r = ctx.join("b2", process="pb", instance_id="ib")
    assert (r.error_code, r.error_message) == (
        Errors.UNRELEASED_INSTANCE_ID,
        "Static member b2 with instance id ib cannot join the group because the instance id is owned by b member.")
    assert "b2" not in ctx.sg.groups[GROUP].members


def test_the_replaced_member_is_fenced_by_its_instance_id() -> None:
    ctx = Ctx(SYNC)
    static_pair(ctx)
    ctx.hb("b", -2, instance_id="ib")
    ctx.join("b2", process="pb", instance_id="ib")
    r = ctx.owned("b", 3, NO_TASKS, instance_id="ib")
    assert (r.error_code, r.error_message) == (Errors.FENCED_INSTANCE_ID,
                                               "Static member b with instance id ib was fenced by member b2.")
    r = ctx.hb("b", -1, instance_id="ib")
    assert r.error_code == Errors.FENCED_INSTANCE_ID, "nor can it leave for the new member"
    assert "b2" in ctx.sg.groups[GROUP].members


def test_an_unknown_instance_id_is_an_unknown_member() -> None:
    ctx = Ctx(SYNC)
    static_pair(ctx)
    r = ctx.owned("a", ctx.sg.groups[GROUP].current["a"].member_epoch, NO_TASKS, instance_id="i9")
    assert (r.error_code, r.error_message) == (Errors.UNKNOWN_MEMBER_ID, "Instance id i9 is unknown.")


def test_a_static_member_leaving_with_epoch_minus_1_leaves_for_good() -> None:
    ctx = Ctx(SYNC)
    static_pair(ctx)
    epoch = ctx.sg.groups[GROUP].group_epoch
    r = ctx.hb("b", -1, instance_id="ib")
    assert (r.error_code, r.member_epoch) == (0, -1)
    g = ctx.sg.groups[GROUP]
    assert "b" not in g.members and "ib" not in g.static_members and g.group_epoch == epoch + 1


def test_a_released_static_member_does_not_count_against_a_full_group() -> None:
    ctx = Ctx(StreamsSettings(assignor_offload_enable=False, initial_rebalance_delay_ms=0,
                                 assignment_interval_ms=0, max_size=2))
    static_pair(ctx)
    assert ctx.join("c", instance_id="ic").error_code == Errors.GROUP_MAX_SIZE_REACHED
    ctx.hb("b", -2, instance_id="ib")
    assert ctx.join("b2", process="pb", instance_id="ib").error_code == 0


def test_static_leave_requires_an_instance_id_and_instance_ids_are_not_blank() -> None:
    ctx = Ctx(SYNC)
    static_pair(ctx)
    r = ctx.hb("a", -2)
    assert (r.error_code, r.error_message) == (Errors.INVALID_REQUEST, "InstanceId can't be null.")
    assert ctx.join("c", instance_id=" ").error_message == "InstanceId can't be empty."


def test_an_offloaded_run_started_before_a_replacement_gives_the_tasks_to_the_new_member_id() -> None:
    ctx = Ctx(StreamsSettings(initial_rebalance_delay_ms=0, assignment_interval_ms=0, max_warmup_replicas=0,
                                 session_timeout_ms=3000, heartbeat_interval_ms=100))
    ctx.join("a", process="pa", instance_id="ia")
    ctx.join("b", process="pb", instance_id="ib")
    assert len(ctx.pending) == 1, "one run in flight for a and b"
    ctx.hb("b", -2, instance_id="ib")
    ctx.join("b2", process="pb", instance_id="ib")
    ctx.complete_runs()
    g = ctx.sg.groups[GROUP]
    assert set(g.target) == {"a", "b2"}
    assert len(g.target["a"].active) + len(g.target["b2"].active) == 8, "no task lost with the old member id"
    assert ctx.replayed() == ctx.live()


def test_a_member_back_from_a_static_leave_must_rejoin_with_epoch_0_even_at_its_previous_epoch() -> None:
    """Kafka's throwIfStreamsGroupMemberEpochIsInvalid, as for consumer groups: an epoch greater than the
    member's (-2 after the leave) is fenced, even the one it had before leaving."""
    ctx = Ctx(SYNC)
    static_pair(ctx)
    before = ctx.sg.groups[GROUP].current["b"].member_epoch
    ctx.hb("b", -2, instance_id="ib")
    r = ctx.owned("b", before, active(ctx, "b"), instance_id="ib")
    assert r.error_code == Errors.FENCED_MEMBER_EPOCH and "rejoin with epoch 0" in (r.error_message or "")
