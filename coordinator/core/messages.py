"""Request and response values the core speaks. The runtime translates them to and from protobuf.

`None` means "null" in Kafka's schema: the field was not sent (for heartbeats, "unchanged").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from groupcoord.coordinator.core.errors import Errors

# topic id -> partitions
TopicPartitionsById = Mapping[str, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: TopicPartitionsById | None = None  # owned partitions
    client_id: str = ""
    client_host: str = ""
    principal: str | None = None  # the authenticated caller (None: authentication off); see core/principals.py


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResponse:
    error_code: Errors = Errors.NONE
    error_message: str = ""
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitionsById | None = None
    session_timeout_ms: int = 0  # groupcoord extension: the client-side lease is derived from it


@dataclass(frozen=True, slots=True)
class CommitPartition:
    topic: str
    partition: int
    committed_offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    member_id: str
    generation_id_or_member_epoch: int
    partitions: Sequence[CommitPartition]
    group_instance_id: str | None = None
    principal: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionError:
    topic: str
    partition: int
    error_code: Errors
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    error_code: Errors
    error_message: str
    partitions: Sequence[PartitionError]


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    group_id: str
    member_id: str = ""
    member_epoch: int = -1
    topics: Mapping[str, Sequence[int] | None] | None = None  # None: everything; topic -> None: all partitions
    require_stable: bool = False


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    committed_offset: int
    leader_epoch: int
    metadata: str
    error_code: Errors = Errors.NONE


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    error_code: Errors
    error_message: str
    offsets: Sequence[FetchedOffset] = ()


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    state: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: TopicPartitionsById
    target_assignment: TopicPartitionsById
    partitions_pending_revocation: TopicPartitionsById
    client_id: str = ""
    client_host: str = ""
    member_metadata: bytes = b""
    member_assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error_code: Errors = Errors.NONE
    error_message: str = ""
    group_type: str = ""
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    protocol_type: str = ""
    members: Sequence[DescribedMember] = ()
    assignment_timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str


@dataclass(frozen=True, slots=True)
class GroupResult:
    group_id: str
    error_code: Errors = Errors.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str
    is_default: bool


@dataclass(frozen=True, slots=True)
class DescribedGroupConfig:
    group_id: str
    error_code: Errors = Errors.NONE
    error_message: str = ""
    configs: Sequence[ConfigEntry] = field(default_factory=tuple)
