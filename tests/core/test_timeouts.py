"""Session and rebalance timeouts, driven by the virtual clock through the timers the core asks for."""

from __future__ import annotations

from groupcoord.coordinator.core.consumer.group import MemberState
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.results import ScheduleTimer
from tests.core.context import CoreContext, tid

FOO = tid("foo")


def test_session_timeout_fences_a_silent_member() -> None:
    ctx = CoreContext({"foo": 6})
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.join("b", subscribed_topic_names=("foo",))
    ctx.stabilise()
    epoch = ctx.group().group_epoch
    for _ in range(9):  # a heartbeats every 5 s; b is silent
        ctx.advance(5000)
        ctx.heartbeat(member_id="a", member_epoch=ctx.member("a").member_epoch)
    ctx.advance(1)
    group = ctx.group()
    assert "b" not in group.members
    assert group.group_epoch == epoch + 1
    assert set(group.partition_owner.values()) == {"a"}
    assert ctx.shard.stats.members_fenced_session == 1
    assert ctx.heartbeat(member_id="b", member_epoch=epoch).error_code is Errors.UNKNOWN_MEMBER_ID


def test_every_heartbeat_pushes_the_session_deadline_back() -> None:
    ctx = CoreContext()
    ctx.join("a")
    for _ in range(20):
        ctx.advance(40_000)
        assert ctx.heartbeat(member_id="a", member_epoch=2).error_code is Errors.NONE
    assert "a" in ctx.group().members
    assert ctx.timers[("session", "grp", "a")] == ctx.now + 45_000


def test_session_timeout_group_override_applies() -> None:
    ctx = CoreContext(group_consumer_max_session_timeout_ms=60_000)
    ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.session.timeout.ms": "1000",
                                                         "consumer.heartbeat.interval.ms": "500"}, False, ctx.now))
    result = ctx.shard.consumer_group_heartbeat(ctx.request(member_id="a"), ctx.now)
    ctx.apply(result)
    assert ScheduleTimer(("session", "grp", "a"), ctx.now + 1000) in result.timers
    ctx.advance(1000)
    assert "a" not in ctx.group().members


def moving_partitions() -> CoreContext:
    """a owns all of foo; b joins; a must revoke 3 partitions (range: a {0,1,2}, b {3,4,5})."""
    ctx = CoreContext({"foo": 6}, group_consumer_assignors="range")
    ctx.join("a", subscribed_topic_names=("foo",), rebalance_timeout_ms=3000)
    ctx.join("b", subscribed_topic_names=("foo",))
    return ctx


def test_rebalance_timeout_fences_a_member_that_does_not_revoke_in_time() -> None:
    ctx = moving_partitions()
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    assert ctx.member("a").state is MemberState.UNREVOKED_PARTITIONS
    assert ctx.timers[("rebalance", "grp", "a")] == ctx.now + 3000
    ctx.advance(2999)
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))  # still holding
    assert "a" in ctx.group().members
    ctx.advance(1)
    assert "a" not in ctx.group().members
    assert ctx.shard.stats.members_fenced_rebalance == 1
    # b gets everything once a is gone.
    ctx.stabilise()
    assert ctx.member("b").assigned_sets() == ctx.tps(foo=range(6))


def test_rebalance_timer_is_cancelled_when_the_member_revokes_in_time() -> None:
    ctx = moving_partitions()
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    ctx.advance(2000)
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo={0, 1, 2}))
    assert ("rebalance", "grp", "a") not in ctx.timers
    ctx.advance(10_000)
    assert "a" in ctx.group().members


def test_a_rebalance_timer_from_an_earlier_revocation_does_not_fence_the_member() -> None:
    ctx = moving_partitions()
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    # The runtime fires a timer that was meanwhile superseded: the core ignores it unless it still applies.
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo={0, 1, 2}))
    ctx.apply(ctx.shard.on_timer(("rebalance", "grp", "a"), ctx.now))
    assert "a" in ctx.group().members


def test_rebalance_timeout_is_the_members_own() -> None:
    ctx = CoreContext({"foo": 6}, group_consumer_assignors="range")
    ctx.join("a", subscribed_topic_names=("foo",), rebalance_timeout_ms=10_000)
    ctx.join("b", subscribed_topic_names=("foo",))
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    assert ctx.timers[("rebalance", "grp", "a")] == ctx.now + 10_000


def test_timer_for_a_missing_group_or_member_is_ignored() -> None:
    ctx = CoreContext()
    ctx.join("a")
    before = len(ctx.records)
    for key in (("session", "nope", "a"), ("session", "grp", "ghost"), ("rebalance", "grp", "ghost")):
        ctx.apply(ctx.shard.on_timer(key, ctx.now))
    assert ctx.records[before:] == []
