"""A timer fires only while its deadline still holds: a session timer popped by the runtime must not fence a
member whose heartbeat re-armed the timer before the timer's operation ran (Kafka's deadline check)."""

from __future__ import annotations

from coordinator.core.errors import Errors
from coordinator.core.shard import session_timer
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
