"""Internal topics of a streams group (Kafka's InternalTopicManager): the coordinator decides their partition
counts from the topology and the source topics, asks the runtime to create the missing ones, and keeps the
group NotReady with Kafka's status detail until they exist with the right counts."""

from __future__ import annotations

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.streams.records import NO_TASKS
from groupcoord.coordinator.core.streams.topology import (
    CopartitionGroup,
    StreamsStatus,
    StreamsTopology,
    Subtopology,
    TopicInfo,
)
from tests.core.streams_context import GROUP, READY, Ctx, StreamsSettings, image, word_count

SYNC = StreamsSettings(assignor_offload_enable=False, initial_rebalance_delay_ms=0, assignment_interval_ms=0,
                          max_warmup_replicas=0, heartbeat_interval_ms=500)


def join_topology(subs: tuple[Subtopology, ...]) -> StreamsTopology:
    return StreamsTopology(1, subs)


def test_missing_internal_topics_are_requested_with_their_partition_counts_and_the_group_is_not_ready() -> None:
    ctx = Ctx(SYNC, topics={"lines": 4})
    r = ctx.join("a")
    assert ctx.state() == "NotReady"
    assert [(s.code, s.detail) for s in r.status or ()] == [(
        StreamsStatus.MISSING_INTERNAL_TOPICS,
        "Internal topics are missing: app-counts-changelog, app-words-repartition")]
    task = ctx.creates[-1]
    assert task.group_id == GROUP and task.error_ttl_ms == 1000, "twice the heartbeat interval"
    assert [(t.name, t.partitions) for t in task.topics] == [("app-counts-changelog", 4), ("app-words-repartition", 4)]
    ctx.owned("a", 1, NO_TASKS)
    assert len(ctx.creates) == 2, "asked again with every heartbeat while missing (the runtime de-duplicates)"


def test_the_group_leaves_not_ready_once_metadata_shows_the_topics_and_asks_no_more() -> None:
    ctx = Ctx(SYNC, topics={"lines": 4})
    ctx.join("a")
    ctx.sg.image = image(**READY)
    asked = len(ctx.creates)
    r = ctx.owned("a", 1, NO_TASKS)
    assert not r.status and len(r.active_tasks or ()) == 8
    assert len(ctx.creates) == asked
    assert ctx.state() == "Stable" or ctx.state() == "Reconciling"


def test_flexible_repartition_and_changelog_topics_take_the_source_topics_count() -> None:
    t = join_topology((
        Subtopology("0", source_topics=("lines",), repartition_sink_topics=("r",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("r"),), state_changelog_topics=(TopicInfo("c"),)),
    ))
    ctx = Ctx(SYNC, topics={"lines": 6})
    ctx.join("a", topology=t)
    assert [(x.name, x.partitions) for x in ctx.creates[-1].topics] == [("c", 6), ("r", 6)]


def test_a_repartition_topic_copartitioned_with_an_external_topic_takes_its_count() -> None:
    t = join_topology((
        Subtopology("0", source_topics=("lines",), repartition_sink_topics=("r",)),
        Subtopology("1", source_topics=("left",), repartition_source_topics=(TopicInfo("r"),),
                    state_changelog_topics=(TopicInfo("join-store"),),
                    copartition_groups=(CopartitionGroup((0,), (0,)),)),
    ))
    ctx = Ctx(SYNC, topics={"lines": 6, "left": 3})
    ctx.join("a", topology=t)
    assert [(x.name, x.partitions) for x in ctx.creates[-1].topics] == [("join-store", 3), ("r", 3)]


def test_copartitioned_external_topics_with_different_counts_are_incorrectly_partitioned() -> None:
    t = join_topology((Subtopology("0", source_topics=("a", "b"), copartition_groups=(CopartitionGroup((0, 1)),)),))
    ctx = Ctx(SYNC, topics={"a": 3, "b": 4})
    r = ctx.join("x", topology=t)
    assert [(s.code, s.detail) for s in r.status or ()] == [(
        StreamsStatus.INCORRECTLY_PARTITIONED_TOPICS,
        "Following topics do not have the same number of partitions: [{a=3, b=4}]")]
    assert ctx.state() == "NotReady" and not ctx.creates


