"""How many partitions a streams topology's internal topics must have (Kafka's InternalTopicManager,
RepartitionTopics, CopartitionedTopicsEnforcer and ChangelogTopics), so the coordinator can create the missing
ones and tell a member which existing ones are wrong.

- Repartition topics: a fixed count from the topology is kept; otherwise a fix-point over the subtopologies
  gives each repartition sink topic the largest partition count among the writing subtopology's source
  topics (external ones from the metadata image, repartition ones from this computation).
- Copartition groups: the repartition topics of a group take the external topics' count (which must all be
  equal), or, when the group has only repartition topics, the fixed count (fixed ones must agree) or the
  largest count. A fixed repartition topic that disagrees is INCORRECTLY_PARTITIONED_TOPICS.
- Changelog topics: a fixed count is kept; otherwise the subtopology's task count (its largest source or
  repartition source topic).

A topic that exists is counted as it is in the image (Kafka's topicPartitionCountProvider), so an existing
internal topic with another count than the decided one is reported, never silently used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from groupcoord.assignors.sticky_task import SubtopologySpec
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.core.streams.topology import (
    ConfiguredTopology,
    StatusEntry,
    StreamsStatus,
    StreamsTopology,
    Subtopology,
    TopicInfo,
)

Count = Callable[[str], "int | None"]


class TopicConfigurationError(Exception):
    """Kafka's TopicConfigurationException: the group is NotReady with this status."""

    def __init__(self, status: StreamsStatus, detail: str) -> None:
        super().__init__(detail)
        self.entry = StatusEntry(status, detail)


def configure_topology(topology: StreamsTopology, image: MetadataImage) -> ConfiguredTopology:
    """Kafka's InternalTopicManager.configureTopics: the task count of each subtopology and the internal topics
    to create, or the status that keeps the group NotReady."""
    missing = sorted({t for s in topology.subtopologies for t in s.source_topics if t not in image.by_name})
    if missing:
        return ConfiguredTopology({}, (StatusEntry(StreamsStatus.MISSING_SOURCE_TOPICS,
                                                   f"Source topics {summarize_topics(missing)} are missing."),))
    try:
        decided = decide_partition_counts(topology, image)
        to_create: dict[str, TopicInfo] = {}
        for s in topology.subtopologies:
            for t in s.repartition_source_topics + s.state_changelog_topics:
                to_create[t.name] = replace(t, partitions=decided[t.name])
        for name in sorted(to_create):
            existing = image.by_name.get(name)
            if existing is None:
                continue
            want = to_create.pop(name).partitions
            if existing.partition_count != want:
                raise TopicConfigurationError(
                    StreamsStatus.INCORRECTLY_PARTITIONED_TOPICS,
                    f"Existing topic {name[:249]} has different number of partitions: expected {want}, found "
                    f"{existing.partition_count}")
    except TopicConfigurationError as e:
        return ConfiguredTopology({}, (e.entry,))

    def count(topic: str) -> int | None:
        t = image.by_name.get(topic)
        return t.partition_count if t is not None else decided.get(topic)

    specs = {s.subtopology_id: SubtopologySpec(_task_count(s, count), s.stateful) for s in topology.subtopologies}
    if to_create:
        detail = f"Internal topics are missing: {summarize_topics(sorted(to_create))}"
        return ConfiguredTopology(specs, (StatusEntry(StreamsStatus.MISSING_INTERNAL_TOPICS, detail),),
                                  tuple(to_create[n] for n in sorted(to_create)))
    return ConfiguredTopology(specs)


def summarize_topics(names: list[str]) -> str:
    """Kafka's InternalTopicManager.summarizeTopics: at most 3 names, then how many more."""
    if not names:
        return "<none>"
    shown = ", ".join(n[:249] for n in names[:3])
    return shown + (f" and {len(names) - 3} additional topics" if len(names) > 3 else "")


MAX_CREATION_ERRORS = 3  # failures one MISSING_INTERNAL_TOPICS detail names


def with_creation_errors(statuses: tuple[StatusEntry, ...],
                         errors: Mapping[str, str]) -> tuple[StatusEntry, ...]:
    """Name the internal topics whose creation failed (unexpired failures, by topic) in the
    MISSING_INTERNAL_TOPICS status, as Kafka's StreamsGroupHeartbeat handler (KafkaApis) appends
    AutoTopicCreationManager.getStreamsInternalTopicCreationErrors to it: "<detail>; Creation failed:
    <topic> (<error>), ... and N more." in topic order, at most 3 named."""
    if not errors:
        return statuses
    names = sorted(errors)
    shown = ", ".join(f"{n[:249]} ({errors[n][:300]})" for n in names[:MAX_CREATION_ERRORS])
    if len(names) > MAX_CREATION_ERRORS:
        shown += f" and {len(names) - MAX_CREATION_ERRORS} more"
    return tuple(StatusEntry(s.code, f"{s.detail}; Creation failed: {shown}.")
                 if s.code == StreamsStatus.MISSING_INTERNAL_TOPICS else s for s in statuses)


