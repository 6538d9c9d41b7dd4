"""Streams groups (KIP-1071) with KIP-1263 batching and offload, driven by a virtual clock."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from groupcoord.coordinator.core.config import ConfigError
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.streams.records import NO_TASKS
from groupcoord.coordinator.core.streams.topology import StreamsStatus, StreamsTopology, Subtopology, TopicInfo
from tests.core.streams_context import GROUP, READY, Ctx, StreamsSettings, image, word_count
from tests.purity import applied

SYNC = StreamsSettings(assignor_offload_enable=False, initial_rebalance_delay_ms=0, assignment_interval_ms=0,
                          max_warmup_replicas=0)


def all_active(ctx: Ctx) -> list:
    return sorted(t for c in ctx.sg.groups[GROUP].current.values() for t in c.active)


def beat(ctx: Ctx, m: str):
    """A heartbeat at the member's epoch reporting it owns what it was given."""
    cur = ctx.sg.groups[GROUP].current[m]
    return ctx.owned(m, cur.member_epoch, cur.active)


def stable_pair(ctx: Ctx) -> None:
    """a and b joined and reconciled (sync, no delay, no interval)."""
    ctx.join("a")
    ctx.join("b")
    for _ in range(3):
        for m in ("a", "b"):
            cur = ctx.sg.groups[GROUP].current[m]
            ctx.owned(m, cur.member_epoch, cur.active)


def test_first_member_gets_the_empty_epoch_1_while_the_initial_delay_runs() -> None:
    ctx = Ctx(StreamsSettings(initial_rebalance_delay_ms=3000))
    r = ctx.join("a")
    assert r.error_code == 0 and r.member_epoch == 1 and r.active_tasks == NO_TASKS
    assert ctx.sg.groups[GROUP].group_epoch == 2
    assert ctx.state() == "Assigning"
    assert ctx.timers[("streams-assign", GROUP)] == 3000
    ctx.advance(2999)
    assert not ctx.pending


def test_initial_delay_timer_starts_the_first_offloaded_run_and_its_result_reaches_the_member() -> None:
    ctx = Ctx(StreamsSettings(initial_rebalance_delay_ms=3000))
    ctx.join("a")
    ctx.join("b")
    ctx.advance(3000)
    assert len(ctx.pending) == 1, "one run for both members, after the delay"
    assert ctx.state() == "Assigning"
    ctx.complete_runs()
    assert ctx.sg.groups[GROUP].target_assignment_epoch == 3
    ra = ctx.owned("a", 1, NO_TASKS)
    rb = ctx.owned("b", 1, NO_TASKS)
    assert ra.member_epoch == rb.member_epoch == 3
    assert len(ra.active_tasks or ()) + len(rb.active_tasks or ()) == 8
    assert ctx.state() == "Stable"


def test_assignment_interval_starts_after_the_initial_delay() -> None:
    ctx = Ctx(StreamsSettings(initial_rebalance_delay_ms=3000, assignment_interval_ms=1000,
                                 assignor_offload_enable=False))
    ctx.join("a")
    ctx.advance(3000)
    assert ctx.sg.groups[GROUP].assignment_timestamp_ms == 3000
    ctx.advance(100)
    ctx.join("b")
    assert ctx.sg.groups[GROUP].target_assignment_epoch == 2, "batched: the interval since the last run has not elapsed"
    ctx.advance(899)
    beat(ctx, "a")
    assert ctx.sg.groups[GROUP].target_assignment_epoch == 2
    ctx.advance(1)
    beat(ctx, "a")
    assert ctx.sg.groups[GROUP].target_assignment_epoch == 3
    assert ctx.sg.groups[GROUP].assignment_timestamp_ms == 4000


