"""Share-group (KIP-932) records and request/response messages.

Records follow Kafka's ShareGroup*Value records in __consumer_offsets, plus one record per share-partition
with its whole delivery state (Kafka keeps that in the share coordinator as ShareSnapshotValue: the start
offset and the state batches). Our record also keeps the acquisition locks (holder and deadline), so that a
coordinator failover keeps the locks members hold instead of handing their records out again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.modern.group import MemberTombstones
from groupcoord.coordinator.core.records import Tombstone

# topic id -> partitions
Partitions = Mapping[str, frozenset[int]]
# (first, last, state, delivery count, lock holder, lock deadline ms)
StateBatch = tuple[int, int, int, int, str, int]


@dataclass(frozen=True, slots=True)
class ShareGroupMetadata:
    group_id: str
    epoch: int
    metadata_hash: int


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataTombstone(Tombstone):
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadata:
    group_id: str
    member_id: str
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    principal: str | None = None


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataTombstone(Tombstone):
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMember:
    group_id: str
    member_id: str
    partitions: Mapping[str, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberTombstone(Tombstone):
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadata:
    group_id: str
    assignment_epoch: int
    timestamp_ms: int  # KIP-1263: when the computation finished (0 = unknown)


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignment:
    group_id: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    assigned_partitions: Mapping[str, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentTombstone(Tombstone):
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class SharePartitionState:
    group_id: str
    topic_id: str
    partition: int
    start_offset: int
    next_offset: int
    batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class SharePartitionStateTombstone(Tombstone):
    group_id: str
    topic_id: str
    partition: int


MEMBER_TOMBSTONES = MemberTombstones(ShareGroupCurrentMemberAssignmentTombstone,
                                     ShareGroupTargetAssignmentMemberTombstone, ShareGroupMemberMetadataTombstone)
SHARE_RECORD_TYPES: tuple[type, ...] = (
    ShareGroupMetadata, ShareGroupMetadataTombstone, ShareGroupMemberMetadata, ShareGroupMemberMetadataTombstone,
    ShareGroupTargetAssignmentMember, ShareGroupTargetAssignmentMemberTombstone, ShareGroupTargetAssignmentMetadata,
    ShareGroupCurrentMemberAssignment, ShareGroupCurrentMemberAssignmentTombstone, SharePartitionState,
    SharePartitionStateTombstone,
)


# --- messages ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None  # None: unchanged since the last heartbeat
    client_id: str = ""
    client_host: str = ""
    principal: str | None = None


@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatResponse:
    error_code: Errors = Errors.NONE
    error_message: str = ""
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # None: unchanged


@dataclass(frozen=True, slots=True)
class AcquirePartition:
    topic_id: str
    partition: int
    log_start_offset: int
    log_end_offset: int  # the partition's high watermark as the member last read it


@dataclass(frozen=True, slots=True)
class ShareAcquireRequest:
    group_id: str
    member_id: str
    partitions: tuple[AcquirePartition, ...]
    max_records: int = 500
    principal: str | None = None


@dataclass(frozen=True, slots=True)
class AcquiredPartition:
    topic_id: str
    partition: int
    error_code: Errors = Errors.NONE
    error_message: str = ""
    ranges: tuple[tuple[int, int, int], ...] = ()  # (first, last, delivery count)
    lock_deadline_ms: int = 0
    start_offset: int = 0


@dataclass(frozen=True, slots=True)
class ShareAcquireResponse:
    error_code: Errors = Errors.NONE
    error_message: str = ""
    partitions: tuple[AcquiredPartition, ...] = ()
    record_lock_duration_ms: int = 0


@dataclass(frozen=True, slots=True)
class AcknowledgeRange:
    topic_id: str
    partition: int
    first: int
    last: int
    acknowledge_type: int  # 1 ACCEPT, 2 RELEASE, 3 REJECT, 4 RENEW (KIP-1222)


@dataclass(frozen=True, slots=True)
class ShareAcknowledgeRequest:
    group_id: str
    member_id: str
    ranges: tuple[AcknowledgeRange, ...]
    principal: str | None = None


@dataclass(frozen=True, slots=True)
class AcknowledgeResult:
    topic_id: str
    partition: int
    first: int
    last: int
    error_code: Errors = Errors.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class ShareAcknowledgeResponse:
    error_code: Errors = Errors.NONE
    error_message: str = ""
    results: tuple[AcknowledgeResult, ...] = field(default_factory=tuple)
