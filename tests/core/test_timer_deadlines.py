"""A timer fires only while its deadline still holds: a session timer popped by the runtime must not fence a
member whose heartbeat re-armed the timer before the timer's operation ran (Kafka's deadline check)."""

from __future__ import annotations

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.shard import session_timer
from tests.core.context import CoreContext


def test_stale_session_timer_does_not_fence_a_member_that_heartbeat_after_it_was_popped() -> None:
    ctx = CoreContext({"foo": 6})
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.stabilise()
    key = session_timer("grp", "a")
    deadline = ctx.timers.pop(key)  # the runtime pops the due timer ...
    ctx.now = deadline
    # ... a heartbeat queued before the timer's operation runs and re-arms the session ...
    assert ctx.heartbeat(member_id="a", member_epoch=ctx.member("a").member_epoch).error_code is Errors.NONE
    # ... then the stale timer operation runs: the member's deadline is in the future, so it stays.
    ctx.apply(ctx.shard.on_timer(key, ctx.now))
    assert "a" in ctx.group().members
    assert ctx.shard.stats.members_fenced_session == 0
    ctx.advance(ctx.timers[key] - ctx.now)  # the re-armed timer still fences a member that goes silent
    assert "a" not in ctx.group().members


def test_stale_session_timer_of_a_static_member_that_left_temporarily_and_came_back() -> None:
    ctx = CoreContext({"foo": 6})
    ctx.join("a", subscribed_topic_names=("foo",), instance_id="i1")
    ctx.stabilise()
    key = session_timer("grp", "a")
    deadline = ctx.timers.pop(key)
    ctx.now = deadline
    ctx.heartbeat(member_id="a", member_epoch=ctx.member("a").member_epoch, instance_id="i1")
    ctx.apply(ctx.shard.on_timer(key, ctx.now))
    assert "a" in ctx.group().members


def test_session_timer_fires_when_its_deadline_holds() -> None:
    ctx = CoreContext({"foo": 6})
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.advance(45_000)
    assert "a" not in ctx.group().members
    assert ctx.shard.stats.members_fenced_session == 1


def test_a_popped_rebalance_timer_does_not_fence_a_member_revoking_again_at_a_newer_epoch() -> None:
    ctx = CoreContext({"foo": 6}, group_consumer_assignors="range")
    ctx.join("a", subscribed_topic_names=("foo",), rebalance_timeout_ms=3000)
    ctx.join("b", subscribed_topic_names=("foo",))
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))  # a must revoke 3..5
    key = ("rebalance", "grp", "a")
    ctx.now = ctx.timers.pop(key)  # due and popped by the runtime; its operation is queued ...
    # ... meanwhile a revokes in time, c joins, and a must revoke again at a newer epoch (a fresh deadline).
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo={0, 1, 2}))
    ctx.join("c", subscribed_topic_names=("foo",))
    a = ctx.member("a")
    ctx.heartbeat(member_id="a", member_epoch=a.member_epoch, topic_partitions=a.assigned_sets())
    assert ctx.member("a").state.value == "UNREVOKED_PARTITIONS" and ctx.timers[key] > ctx.now
    ctx.apply(ctx.shard.on_timer(key, ctx.now))  # the stale operation runs
    assert "a" in ctx.group().members and ctx.shard.stats.members_fenced_rebalance == 0


def test_a_streams_session_timer_rearmed_by_a_heartbeat_does_not_remove_the_member() -> None:
    """The one stale check covers streams groups too: the runtime popped the old session timer, a heartbeat
    queued before its operation re-armed it, so the old timer's operation must do nothing."""
    from groupcoord.coordinator.core.streams import handlers as streams_shard
    from groupcoord.coordinator.core.streams.group import StreamsHeartbeatRequest, session_key
    from groupcoord.coordinator.core.streams.records import NO_TASKS
    from tests.core.streams_context import READY, word_count

    ctx = CoreContext(READY)
    shard = ctx.shard
    joined = streams_shard.heartbeat(shard, StreamsHeartbeatRequest(
        "app", "s1", 0, topology=word_count(), process_id="p1", rebalance_timeout_ms=1000, active_tasks=NO_TASKS,
        standby_tasks=NO_TASKS, warmup_tasks=NO_TASKS), ctx.now)
    shard.apply(joined)
    epoch = joined.response.member_epoch
    first_deadline = shard.timer_deadlines[session_key("app", "s1")]
    ctx.now = first_deadline - 1
    shard.apply(streams_shard.heartbeat(shard, StreamsHeartbeatRequest("app", "s1", epoch), ctx.now))  # re-arms it
    fired = shard.on_timer(session_key("app", "s1"), first_deadline)  # the old timer's operation runs
    assert fired.records == []
    assert "s1" in shard.streams.groups["app"].members