def test_inflight_run_blocks_a_second_run_and_missed_changes_trigger_the_next() -> None:
    ctx = Ctx(StreamsSettings(initial_rebalance_delay_ms=0, assignment_interval_ms=0))
    ctx.join("a")
    assert len(ctx.pending) == 1
    ctx.join("b")
    ctx.join("c")
    assert len(ctx.pending) == 1, "in-flight guard: no second run"
    ctx.hb("c", -1)
    ctx.complete_runs()
    g = ctx.sg.groups[GROUP]
    assert g.target_assignment_epoch == 2 and g.group_epoch == 5 and "c" not in g.target
    assert ctx.state() == "Assigning"
    ctx.owned("a", 1, NO_TASKS)
    assert len(ctx.pending) == 1, "the missed changes start a new run on the next heartbeat"
    ctx.complete_runs()
    assert ctx.sg.groups[GROUP].target_assignment_epoch == 5


def test_group_level_interval_override_and_bounds() -> None:
    ctx = Ctx(replace(SYNC, assignment_interval_ms=0))
    ctx.set_group_config({"streams.assignment.interval.ms": "5000"})
    ctx.join("a")
    ctx.now = 10
    ctx.join("b")
    assert ctx.sg.groups[GROUP].target_assignment_epoch == 2
    ctx.now = 5000
    beat(ctx, "a")
    assert ctx.sg.groups[GROUP].target_assignment_epoch == 3
    with pytest.raises(CoordinatorError) as e:
        ctx.set_group_config({"streams.assignment.interval.ms": "20000"})
    assert e.value.code == Errors.INVALID_CONFIG and "15000" in e.value.message
    ctx.set_group_config({"streams.assignment.interval.ms": "-1", "streams.assignor.offload.enable": "true"})
    assert ctx.sg.configs.offload_enabled(GROUP) and ctx.sg.configs.assignment_interval_ms(GROUP) == 0


def test_broker_interval_outside_its_bounds_is_refused_at_start_up() -> None:
    with pytest.raises(ConfigError, match="assignment.interval.ms"):
        StreamsSettings(assignment_interval_ms=20_000).configs()
    assert StreamsSettings(assignment_interval_ms=0).configs().assignment_interval_ms(GROUP) == 0


def test_active_tasks_are_revoked_before_they_are_assigned_elsewhere() -> None:
    ctx = Ctx(SYNC)
    ctx.join("a")
    a = ctx.sg.groups[GROUP].current["a"]
    assert a.member_epoch == 2 and len(a.active) == 8
    rb = ctx.join("b")
    g = ctx.sg.groups[GROUP]
    assert rb.member_epoch == 3 and rb.active_tasks == NO_TASKS, "b waits for a's tasks"
    assert g.current["b"].state == "UNRELEASED_TASKS"
    ra = ctx.owned("a", 2, a.active)
    assert ra.member_epoch == 2 and len(ra.active_tasks or ()) == 4
    assert g.current["a"].state == "UNREVOKED_TASKS" and len(g.current["a"].active_pending_revocation) == 4
    assert ctx.state() == "Reconciling"
    assert ctx.owned("b", 3, NO_TASKS).active_tasks == NO_TASKS, "still owned by a"
    ra = ctx.owned("a", 2, g.current["a"].active)
    assert ra.member_epoch == 3
    rb = ctx.owned("b", 3, NO_TASKS)
    assert len(rb.active_tasks or ()) == 4
    assert all_active(ctx) == sorted({(s, p) for s in "01" for p in range(4)})
    assert ctx.state() == "Stable"


def test_a_member_that_never_revokes_is_fenced_after_its_rebalance_timeout() -> None:
    ctx = Ctx(SYNC)
    ctx.join("a", rebalance_timeout_ms=2000)
    ctx.join("b")
    ctx.owned("a", 2, ctx.sg.groups[GROUP].current["a"].active)
    ctx.advance(2000)
    assert "a" not in ctx.sg.groups[GROUP].members
    assert ctx.owned("a", 2, NO_TASKS).error_code == Errors.UNKNOWN_MEMBER_ID


def test_session_expiry_removes_the_member_and_bumps_the_epoch() -> None:
    ctx = Ctx(replace(SYNC, session_timeout_ms=1000, heartbeat_interval_ms=100))
    ctx.join("a")
    epoch = ctx.sg.groups[GROUP].group_epoch
    ctx.advance(1000)
    assert not ctx.sg.groups[GROUP].members and ctx.sg.groups[GROUP].group_epoch == epoch + 1
    assert ctx.state() == "Empty"