def _java_map(counts: Mapping[str, int]) -> str:
    """A Java TreeMap's toString, as Kafka's messages print it."""
    return "{" + ", ".join(f"{k[:249]}={v}" for k, v in sorted(counts.items())) + "}"


def decide_partition_counts(topology: StreamsTopology, image: MetadataImage) -> dict[str, int]:
    """The partition count every repartition and changelog topic must have. The source topics must exist."""
    decided: dict[str, int] = {}

    def count(topic: str) -> int | None:
        t = image.by_name.get(topic)
        return t.partition_count if t is not None else decided.get(topic)

    decided.update(_repartition_counts(topology.subtopologies, image))
    fixed = {t.name for s in topology.subtopologies for t in s.repartition_source_topics if t.partitions}
    flexible = {t.name for s in topology.subtopologies for t in s.repartition_source_topics if not t.partitions}
    for s in topology.subtopologies:
        for group in s.copartition_groups:
            names = {s.source_topics[i] for i in group.source_topics}
            names |= {s.repartition_source_topics[i].name for i in group.repartition_source_topics}
            decided.update(_enforce_copartitioning(names, fixed, flexible, count))
    for s in topology.subtopologies:
        tasks = _task_count(s, count)
        for t in s.state_changelog_topics:
            decided[t.name] = t.partitions or tasks
    return decided


def _task_count(s: Subtopology, count: Count) -> int:
    counts = [count(t) for t in s.source_topics]
    counts += [count(t.name) for t in s.repartition_source_topics]
    return max(c for c in counts if c is not None)


def _repartition_counts(subtopologies: tuple[Subtopology, ...], image: MetadataImage) -> dict[str, int]:
    """Kafka's RepartitionTopics.computeRepartitionTopicPartitionCount: a fix-point over the sinks."""
    counts = {t.name: t.partitions for s in subtopologies for t in s.repartition_source_topics if t.partitions}
    while True:
        needed = progress = False
        for s in subtopologies:
            for sink in s.repartition_sink_topics:
                if sink in counts:
                    continue
                candidates = [counts[t.name] for t in s.repartition_source_topics if t.name in counts]
                candidates += [image.by_name[t].partition_count for t in s.source_topics if t in image.by_name]
                if candidates:
                    counts[sink] = max(candidates)
                    progress = True
                else:
                    needed = True
        if not needed:
            return counts
        if not progress:  # validate_topology refuses such a topology at the join; kept for safety
            raise TopicConfigurationError(StreamsStatus.INCORRECTLY_PARTITIONED_TOPICS,
                                          "Failed to compute number of partitions for all repartition topics.")


def _enforce_copartitioning(names: set[str], fixed: set[str], flexible: set[str],
                            count: Count) -> dict[str, int]:
    """Kafka's CopartitionedTopicsEnforcer.enforce for one copartition group."""
    def n(topic: str) -> int:
        c = count(topic)
        assert c is not None, topic
        return int(c)

    repartition = {t: n(t) for t in names if t in fixed or t in flexible}
    external = {t: n(t) for t in names if t not in repartition}
    if not external:
        fixed_here = sorted(t for t in repartition if t in fixed)
        if fixed_here:
            use = repartition[fixed_here[0]]
            if any(repartition[t] != use for t in fixed_here):
                raise TopicConfigurationError(
                    StreamsStatus.INCORRECTLY_PARTITIONED_TOPICS,
                    f"Following topics do not have the same number of partitions: [{_java_map(repartition)}]")
        else:
            use = max(repartition.values())
    else:
        use = next(iter(external.values()))
        if len(set(external.values())) > 1:
            raise TopicConfigurationError(
                StreamsStatus.INCORRECTLY_PARTITIONED_TOPICS,
                f"Following topics do not have the same number of partitions: [{_java_map(external)}]")
    for t, c in sorted(repartition.items()):
        if t in fixed and c != use:
            raise TopicConfigurationError(
                StreamsStatus.INCORRECTLY_PARTITIONED_TOPICS,
                f"Number of partitions [{c}] of repartition topic [{t[:249]}] doesn't match number of partitions "
                f"[{use}] of the source topic.")
    return dict.fromkeys(repartition, use)
