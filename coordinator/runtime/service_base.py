"""Protobuf helpers and request limits shared by the GroupCoordinator servicer's RPC groups (`admin_service.py`,
`service.py`). The request pipeline itself (authorization, submission, errors) is `pipeline.py`'s."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from groupcoord.coordinator.core import limits
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.wire.v1 import coordinator_pb2 as pb

# SyncGroupRequest has no field for the seed's "the leader transmits an error": a leader that could not compute
# the assignment sends its (Kafka) error code in this gRPC request metadata key; see `SyncGroup`.
LEADER_ERROR_METADATA_KEY = "groupcoord-assignment-error"


def topic_partitions_to_pb(tps: Mapping[str, Iterable[int]], image: MetadataImage) -> list[pb.TopicPartitions]:
    out = []
    for topic_id in sorted(tps):
        t = image.by_id.get(topic_id)
        out.append(pb.TopicPartitions(topic_id=topic_id, partitions=sorted(tps[topic_id]),
                                      topic_name=t.name if t else ""))
    return out


def _owned_from_pb(msg: pb.ConsumerGroupHeartbeatRequest) -> dict[str, frozenset[int]] | None:
    if not msg.HasField("topic_partitions"):
        return None
    owned: dict[str, frozenset[int]] = {}
    for tp in msg.topic_partitions.topics:
        seen = owned.get(tp.topic_id)
        owned[tp.topic_id] = frozenset(tp.partitions) if seen is None else seen.union(tp.partitions)
    return owned


def _leader_error(metadata: Iterable[tuple[str, Any]]) -> Errors:
    for key, value in metadata:
        if key == LEADER_ERROR_METADATA_KEY:
            try:
                code = int(value)
            except ValueError:
                message = f"{LEADER_ERROR_METADATA_KEY} must be a Kafka error code, not {limits.shorten(value)}."
                raise CoordinatorError(Errors.INVALID_REQUEST, message) from None
            if code == 0:
                return Errors.NONE
            return Errors(code) if code in Errors._value2member_map_ else Errors.UNKNOWN_SERVER_ERROR
    return Errors.NONE


def _check_ids(group_id: str, *values: str | None) -> None:
    """The group id (INVALID_GROUP_ID when too long) and the member/instance ids of a request."""
    limits.check_group_id(group_id)
    for v in values:
        limits.check_length("member or instance id", v)


def _owned_count(msg: pb.ConsumerGroupHeartbeatRequest, cap: int = limits.OWNED_MAX_PARTITIONS) -> None:
    """Counted on the protobuf before any translation: translating a huge list is itself the cost. `cap` is
    at least the partitions the metadata knows (`_owned_cap`): a member may own what it was assigned."""
    if msg.HasField("topic_partitions"):
        topics = msg.topic_partitions.topics
        limits.check_count("owned topics", len(topics), cap)  # regexes may match many
        limits.check_count("owned topic-partitions", sum(len(tp.partitions) for tp in topics), cap)
        limits.check_lengths("owned topic id", (tp.topic_id for tp in topics), limits.TOPIC_NAME_MAX_CHARS)
    if msg.HasField("subscribed_topic_names"):
        limits.check_count("subscribed topic names", len(msg.subscribed_topic_names.values),
                           limits.SUBSCRIPTION_MAX_TOPICS)


def add_partition_errors(topics: Any, errors: Iterable[Any]) -> None:
    """Per-partition results (`topic`, `partition`, `error_code`, `error_message`) into a response's repeated
    topic field `topics`, one entry per topic in first-seen order, as Kafka's offset responses group them."""
    by_topic: dict[str, Any] = {}
    for pe in errors:
        topic = by_topic.get(pe.topic)
        if topic is None:
            topic = by_topic[pe.topic] = topics.add(name=pe.topic)
        topic.partitions.add(partition_index=pe.partition, error_code=int(pe.error_code),
                             error_message=pe.error_message)
