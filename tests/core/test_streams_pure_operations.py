"""Streams operations are pure (issue 26): they return records and volatile effects and change no stored group;
the working view they compute over (`streams/working.py`) behaves as the dict it overlays would."""

from __future__ import annotations

import random

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.streams import handlers as streams_shard
from groupcoord.coordinator.core.streams.group import StreamsHeartbeatRequest, assign_key, session_key
from groupcoord.coordinator.core.streams.records import NO_TASKS
from groupcoord.coordinator.core.streams.topology import StreamsTopology, Subtopology
from groupcoord.coordinator.core.streams.working import Overlay
from tests.core.context import CoreContext
from tests.core.streams_context import GROUP, READY, Ctx, word_count


def test_a_first_heartbeat_refused_after_its_group_record_was_written_leaves_no_group() -> None:
    """The issue's observation: the record that creates the group is written before the topology is refused."""
    ctx = Ctx()
    bad = StreamsTopology(1, (Subtopology("0"),))  # a subtopology without source topics
    assert ctx.join("x", topology=bad).error_code == Errors.STREAMS_INVALID_TOPOLOGY
    assert GROUP not in ctx.sg.groups and ctx.log == []


def test_a_heartbeat_returns_what_it_wrote_and_changes_the_group_only_when_applied() -> None:
    ctx = Ctx()
    ctx.join("a")
    before = ctx.live()
    req = StreamsHeartbeatRequest(GROUP, "b", 0, topology=word_count(), process_id="p-b", rebalance_timeout_ms=1000,
                                  active_tasks=NO_TASKS, standby_tasks=NO_TASKS, warmup_tasks=NO_TASKS,
                                  shutdown_application=True)
    res = ctx.sg.heartbeat(req, ctx.now)
    assert res.records and res.memory
    assert ctx.live() == before and "b" not in ctx.sg.groups[GROUP].owned_active
    assert not ctx.sg.groups[GROUP].shutdown_requested
    ctx._take(res)
    g = ctx.sg.groups[GROUP]
    assert "b" in g.members and g.owned_active["b"] == NO_TASKS and g.shutdown_requested
    assert ctx.live() == ctx.replayed()


def test_an_overlay_reads_and_iterates_as_its_base_dict_would_after_the_same_changes() -> None:
    rng = random.Random(26)
    for _ in range(500):
        base = {k: rng.random() for k in rng.sample(range(10), rng.randint(0, 8))}
        expected, view, kept = dict(base), Overlay(base), dict(base)
        for _ in range(12):
            key, op = rng.randrange(12), rng.random()
            if op < 0.5:
                value = rng.random()
                expected[key] = view[key] = value
            elif op < 0.8:
                assert expected.pop(key, None) == view.pop(key, None)
            assert (key in expected) == (key in view) and expected.get(key) == view.get(key)
            assert list(expected.items()) == list(view.items()) and len(expected) == len(view)
        assert base == kept, "the base is never written"


def test_streams_timers_through_the_shard_are_pure_and_fence_a_silent_member() -> None:
    """The session and assignment timers run through the shard's one timer path; the driver checks purity."""
    c = CoreContext(READY)
    req = StreamsHeartbeatRequest(GROUP, "s1", 0, topology=word_count(), process_id="p1", rebalance_timeout_ms=1000,
                                  active_tasks=NO_TASKS, standby_tasks=NO_TASKS, warmup_tasks=NO_TASKS)
    assert c.apply(streams_shard.heartbeat(c.shard, req, c.now)).error_code == 0
    assert session_key(GROUP, "s1") in c.timers and assign_key(GROUP) in c.timers
    c.advance(100_000)
    assert GROUP in c.shard.streams.groups and not c.shard.streams.groups[GROUP].members
    assert session_key(GROUP, "s1") not in c.shard.timer_deadlines
