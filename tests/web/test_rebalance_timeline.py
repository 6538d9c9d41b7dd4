"""The runtime's rebalance timeline, driven by the real core with a virtual clock (tests/core/context.py)."""

from __future__ import annotations

from typing import Any

from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.runtime.timeline import RebalanceTimeline
from tests.core.context import CoreContext


class TimelineContext(CoreContext):
    """Every operation's records go to a timeline, as the runtime's observers get them."""

    def __init__(self, per_group: int = 64) -> None:
        # offloaded assignor runs (completed at once by the context), as a server runs them by default
        super().__init__(overrides={"group.consumer.assignor.offload.enable": True})
        self.timeline = RebalanceTimeline(self.shard, per_group)

    def record(self, result: Result[Any]) -> None:
        super().record(result)
        if result.records:
            self.timeline.observe("op", result.records, self.now)

    def transitions(self, group_id: str = "grp") -> list[tuple[str, str, int, int]]:
        return [(e.previous_state, e.state, e.group_epoch, e.target_epoch) for e in self.timeline.events(group_id)]


def test_timeline_shows_a_join_through_assigning_and_reconciling_to_stable_then_a_second_join_and_a_leave() -> None:
    ctx = TimelineContext()
    a = ctx.join("a").member_id
    ctx.stabilise()
    epoch = ctx.group().group_epoch
    assert ctx.transitions() == [("", "ASSIGNING", epoch, 0), ("ASSIGNING", "RECONCILING", epoch, epoch),
                                 ("RECONCILING", "STABLE", epoch, epoch)]
    assert ctx.timeline.events("grp")[0].joined == (a,)
    b = ctx.join("b").member_id
    ctx.stabilise()
    events = ctx.timeline.events("grp")[3:]
    assert events[0].joined == (b,) and events[0].members == 2 and events[0].state != "STABLE"
    assert events[-1].state == "STABLE" and events[-1].group_epoch == ctx.group().group_epoch
    ctx.heartbeat(member_id=a, member_epoch=-1)  # a leaves
    assert ctx.timeline.events("grp")[-1].left == (a,)
    assert ctx.timeline.events("grp")[-1].members == 1


def test_timeline_keeps_only_the_last_events_of_each_group() -> None:
    ctx = TimelineContext(per_group=4)
    for i in range(6):
        ctx.join(f"m{i}")
        ctx.stabilise()
    events = ctx.timeline.events("grp")
    assert len(events) == 4
    assert events[-1].state == "STABLE" and events[-1].members == 6
    assert events[-1].group_epoch == ctx.group().group_epoch
    assert ctx.timeline.events("other") == []


def test_heartbeats_that_change_no_group_state_add_no_event() -> None:
    ctx = TimelineContext()
    member = ctx.join("a")
    ctx.stabilise()
    before = len(ctx.timeline.events("grp"))
    for _ in range(5):
        ctx.heartbeat(member_id=member.member_id, member_epoch=ctx.member(member.member_id).member_epoch)
    assert len(ctx.timeline.events("grp")) == before
