"""Kafka's PartitionsByUserEndpoint (interactive queries): which input partitions each user endpoint serves."""

from __future__ import annotations

from collections.abc import Mapping

from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.core.streams.messages import EndpointPartitions
from groupcoord.coordinator.core.streams.records import (
    StreamsGroupCurrentMemberAssignment,
    StreamsGroupMemberMetadata,
    Tasks,
)
from groupcoord.coordinator.core.streams.topology import StreamsTopology


def partitions_by_endpoint(
    topology: StreamsTopology | None,
    members: Mapping[str, StreamsGroupMemberMetadata],
    current: Mapping[str, StreamsGroupCurrentMemberAssignment],
    image: MetadataImage,
) -> tuple[EndpointPartitions, ...] | None:
    """For each member with a user endpoint, the input partitions of its active and standby tasks (a task
    (s, p) reads partition p of every source and repartition source topic of subtopology s that has one).
    None when no member has an endpoint."""
    if topology is None or not any(m.user_endpoint for m in members.values()):
        return None
    inputs = {s.subtopology_id: list(s.source_topics) + [t.name for t in s.repartition_source_topics]
              for s in topology.subtopologies}

    def partitions(tasks: Tasks) -> tuple[tuple[str, tuple[int, ...]], ...]:
        by: dict[str, set[int]] = {}
        for sid, p in tasks:
            for topic in inputs.get(sid, ()):
                t = image.by_name.get(topic)
                if t is not None and p < t.partition_count:
                    by.setdefault(topic, set()).add(p)
        return tuple((topic, tuple(sorted(ps))) for topic, ps in sorted(by.items()))

    out = []
    for mid in sorted(members):
        m, cur = members[mid], current.get(mid)
        if m.user_endpoint is None or cur is None:
            continue
        out.append(EndpointPartitions(m.user_endpoint[0], m.user_endpoint[1], partitions(cur.active),
                                      partitions(cur.standby)))
    return tuple(out)