def test_missing_internal_topics_make_the_group_not_ready_until_they_exist() -> None:
    ctx = Ctx(SYNC, topics={"lines": 4})
    r = ctx.join("a")
    assert ctx.state() == "NotReady"
    assert r.status and r.status[0].code == StreamsStatus.MISSING_INTERNAL_TOPICS
    assert "app-counts-changelog" in r.status[0].detail
    assert ctx.sg.groups[GROUP].target_assignment_epoch == 0 and r.member_epoch == 1
    ctx.sg.image = image(**READY)
    r = ctx.owned("a", 1, NO_TASKS)
    assert not r.status and r.member_epoch >= 2 and len(r.active_tasks or ()) == 8


def test_missing_source_topic_and_wrongly_partitioned_changelog_are_reported() -> None:
    ctx = Ctx(SYNC, topics={"app-words-repartition": 4, "app-counts-changelog": 4})
    assert ctx.join("a").status[0].code == StreamsStatus.MISSING_SOURCE_TOPICS  # type: ignore[index]
    ctx2 = Ctx(SYNC, topics=dict(READY, **{"app-counts-changelog": 3}))
    r = ctx2.join("a")
    assert r.status and r.status[0].code == StreamsStatus.INCORRECTLY_PARTITIONED_TOPICS
    assert ctx2.state() == "NotReady"


def test_topology_validation_and_epochs() -> None:
    ctx = Ctx(SYNC)
    bad = StreamsTopology(1, (Subtopology("0", source_topics=("lines",), repartition_sink_topics=("nowhere",)),))
    assert ctx.join("x", topology=bad).error_code == Errors.STREAMS_INVALID_TOPOLOGY == 130
    assert ctx.join("x", topology=StreamsTopology(1, ())).error_code == 130
    ctx.join("a")
    other = StreamsTopology(1, (Subtopology("0", source_topics=("lines",)),))
    assert ctx.join("b", topology=other).error_code == Errors.STREAMS_INVALID_TOPOLOGY_EPOCH == 131
    newer = word_count(epoch=2)
    assert ctx.join("c", topology=newer).error_code == 0
    assert ctx.sg.groups[GROUP].topology == newer
    assert ctx.join("d", topology=word_count(epoch=1)).error_code == Errors.STREAMS_TOPOLOGY_FENCED == 132
    r = ctx.owned("a", ctx.sg.groups[GROUP].current["a"].member_epoch, ctx.sg.groups[GROUP].current["a"].active)
    assert r.status and r.status[0].code == StreamsStatus.STALE_TOPOLOGY


def test_request_errors_are_in_band() -> None:
    ctx = Ctx(SYNC)
    assert ctx.hb("a", 0, process_id="p").error_code == Errors.INVALID_REQUEST
    assert ctx.owned("a", 3, NO_TASKS).error_code == Errors.GROUP_ID_NOT_FOUND  # Kafka's getStreamsGroupOrThrow
    ctx.join("a")
    r = ctx.owned("a", 7, NO_TASKS)
    assert r.error_code == Errors.FENCED_MEMBER_EPOCH and r.error_message
    assert ctx.hb("a", 2, topology=word_count()).error_code == Errors.INVALID_REQUEST


def test_standby_replicas_go_to_another_process_and_warmups_precede_a_move() -> None:
    ctx = Ctx(replace(SYNC, num_standby_replicas=1, max_warmup_replicas=2))
    ctx.join("a")
    a = ctx.sg.groups[GROUP].current["a"]
    assert a.standby == NO_TASKS, "one process: no standby can be placed"
    ctx.join("b")
    g = ctx.sg.groups[GROUP]
    b = g.target["b"]
    stateful = {("1", p) for p in range(4)}
    assert b.standby | b.warmup | b.active >= stateful - g.target["a"].active
    assert not (g.target["a"].standby & g.target["a"].active)
    assert b.warmup, "stateful tasks moving to a new process warm up first"
    assert not (b.active & stateful), "the stateful actives stay with their state"
    # b reports its warm-ups caught up: the group epoch moves and they become active on b.
    offsets = {t: 100 for t in b.warmup}
    ctx.hb("b", g.current["b"].member_epoch, task_offsets=offsets, task_end_offsets=offsets)
    assert b.warmup <= g.target["b"].active


