"""The records the core emits: every state change is one of these, and state is their replay.

Modelled on Kafka's `__consumer_offsets` coordinator records (ConsumerGroupMetadataValue,
ConsumerGroupMemberMetadataValue, ConsumerGroupTargetAssignmentMember/MetadataValue,
ConsumerGroupCurrentMemberAssignmentValue, OffsetCommitValue, ...). A record with a key and no value is
a tombstone, here an explicit `...Tombstone` type. Each carries `group_id` so the log can be keyed and
compacted per group. Persisted encoding (versioned protobuf) lives with the log, not here: the wire API
and the log evolve at different speeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class Tombstone:
    """A record with a key and no value (every `...Tombstone` type, of every group type): it deletes what its key
    names, so the log may drop the key once it is compacted (runtime/kafka_tombstones.py)."""

    __slots__ = ()


# topic id -> partitions
Partitions = Mapping[str, frozenset[int]]
# topic id -> partition -> epoch at which the member was assigned the partition
PartitionEpochs = Mapping[str, Mapping[int, int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    group_id: str
    epoch: int
    metadata_hash: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataTombstone(Tombstone):
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadata:
    group_id: str
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    rebalance_timeout_ms: int
    principal: str | None = None  # who joined the member (authentication on); see core/principals.py


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataTombstone(Tombstone):
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMember:
    group_id: str
    member_id: str
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberTombstone(Tombstone):
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadata:
    group_id: str
    assignment_epoch: int
    timestamp_ms: int  # KIP-1263: when the assignment calculation finished (0 = unknown)


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignment:
    group_id: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: str
    assigned_partitions: PartitionEpochs
    partitions_pending_revocation: Partitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentTombstone(Tombstone):
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpression:
    """Kafka's ConsumerGroupRegularExpressionValue: the topics a subscribed regex resolved to, and when."""

    group_id: str
    regex: str
    topics: tuple[str, ...]
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionTombstone(Tombstone):
    group_id: str
    regex: str


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    group_id: str
    topic: str
    partition: int
    committed_offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class OffsetCommitTombstone(Tombstone):
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupEmptySince:
    """When the group last became empty (Kafka's currentStateTimestamp): KIP-211 counts offset retention from
    it. Persisted so that replay expires exactly what the live coordinator expired."""

    group_id: str
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class GroupEmptySinceTombstone(Tombstone):
    group_id: str


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The group's dynamic config overrides, whole (an empty mapping deletes them all)."""

    group_id: str
    configs: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ConsumerGroupClassicMemberMetadata:
    """Kafka's ConsumerGroupMemberMetadataValue.ClassicMemberMetadata, as its own record (keyed like the member):
    a member that speaks the classic protocol, its JoinGroup session timeout and protocols."""

    group_id: str
    member_id: str
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata) in preference order


@dataclass(frozen=True, slots=True)
class ConsumerGroupClassicMemberMetadataTombstone(Tombstone):
    group_id: str
    member_id: str


Record = Any  # any of the dataclasses above, or the classic group's records
