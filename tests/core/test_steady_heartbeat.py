"""The steady heartbeat (issue 30, step 6): `shard.consumer_group_steady_heartbeat` answers a heartbeat that
carries only the group id, the member id and the epoch by re-arming the session deadline, and declines
(changing nothing) whenever the full handler would do more. Both paths are driven with the same random
sequences and must give the same replies and leave the same state; each deviation takes the full path."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from groupcoord.coordinator.core.consumer.group import MemberState
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from groupcoord.coordinator.core.results import Result, ScheduleTimer
from tests.core.churn import run_churn
from tests.core.context import CoreContext, shard_state


def is_bare(r: ConsumerGroupHeartbeatRequest) -> bool:
    """What the servicer tries the steady path for: no field but the group id, member id and epoch."""
    return (r.member_epoch > 0 and r.instance_id is None and r.rack_id is None and r.rebalance_timeout_ms is None
            and r.subscribed_topic_names is None and r.subscribed_topic_regex is None and r.server_assignor is None
            and r.topic_partitions is None)


class FullPath(CoreContext):
    """Every heartbeat through `consumer_group_heartbeat`; each exchange is logged."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log: list[tuple[int, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse]] = []
        self.steady_taken = 0
        self.steady_declined = 0

    def send(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        response = self.answer(request)
        self.log.append((self.now, request, response))
        return response

    def answer(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        return super().send(request)


class SteadyFirst(FullPath):
    """As the servicer: a bare heartbeat tries the steady path first, the full path when it declines."""

    def answer(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        if is_bare(request):
            out = self.shard.consumer_group_steady_heartbeat(request.group_id, request.member_id,
                                                             request.member_epoch, request.principal, self.now)
            if out is not None:
                (interval, session), key, deadline = out
                self.record(Result(None, timers=[ScheduleTimer(key, deadline)]))  # the runtime's re-arm
                self.steady_taken += 1
                return ConsumerGroupHeartbeatResponse(member_id=request.member_id, member_epoch=request.member_epoch,
                                                      heartbeat_interval_ms=interval, session_timeout_ms=session)
            self.steady_declined += 1
        return super().answer(request)


def assert_same(full: FullPath, steady: FullPath) -> None:
    assert steady.log == full.log
    assert shard_state(steady.shard) == shard_state(full.shard)
    assert steady.timers == full.timers
    assert steady.shard.timer_deadlines == full.shard.timer_deadlines
    assert steady.shard.stats == full.shard.stats
    assert steady.records == full.records


@pytest.mark.parametrize(("offload", "interval_ms", "seed"), [
    (False, 0, 1), (False, 0, 2), (True, 0, 3), (False, 2000, 4), (True, 2000, 5), (True, 500, 6),
])
def test_churn_gives_the_same_replies_and_state_on_both_paths(offload: bool, interval_ms: int, seed: int) -> None:
    full = run_churn(seed, 1_500, offload=offload, interval_ms=interval_ms, context=FullPath)
    steady = run_churn(seed, 1_500, offload=offload, interval_ms=interval_ms, context=SteadyFirst)
    assert isinstance(full.ctx, FullPath) and isinstance(steady.ctx, SteadyFirst)
    assert_same(full.ctx, steady.ctx)
    assert steady.ctx.steady_declined > 0  # few are taken: the churn's regex subscriptions keep most off it


def drive(ctx: FullPath, seed: int, steps: int) -> None:
    """Random heartbeats at two groups: joins, bare heartbeats at the current, a stale, a newer or no epoch,
    from unknown or blank member ids and other principals, acknowledgements, subscription changes, leaves,
    time passing (sessions expire), metadata changes and group config changes."""
    rng = random.Random(seed)
    names = iter(range(1_000_000))
    for _ in range(steps):
        gid = rng.choice(["g1", "g2"])
        group = ctx.shard.groups.get(gid)
        members = sorted(group.members) if group is not None else []
        mid = rng.choice(members) if members else ""
        epoch = group.members[mid].member_epoch if mid else 0
        roll = rng.random()
        if roll < 0.08 or not members:
            ctx.join(f"m{next(names)}", gid, subscribed_topic_names=rng.choice([("foo",), ("foo", "bar")]),
                     principal=rng.choice([None, "User:a"]))
        elif roll < 0.55:
            ctx.heartbeat(gid, mid, epoch, principal=rng.choice([None, None, None, "User:a", "User:b"]))
        elif roll < 0.62:
            ctx.heartbeat(gid, mid, epoch + rng.choice([-1, 1, 2]))
        elif roll < 0.65:
            ctx.heartbeat(gid, rng.choice(["nobody", " ", mid]), rng.choice([epoch, 1]))
        elif roll < 0.66:
            ctx.heartbeat(rng.choice([" ", "g3"]), mid, max(epoch, 1))
        elif roll < 0.82:
            ctx.ack(mid, gid)
        elif roll < 0.85:
            ctx.heartbeat(gid, mid, epoch, subscribed_topic_names=rng.choice([("foo",), ("bar",), ("foo", "bar")]))
        elif roll < 0.88:
            ctx.heartbeat(gid, mid, -1)
        elif roll < 0.97:
            ctx.advance(rng.choice([100, 1_000, 3_000, 20_000]))
        elif roll < 0.985:
            ctx.set_metadata({"foo": rng.choice([6, 8]), "bar": 3})
        else:
            ctx.apply(ctx.shard.alter_group_configs(
                gid, {"consumer.heartbeat.interval.ms": str(rng.choice([1000, 3000]))}, False, ctx.now))


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_heartbeats_give_the_same_replies_and_state_on_both_paths(seed: int) -> None:
    config = {"group.consumer.session.timeout.ms": 15_000, "group.consumer.assignment.interval.ms": 2_000,
              "group.consumer.assignor.offload.enable": seed % 2 == 0}
    full, steady = FullPath(overrides=config), SteadyFirst(overrides=config)
    drive(full, seed, 3_000)
    drive(steady, seed, 3_000)
    assert_same(full, steady)
    assert steady.steady_taken > 100 and steady.steady_declined > 100


# --- every deviation takes the full path -----------------------------------------------------------------------
def stable_pair(**config: Any) -> CoreContext:
    ctx = CoreContext(**config)
    ctx.join("a")
    ctx.join("b")
    ctx.stabilise()
    return ctx


def declines(ctx: CoreContext, group_id: str, member_id: str, epoch: int, principal: str | None = None) -> bool:
    before = (dict(ctx.shard.timer_deadlines), dataclasses.replace(ctx.shard.stats,
                                                                   heartbeats_by_error=ctx.shard.stats.heartbeats_by_error.copy()))
    out = ctx.shard.consumer_group_steady_heartbeat(group_id, member_id, epoch, principal, ctx.now)
    if out is None:
        assert (dict(ctx.shard.timer_deadlines), ctx.shard.stats) == before, "a declined heartbeat changed state"
    return out is None


def test_a_stable_member_at_its_epoch_takes_the_steady_path_and_re_arms_only_its_session() -> None:
    ctx = stable_pair()
    epoch = ctx.member("a").member_epoch
    ctx.now += 1_000
    out = ctx.shard.consumer_group_steady_heartbeat("grp", "a", epoch, None, ctx.now)
    assert out == ((5000, 45000), ("session", "grp", "a"), ctx.now + 45000)
    ctx.record(Result(None, timers=[ScheduleTimer(out[1], out[2])]))  # the runtime's re-arm
    assert ctx.shard.timer_deadlines[("session", "grp", "a")] == ctx.now + 45000
    full = ctx.heartbeat("grp", "a", epoch)
    assert full == ConsumerGroupHeartbeatResponse(member_id="a", member_epoch=epoch, heartbeat_interval_ms=5000,
                                                  session_timeout_ms=45000)


def test_epoch_mismatch_and_unknown_or_blank_ids_take_the_full_path() -> None:
    ctx = stable_pair()
    epoch = ctx.member("a").member_epoch
    for gid, mid, e in [("grp", "a", epoch - 1), ("grp", "a", epoch + 1), ("grp", "a", 0), ("grp", "a", -1),
                        ("grp", "a", -2), ("grp", "nobody", epoch), ("other", "a", epoch)]:
        assert declines(ctx, gid, mid, e), (gid, mid, e)
    assert ctx.heartbeat("grp", "a", epoch + 1).error_code is Errors.FENCED_MEMBER_EPOCH


def test_a_blank_member_id_is_refused_by_the_full_path_even_for_a_member_of_that_name() -> None:
    ctx = CoreContext()
    ctx.join(" ")  # a client-made member id of blanks: a join does not refuse it
    ctx.stabilise()
    epoch = ctx.member(" ").member_epoch
    assert declines(ctx, "grp", " ", epoch)
    assert ctx.heartbeat("grp", " ", epoch).error_code is Errors.INVALID_REQUEST


def test_a_fenced_member_takes_the_full_path() -> None:
    ctx = stable_pair(group_consumer_session_timeout_ms=1000, group_consumer_heartbeat_interval_ms=100)
    epoch = ctx.member("a").member_epoch
    ctx.advance(500)
    ctx.ack("b")
    ctx.advance(600)  # a's session expired
    assert "a" not in ctx.group().members
    assert declines(ctx, "grp", "a", epoch)
    assert ctx.heartbeat("grp", "a", epoch).error_code is Errors.UNKNOWN_MEMBER_ID


def test_another_principal_takes_the_full_path() -> None:
    ctx = CoreContext()
    ctx.join("a", principal="User:a")
    ctx.stabilise()
    epoch = ctx.member("a").member_epoch
    assert not declines(ctx, "grp", "a", epoch, "User:a")
    assert not declines(ctx, "grp", "a", epoch, None)
    assert declines(ctx, "grp", "a", epoch, "User:b")
    assert ctx.heartbeat("grp", "a", epoch, principal="User:b").error_code is Errors.UNKNOWN_MEMBER_ID


def test_a_group_with_a_computation_pending_takes_the_full_path() -> None:
    """KIP-1263: a new member bumped the group epoch and the assignment interval has not passed (or a run is in
    flight): every member's heartbeat may compute the target, so none takes the steady path."""
    ctx = stable_pair()
    ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignment.interval.ms": "10000"}, False, ctx.now))
    epoch = ctx.member("a").member_epoch
    ctx.join("c")
    group = ctx.group()
    assert group.group_epoch > group.target_assignment_epoch
    assert declines(ctx, "grp", "a", epoch)
    ctx.advance(10_000)
    ctx.heartbeat("grp", "a", epoch)  # the full path computes the target now
    assert group.group_epoch == group.target_assignment_epoch


def test_an_offloaded_run_in_flight_takes_the_full_path() -> None:
    ctx = stable_pair(group_consumer_assignor_offload_enable=True)
    ctx.auto_complete_runs = False
    epoch = ctx.member("a").member_epoch
    ctx.join("c")
    assert ctx.pending_runs and ctx.group().inflight is not None
    assert declines(ctx, "grp", "a", epoch)


def test_a_member_revoking_or_behind_its_target_takes_the_full_path() -> None:
    ctx = stable_pair()
    ctx.join("c")  # a and b must give partitions to c
    epoch_a = ctx.member("a").member_epoch
    ctx.heartbeat("grp", "a", epoch_a)  # a is told to revoke
    a = ctx.member("a")
    assert a.state is MemberState.UNREVOKED_PARTITIONS
    assert declines(ctx, "grp", "a", a.member_epoch)
    b = ctx.member("b")
    assert b.member_epoch != ctx.group().effective_target_epoch  # b has not heartbeated since
    assert declines(ctx, "grp", "b", b.member_epoch)
    ctx.stabilise()
    assert not declines(ctx, "grp", "a", ctx.member("a").member_epoch)


def test_a_regex_subscription_or_unseen_metadata_takes_the_full_path() -> None:
    ctx = CoreContext()
    ctx.join("a", subscribed_topic_regex="fo.*", subscribed_topic_names=None)
    ctx.stabilise()
    assert declines(ctx, "grp", "a", ctx.member("a").member_epoch)
    ctx = stable_pair()
    ctx.shard.metadata = ctx.image = CoreContext(topics={"foo": 6, "bar": 3, "baz": 1}).image  # not yet applied
    assert declines(ctx, "grp", "a", ctx.member("a").member_epoch)