def test_shutdown_application_reaches_every_member() -> None:
    ctx = Ctx(SYNC)
    stable_pair(ctx)
    ctx.hb("a", ctx.sg.groups[GROUP].current["a"].member_epoch, shutdown_application=True)
    r = ctx.hb("b", ctx.sg.groups[GROUP].current["b"].member_epoch)
    assert r.status and r.status[-1].code == StreamsStatus.SHUTDOWN_APPLICATION


def test_a_group_left_empty_is_deleted_by_its_tombstones_and_is_dead() -> None:
    ctx = Ctx(SYNC)
    ctx.join("a")
    assert not ctx.sg.groups[GROUP].is_empty()  # DeleteGroups refuses it (NON_EMPTY_GROUP: the shard's admin)
    ctx.hb("a", -1)
    assert ctx.state() == "Empty"
    tombstones = ctx.sg.groups[GROUP].deletion_records()
    for rec in tombstones:
        ctx.sg.replay(rec)
    ctx.log.extend(tombstones)
    assert ctx.state() == "Dead"
    assert ctx.replayed() == ctx.live() == {}


@pytest.mark.parametrize("offload", [False, True])
def test_replaying_the_records_rebuilds_the_same_groups(offload: bool) -> None:
    ctx = Ctx(StreamsSettings(assignor_offload_enable=offload, initial_rebalance_delay_ms=500,
                                 assignment_interval_ms=200, num_standby_replicas=1,
                                 session_timeout_ms=5000, heartbeat_interval_ms=100))
    for i, m in enumerate("abcde"):
        ctx.join(m, process=f"p{i % 3}")
        ctx.advance(150)
        ctx.complete_runs()
    for _ in range(6):
        for m in "abcde":
            c = ctx.sg.groups[GROUP].current.get(m)
            if c is not None:
                ctx.owned(m, c.member_epoch, c.active)
        ctx.advance(250)
        ctx.complete_runs()
        if _ == 2:
            ctx.hb("c", -1)
    assert ctx.replayed() == ctx.live()
    assert all_active(ctx) == sorted({(s, p) for s in "01" for p in range(4)})
    assert ctx.state() == "Stable"


def test_changelog_topic_info_partitions_are_validated_against_the_repartition_topic() -> None:
    t = StreamsTopology(1, (
        Subtopology("0", source_topics=("lines",), repartition_sink_topics=("r",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("r", 8),)),
    ))
    ctx = Ctx(SYNC, topics={"lines": 4, "r": 4})
    r = ctx.join("a", topology=t)
    assert r.status and r.status[0].code == StreamsStatus.INCORRECTLY_PARTITIONED_TOPICS


def test_snapshot_records_rebuild_the_same_groups_and_load_rearms_session_timers() -> None:
    ctx = Ctx(replace(SYNC, num_standby_replicas=1))
    stable_pair(ctx)
    ctx.join("c")
    ctx.hb("a", ctx.sg.groups[GROUP].current["a"].member_epoch, task_offsets={("1", 0): 3},
           task_end_offsets={("1", 0): 7})
    fresh = Ctx(SYNC)
    for group in ctx.sg.groups.values():
        for rec in group.snapshot_records():
            fresh.sg.replay(rec)
    assert {g: v.persisted() for g, v in fresh.sg.groups.items()} == ctx.live()
    keys = {t.key for group in fresh.sg.groups.values() for t in group.timers_after_load(100)}
    assert {("streams-session", GROUP, m) for m in "abc"} <= keys


