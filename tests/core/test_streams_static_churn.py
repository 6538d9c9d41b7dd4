"""Random churn of static streams members (instance ids): joins, static leaves (-2), rejoins under new member
ids, leaves for good, heartbeats, expiries, late offloaded runs. After every step no active task is held by
two members (a member away at epoch -2 still holds its tasks); a join for an instance whose member is still
live is UNRELEASED_INSTANCE_ID; replay rebuilds the same groups; once the churn stops the group is Stable
with every task running exactly once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.core.errors import Errors
from tests.core.streams_context import GROUP, READY, Ctx, StreamsSettings, image
from tests.core.test_streams_churn import no_task_held_twice

INSTANCES = ["i1", "i2", "i3"]

ops = st.lists(st.one_of(
    st.tuples(st.just("join"), st.sampled_from(INSTANCES), st.sampled_from(["p1", "p2", "p3"])),
    st.tuples(st.just("beat"), st.sampled_from(INSTANCES), st.booleans()),
    st.tuples(st.just("away"), st.sampled_from(INSTANCES), st.just("")),
    st.tuples(st.just("leave"), st.sampled_from(INSTANCES), st.just("")),
    st.tuples(st.just("advance"), st.sampled_from([50, 300, 2000]), st.just("")),
    st.tuples(st.just("complete"), st.just(""), st.just("")),
), max_size=60)


@settings(max_examples=60, deadline=None)
@given(ops, st.booleans())
def test_static_churn_keeps_single_ownership_and_replays(steps, offload) -> None:  # type: ignore[no-untyped-def]
    ctx = Ctx(StreamsSettings(assignor_offload_enable=offload, initial_rebalance_delay_ms=100,
                                 assignment_interval_ms=100, session_timeout_ms=1500, max_warmup_replicas=1,
                                 heartbeat_interval_ms=100,
                                 num_standby_replicas=1))
    joins = 0
    for op, inst, y in steps:
        g = ctx.sg.groups.get(GROUP)
        holder = g.static_members.get(inst) if g is not None else None
        live = holder is not None and g is not None and g.current[holder].member_epoch != -2
        if op == "join":
            joins += 1
            r = ctx.join(f"{inst}-{joins}", process=y, instance_id=inst)
            assert r.error_code == (Errors.UNRELEASED_INSTANCE_ID if live else 0), r.error_message
        elif op == "beat" and live and g is not None and holder is not None:
            cur = g.current[holder]
            owned = cur.active if y else cur.active | cur.active_pending_revocation
            ctx.owned(holder, cur.member_epoch, owned, instance_id=inst)
        elif op == "away" and live and holder is not None:
            assert ctx.hb(holder, -2, instance_id=inst).member_epoch == -2
        elif op == "leave" and holder is not None:
            assert ctx.hb(holder, -1, instance_id=inst).error_code == 0
        elif op == "advance":
            ctx.advance(int(inst))
        elif op == "complete":
            ctx.complete_runs()
        no_task_held_twice(ctx)
    assert ctx.replayed() == ctx.live()
    ctx.sg.image = image(**READY)
    for _ in range(40):  # the churn stops: live members heartbeat, away ones expire
        ctx.complete_runs()
        g = ctx.sg.groups.get(GROUP)
        if g is None or not g.members:
            return
        for m in sorted(g.current):
            cur = g.current[m]
            if cur.member_epoch != -2:
                ctx.owned(m, cur.member_epoch, cur.active, instance_id=g.members[m].instance_id)
                no_task_held_twice(ctx)
        ctx.complete_runs()
        if ctx.state() == "Stable":
            break
        ctx.advance(200)
    assert ctx.state() == "Stable"
    running = sorted(t for c in ctx.sg.groups[GROUP].current.values() for t in c.active)
    assert running == sorted({(s, p) for s in "01" for p in range(4)})
    assert ctx.replayed() == ctx.live()
