"""A streams group's topology (KIP-1071): its validation, and its configuration against the metadata image.

Validation (`validate_topology`) rejects a topology that can never work, with STREAMS_INVALID_TOPOLOGY
(130). Configuration (`streams_internal_topics.configure_topology`) checks it against the topics that exist
now and decides the internal topics' partition counts; missing internal topics are created by the
coordinator, and until they exist (or while some are wrongly partitioned) the group is NotReady and members
see a status (Kafka's MISSING_SOURCE_TOPICS, MISSING_INTERNAL_TOPICS, INCORRECTLY_PARTITIONED_TOPICS). A
configured topology gives each subtopology its task count: the largest partition count among its source
and repartition source topics.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from groupcoord.assignors.sticky_task import SubtopologySpec

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class StreamsStatus(enum.IntEnum):
    """Kafka's StreamsGroupHeartbeatResponse status codes."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5
    MISSING_CLIENT_TAGS = 6  # Kafka 4.4: a member lacks a key of group.streams.rack.aware.assignment.tags


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic: `partitions` 0 means "whatever the topology implies"."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    topic_configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    """Indexes into the subtopology's `source_topics` and `repartition_source_topics`."""

    source_topics: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()

    @property
    def stateful(self) -> bool:
        return bool(self.state_changelog_topics)


@dataclass(frozen=True, slots=True)
class StreamsTopology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]


@dataclass(frozen=True, slots=True)
class StatusEntry:
    code: StreamsStatus
    detail: str


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    """The assignor's view of a topology that can run now, or the statuses that say why it cannot."""

    subtopologies: dict[str, SubtopologySpec]
    statuses: tuple[StatusEntry, ...] = ()
    topics_to_create: tuple[TopicInfo, ...] = ()  # missing internal topics, with their decided partition counts

    @property
    def ready(self) -> bool:
        return not self.statuses


def _names(names: list[str], limit: int = 5) -> str:
    """A bounded list of topic names for a message (never echoes unbounded input)."""
    shown = ", ".join(n[:80] for n in sorted(names)[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def validate_topology(topology: StreamsTopology) -> str | None:
    """None when the topology is well formed, else why it is not (for STREAMS_INVALID_TOPOLOGY)."""
    if not topology.subtopologies:
        return "the topology has no subtopologies"
    if topology.epoch < 0:
        return "the topology epoch is negative"
    ids = [s.subtopology_id for s in topology.subtopologies]
    if len(set(ids)) != len(ids) or any(not i for i in ids):
        return "subtopology ids must be unique and non-empty"
    repartition_sources = {t.name for s in topology.subtopologies for t in s.repartition_source_topics}
    changelogs: set[str] = set()
    for s in topology.subtopologies:
        internal = [t.name for t in s.repartition_source_topics + s.state_changelog_topics]
        for name in list(s.source_topics) + list(s.repartition_sink_topics) + internal:
            if not _TOPIC_NAME.match(name):
                return f"subtopology {s.subtopology_id[:80]} names an invalid topic"
        if not s.source_topics and not s.repartition_source_topics:
            return f"subtopology {s.subtopology_id[:80]} has no source topics"
        if set(s.source_topics) & repartition_sources:
            return f"subtopology {s.subtopology_id[:80]} reads a repartition topic as a user source topic"
        missing = [t for t in s.repartition_sink_topics if t not in repartition_sources]
        if missing:
            return f"repartition sink topics are not repartition source topics: {_names(missing)}"
        for t in s.state_changelog_topics:
            if t.partitions:  # Kafka's GroupCoordinatorService.throwIfInvalidTopology
                return (f"Changelog topic {t.name[:249]} must have an undefined partition count, but it is set to "
                        f"{t.partitions}.")
            if t.name in changelogs:
                return "a changelog topic belongs to two subtopologies"
            changelogs.add(t.name)
        for g in s.copartition_groups:
            if any(not 0 <= i < len(s.source_topics) for i in g.source_topics) or any(
                not 0 <= i < len(s.repartition_source_topics) for i in g.repartition_source_topics
            ):
                return f"subtopology {s.subtopology_id[:80]} has a copartition group index out of range"
    sinks = {t for s in topology.subtopologies for t in s.repartition_sink_topics}
    if any(t.name not in sinks and not t.partitions for s in topology.subtopologies
           for t in s.repartition_source_topics):
        return ("Failed to compute number of partitions for all repartition topics, because a repartition source "
                "topic is never used as a sink topic.")
    if not _counts_derivable(topology):
        return ("Failed to compute number of partitions for all repartition topics. There may be loops in the "
                "topology that cannot be resolved.")
    return None


def _counts_derivable(topology: StreamsTopology) -> bool:
    """Kafka's RepartitionTopics fix-point can give every repartition topic a count: a sink's count comes from
    its subtopology's external sources or from repartition sources that already have one."""
    known = {t.name for s in topology.subtopologies for t in s.repartition_source_topics if t.partitions}
    pending = {t for s in topology.subtopologies for t in s.repartition_sink_topics} - known
    while pending:
        progress = {sink for s in topology.subtopologies for sink in s.repartition_sink_topics
                    if sink in pending
                    and (s.source_topics or any(t.name in known for t in s.repartition_source_topics))}
        if not progress:
            return False
        known |= progress
        pending -= progress
    return True


def internal_topics(topology: StreamsTopology) -> list[TopicInfo]:
    """The topics the coordinator expects the application's internal topics to be (Kafka would create them)."""
    return [t for s in topology.subtopologies for t in s.repartition_source_topics + s.state_changelog_topics]