def test_a_fixed_repartition_topic_copartitioned_with_another_count_is_incorrectly_partitioned() -> None:
    t = join_topology((
        Subtopology("0", source_topics=("lines",), repartition_sink_topics=("r",)),
        Subtopology("1", source_topics=("left",), repartition_source_topics=(TopicInfo("r", 5),),
                    copartition_groups=(CopartitionGroup((0,), (0,)),)),
    ))
    ctx = Ctx(SYNC, topics={"lines": 6, "left": 3})
    r = ctx.join("a", topology=t)
    assert [(s.code, s.detail) for s in r.status or ()] == [(
        StreamsStatus.INCORRECTLY_PARTITIONED_TOPICS,
        "Number of partitions [5] of repartition topic [r] doesn't match number of partitions [3] of the source "
        "topic.")]


def test_an_existing_internal_topic_with_another_count_keeps_the_group_not_ready_with_kafkas_detail() -> None:
    ctx = Ctx(SYNC, topics=dict(READY, **{"app-counts-changelog": 3}))
    r = ctx.join("a")
    assert [(s.code, s.detail) for s in r.status or ()] == [(
        StreamsStatus.INCORRECTLY_PARTITIONED_TOPICS,
        "Existing topic app-counts-changelog has different number of partitions: expected 4, found 3")]
    assert ctx.state() == "NotReady" and not ctx.creates, "nothing is created while a topic is wrong"
    ctx.advance(100)
    ctx.owned("a", 1, NO_TASKS)
    assert ctx.state() == "NotReady" and ctx.sg.groups[GROUP].target_assignment_epoch == 0


def test_more_than_three_missing_topics_are_summarized_as_kafka_does() -> None:
    t = join_topology((Subtopology("0", source_topics=("lines",), state_changelog_topics=tuple(
        TopicInfo(f"c{i}") for i in range(5))),))
    ctx = Ctx(SYNC, topics={"lines": 2})
    r = ctx.join("a", topology=t)
    assert r.status and r.status[0].detail == "Internal topics are missing: c0, c1, c2 and 2 additional topics"
    assert len(ctx.creates[-1].topics) == 5


def test_a_missing_source_topic_is_reported_before_internal_topics_and_nothing_is_created() -> None:
    ctx = Ctx(SYNC, topics={})
    r = ctx.join("a")
    assert [(s.code, s.detail) for s in r.status or ()] == [
        (StreamsStatus.MISSING_SOURCE_TOPICS, "Source topics lines are missing.")]
    assert not ctx.creates


def test_topologies_whose_counts_cannot_be_decided_are_invalid() -> None:
    ctx = Ctx(SYNC, topics={"lines": 4})
    fixed_changelog = join_topology((Subtopology("0", source_topics=("lines",),
                                                 state_changelog_topics=(TopicInfo("c", 4),)),))
    r = ctx.join("a", topology=fixed_changelog)
    assert (r.error_code, r.error_message) == (
        Errors.STREAMS_INVALID_TOPOLOGY,
        "Changelog topic c must have an undefined partition count, but it is set to 4.")
    never_written = join_topology((Subtopology("0", repartition_source_topics=(TopicInfo("r"),)),))
    assert ctx.join("a", topology=never_written).error_code == Errors.STREAMS_INVALID_TOPOLOGY
    loop = join_topology((
        Subtopology("0", repartition_source_topics=(TopicInfo("r1"),), repartition_sink_topics=("r2",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("r2"),), repartition_sink_topics=("r1",)),
    ))
    r = ctx.join("a", topology=loop)
    assert r.error_code == Errors.STREAMS_INVALID_TOPOLOGY and "loops" in (r.error_message or "")
    assert ctx.join("a", topology=word_count()).error_code == 0


def test_creation_failures_are_appended_to_the_missing_internal_topics_status_only() -> None:
    from groupcoord.coordinator.core.streams.internal_topics import with_creation_errors
    from groupcoord.coordinator.core.streams.topology import StatusEntry, StreamsStatus

    statuses = (StatusEntry(StreamsStatus.STALE_TOPOLOGY, "stale"),
                StatusEntry(StreamsStatus.MISSING_INTERNAL_TOPICS, "Internal topics are missing: a, b, c, d"))
    assert with_creation_errors(statuses, {}) == statuses
    out = with_creation_errors(statuses, {"d": "no", "b": "policy", "a": "bad config", "c": "quota"})
    assert out[0] == statuses[0]
    assert out[1].detail == ("Internal topics are missing: a, b, c, d; Creation failed: a (bad config), "
                             "b (policy), c (quota) and 1 more.")