def test_alter_group_configs_override_reaches_the_streams_group_in_a_shard() -> None:
    from groupcoord.coordinator.core.config import BrokerConfig
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard
    from groupcoord.coordinator.core.streams import handlers as streams_shard
    from groupcoord.coordinator.core.streams.group import StreamsHeartbeatRequest

    shard = GroupCoordinatorShard(BrokerConfig.from_mapping({
        "group.streams.initial.rebalance.delay.ms": 0, "group.streams.assignor.offload.enable": False,
        "group.streams.assignment.interval.ms": 0}), lambda: "unused", image(**READY))
    res = applied(shard, shard.alter_group_configs(GROUP, {"streams.assignment.interval.ms": "5000"}, False, 0))
    assert res.response.error_code == 0

    def join(m: str, now: int) -> None:
        req = StreamsHeartbeatRequest(GROUP, m, 0, topology=word_count(), process_id=m, rebalance_timeout_ms=1000,
                                      active_tasks=NO_TASKS, standby_tasks=NO_TASKS, warmup_tasks=NO_TASKS)
        res = streams_shard.heartbeat(shard, req, now)
        shard.apply(res)
        assert res.response.error_code == 0

    join("a", 0)
    join("b", 10)
    g = shard.streams.groups[GROUP]
    assert g.target_assignment_epoch == 2 and g.group_epoch == 3, "the group's 5,000 ms interval holds the second run"
    assert shard.streams.state(GROUP).value == "Assigning"


def test_a_refused_operation_is_rolled_back_to_the_streams_group_the_log_holds() -> None:
    from groupcoord.coordinator.core.config import BrokerConfig
    from groupcoord.coordinator.core.group_state import restore_groups
    from groupcoord.coordinator.core.results import ScheduleTimer
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard
    from groupcoord.coordinator.core.streams import handlers as streams_shard
    from groupcoord.coordinator.core.streams.group import StreamsHeartbeatRequest

    shard = GroupCoordinatorShard(BrokerConfig.from_mapping({
        "group.streams.initial.rebalance.delay.ms": 0, "group.streams.assignor.offload.enable": False,
        "group.streams.assignment.interval.ms": 0}), lambda: "unused", image(**READY))

    def join(m: str, now: int) -> list[object]:
        req = StreamsHeartbeatRequest(GROUP, m, 0, topology=word_count(), process_id=m, rebalance_timeout_ms=1000,
                                      active_tasks=NO_TASKS, standby_tasks=NO_TASKS, warmup_tasks=NO_TASKS)
        res = streams_shard.heartbeat(shard, req, now)
        shard.apply(res)
        return res.records

    durable = join("a", 0)
    before = copy.deepcopy(shard.streams.groups[GROUP].persisted())
    join("b", 10)  # the log refuses this one
    assert shard.streams.groups[GROUP].persisted() != before
    timers = restore_groups(shard, frozenset({GROUP}), durable, 20).timers
    assert shard.streams.groups[GROUP].persisted() == before
    armed = {t.key for t in timers if isinstance(t, ScheduleTimer)}
    assert armed == {("streams-session", GROUP, "a")}


def test_partitions_by_user_endpoint_are_sent_when_the_endpoint_epoch_differs() -> None:
    ctx = Ctx(SYNC)
    ctx.join("a", user_endpoint=("host-a", 7001))
    ctx.join("b", user_endpoint=("host-b", 7002))
    stable_pair(ctx)
    g = ctx.sg.groups[GROUP]
    r = ctx.owned("a", g.current["a"].member_epoch, g.current["a"].active)
    assert r.partitions_by_user_endpoint is not None
    hosts = {(e.host, e.port): e for e in r.partitions_by_user_endpoint}
    assert set(hosts) == {("host-a", 7001), ("host-b", 7002)}
    served = {(t, p) for e in hosts.values() for t, ps in e.active for p in ps}
    assert served == {(t, p) for t in ("lines", "app-words-repartition") for p in range(4)}
    again = ctx.owned("a", g.current["a"].member_epoch, g.current["a"].active,
                      endpoint_information_epoch=r.endpoint_information_epoch)
    assert again.partitions_by_user_endpoint is None, "unchanged since the member's endpoint epoch"


def test_a_streams_member_fenced_by_its_session_timeout_is_counted_like_any_modern_members() -> None:
    ctx = Ctx(replace(SYNC, session_timeout_ms=3000, heartbeat_interval_ms=100))
    ctx.join("a")
    ctx.advance(3001)
    assert GROUP in ctx.sg.groups and "a" not in ctx.sg.groups[GROUP].members
    assert ctx.sg.stats.members_fenced_session == 1
