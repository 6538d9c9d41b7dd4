"""Random churn through the streams group core: joins, leaves, heartbeats, session expiry, offloaded runs
completing late, topics appearing and vanishing. After every step, no active task is held by two members
(held = running or still to be revoked); at the end, replay rebuilds the same groups and, once the churn
stops and every member reports what it owns, the group is Stable with every task running exactly once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.streams_context import GROUP, READY, Ctx, StreamsSettings, image

MEMBERS = ["a", "b", "c", "d"]

ops = st.lists(st.one_of(
    st.tuples(st.just("join"), st.sampled_from(MEMBERS), st.sampled_from(["p1", "p2", "p3"])),
    st.tuples(st.just("beat"), st.sampled_from(MEMBERS), st.booleans()),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS), st.just("")),
    st.tuples(st.just("advance"), st.sampled_from([50, 300, 2000]), st.just("")),
    st.tuples(st.just("complete"), st.just(""), st.just("")),
    st.tuples(st.just("topics"), st.booleans(), st.just("")),
), max_size=60)


def no_task_held_twice(ctx: Ctx) -> None:
    g = ctx.sg.groups.get(GROUP)
    if g is None:
        return
    seen: set[tuple[str, int]] = set()
    for c in g.current.values():
        held = c.active | c.active_pending_revocation
        assert not held & seen, "an active task is held by two members"
        seen |= held


@settings(max_examples=60, deadline=None)
@given(ops, st.booleans())
def test_streams_churn_keeps_single_ownership_and_replays(steps, offload) -> None:  # type: ignore[no-untyped-def]
    ctx = Ctx(StreamsSettings(assignor_offload_enable=offload, initial_rebalance_delay_ms=100,
                                 assignment_interval_ms=100, session_timeout_ms=1500, max_warmup_replicas=1,
                                 heartbeat_interval_ms=100,
                                 num_standby_replicas=1))
    for op, x, y in steps:
        g = ctx.sg.groups.get(GROUP)
        if op == "join":
            if g is None or x not in g.members:
                ctx.join(x, process=y)
        elif op == "beat" and g is not None and x in g.current:
            cur = g.current[x]
            # a member that revokes reports what it still owns; one that lags reports its old tasks
            owned = cur.active if y else cur.active | cur.active_pending_revocation
            ctx.owned(x, cur.member_epoch, owned)
        elif op == "leave" and g is not None and x in g.members:
            ctx.hb(x, -1)
        elif op == "advance":
            ctx.advance(x)
        elif op == "complete":
            ctx.complete_runs()
        elif op == "topics":
            ctx.sg.image = image(**READY) if x else image(lines=4)
        no_task_held_twice(ctx)
    assert ctx.replayed() == ctx.live()
    # the churn stops: topics back, every member heartbeats, runs complete, until the group is stable
    ctx.sg.image = image(**READY)
    for _ in range(30):
        ctx.complete_runs()
        g = ctx.sg.groups.get(GROUP)
        if g is None or not g.members:
            return
        for m in sorted(g.current):
            ctx.owned(m, g.current[m].member_epoch, g.current[m].active)
            no_task_held_twice(ctx)
        ctx.complete_runs()
        if ctx.state() == "Stable":
            break
        ctx.now += 100
    assert ctx.state() == "Stable"
    running = sorted(t for c in ctx.sg.groups[GROUP].current.values() for t in c.active)
    assert running == sorted({(s, p) for s in "01" for p in range(4)})
    assert ctx.replayed() == ctx.live()
