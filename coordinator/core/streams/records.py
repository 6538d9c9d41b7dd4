"""The records a streams group (KIP-1071) emits; its state is their replay.

Modelled on Kafka's StreamsGroup*Value coordinator records (StreamsGroupMetadataValue,
StreamsGroupTopologyValue, StreamsGroupMemberMetadataValue, StreamsGroupTargetAssignmentMember/MetadataValue
with KIP-1263's timestamp, StreamsGroupCurrentMemberAssignmentValue). Tombstones are explicit types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from groupcoord.assignors.sticky_task import TaskId
from groupcoord.coordinator.core.modern.group import MemberTombstones
from groupcoord.coordinator.core.records import Tombstone
from groupcoord.coordinator.core.streams.topology import StreamsTopology

Tasks = frozenset[TaskId]
NO_TASKS: Tasks = frozenset()


@dataclass(frozen=True, slots=True)
class StreamsGroupMetadata:
    group_id: str
    epoch: int
    metadata_hash: int
    first_assignment_not_before_ms: int  # group.streams.initial.rebalance.delay.ms after the group was created
    # Kafka's LastAssignmentConfigs: the group's assignment configs at this epoch bump (sorted key-value pairs).
    last_assignment_configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupMetadataTombstone(Tombstone):
    group_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupTopologyRecord:
    group_id: str
    topology: StreamsTopology


@dataclass(frozen=True, slots=True)
class StreamsGroupTopologyTombstone(Tombstone):
    group_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupMemberMetadata:
    group_id: str
    member_id: str
    process_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    user_endpoint: tuple[str, int] | None
    client_tags: tuple[tuple[str, str], ...]
    rebalance_timeout_ms: int
    topology_epoch: int
    task_offsets: Mapping[TaskId, int] = field(default_factory=dict)
    task_end_offsets: Mapping[TaskId, int] = field(default_factory=dict)
    principal: str | None = None  # who joined the member (authentication on); see core/principals.py


@dataclass(frozen=True, slots=True)
class StreamsGroupMemberMetadataTombstone(Tombstone):
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMember:
    group_id: str
    member_id: str
    active: Tasks
    standby: Tasks
    warmup: Tasks


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMemberTombstone(Tombstone):
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMetadata:
    group_id: str
    assignment_epoch: int
    timestamp_ms: int  # KIP-1263: when the assignment computation finished


@dataclass(frozen=True, slots=True)
class StreamsGroupCurrentMemberAssignment:
    group_id: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: str  # STABLE | UNREVOKED_TASKS | UNRELEASED_TASKS
    active: Tasks
    standby: Tasks
    warmup: Tasks
    active_pending_revocation: Tasks


@dataclass(frozen=True, slots=True)
class StreamsGroupCurrentMemberAssignmentTombstone(Tombstone):
    group_id: str
    member_id: str


MEMBER_TOMBSTONES = MemberTombstones(StreamsGroupCurrentMemberAssignmentTombstone,
                                     StreamsGroupTargetAssignmentMemberTombstone, StreamsGroupMemberMetadataTombstone)
