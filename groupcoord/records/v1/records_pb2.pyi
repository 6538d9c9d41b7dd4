from collections.abc import Iterable as _Iterable
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from google.protobuf.internal import containers as _containers

DESCRIPTOR: _descriptor.FileDescriptor

class PartitionSet(_message.Message):
    __slots__ = ("topic_id", "partitions")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic_id: str | None = ..., partitions: _Iterable[int] | None = ...) -> None: ...

class PartitionEpochs(_message.Message):
    __slots__ = ("topic_id", "partitions", "epochs")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    epochs: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic_id: str | None = ..., partitions: _Iterable[int] | None = ..., epochs: _Iterable[int] | None = ...) -> None: ...

class ConsumerGroupMetadata(_message.Message):
    __slots__ = ("epoch", "metadata_hash")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_HASH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    metadata_hash: int
    def __init__(self, epoch: int | None = ..., metadata_hash: int | None = ...) -> None: ...

class ConsumerGroupMemberMetadata(_message.Message):
    __slots__ = ("member_id", "instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names", "subscribed_topic_regex", "server_assignor", "rebalance_timeout_ms")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_REGEX_FIELD_NUMBER: _ClassVar[int]
    SERVER_ASSIGNOR_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    instance_id: str
    rack_id: str
    client_id: str
    client_host: str
    subscribed_topic_names: _containers.RepeatedScalarFieldContainer[str]
    subscribed_topic_regex: str
    server_assignor: str
    rebalance_timeout_ms: int
    def __init__(self, member_id: str | None = ..., instance_id: str | None = ..., rack_id: str | None = ..., client_id: str | None = ..., client_host: str | None = ..., subscribed_topic_names: _Iterable[str] | None = ..., subscribed_topic_regex: str | None = ..., server_assignor: str | None = ..., rebalance_timeout_ms: int | None = ...) -> None: ...

class ConsumerGroupTargetAssignmentMember(_message.Message):
    __slots__ = ("member_id", "partitions")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionSet]
    def __init__(self, member_id: str | None = ..., partitions: _Iterable[PartitionSet | _Mapping] | None = ...) -> None: ...

class ConsumerGroupTargetAssignmentMetadata(_message.Message):
    __slots__ = ("assignment_epoch", "timestamp_ms")
    ASSIGNMENT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    assignment_epoch: int
    timestamp_ms: int
    def __init__(self, assignment_epoch: int | None = ..., timestamp_ms: int | None = ...) -> None: ...

class ConsumerGroupCurrentMemberAssignment(_message.Message):
    __slots__ = ("member_id", "member_epoch", "previous_member_epoch", "state", "assigned_partitions", "partitions_pending_revocation")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_PENDING_REVOCATION_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: str
    assigned_partitions: _containers.RepeatedCompositeFieldContainer[PartitionEpochs]
    partitions_pending_revocation: _containers.RepeatedCompositeFieldContainer[PartitionSet]
    def __init__(self, member_id: str | None = ..., member_epoch: int | None = ..., previous_member_epoch: int | None = ..., state: str | None = ..., assigned_partitions: _Iterable[PartitionEpochs | _Mapping] | None = ..., partitions_pending_revocation: _Iterable[PartitionSet | _Mapping] | None = ...) -> None: ...

class OffsetCommit(_message.Message):
    __slots__ = ("topic", "partition", "committed_offset", "leader_epoch", "metadata", "commit_timestamp_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    committed_offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    def __init__(self, topic: str | None = ..., partition: int | None = ..., committed_offset: int | None = ..., leader_epoch: int | None = ..., metadata: str | None = ..., commit_timestamp_ms: int | None = ...) -> None: ...

class GroupConfig(_message.Message):
    __slots__ = ("configs",)
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: str | None = ..., value: str | None = ...) -> None: ...
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    configs: _containers.ScalarMap[str, str]
    def __init__(self, configs: _Mapping[str, str] | None = ...) -> None: ...

class GenericRecord(_message.Message):
    __slots__ = ("type", "json")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    type: str
    json: bytes
    def __init__(self, type: str | None = ..., json: bytes | None = ...) -> None: ...

class Tombstone(_message.Message):
    __slots__ = ("kind",)
    KIND_FIELD_NUMBER: _ClassVar[int]
    kind: str
    def __init__(self, kind: str | None = ...) -> None: ...

class LogRecord(_message.Message):
    __slots__ = ("version", "group_id", "member_id", "topic", "partition", "group_metadata", "member_metadata", "target_member", "target_metadata", "current_assignment", "offset_commit", "group_config", "generic", "tombstone")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    GROUP_METADATA_FIELD_NUMBER: _ClassVar[int]
    MEMBER_METADATA_FIELD_NUMBER: _ClassVar[int]
    TARGET_MEMBER_FIELD_NUMBER: _ClassVar[int]
    TARGET_METADATA_FIELD_NUMBER: _ClassVar[int]
    CURRENT_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_COMMIT_FIELD_NUMBER: _ClassVar[int]
    GROUP_CONFIG_FIELD_NUMBER: _ClassVar[int]
    GENERIC_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_FIELD_NUMBER: _ClassVar[int]
    version: int
    group_id: str
    member_id: str
    topic: str
    partition: int
    group_metadata: ConsumerGroupMetadata
    member_metadata: ConsumerGroupMemberMetadata
    target_member: ConsumerGroupTargetAssignmentMember
    target_metadata: ConsumerGroupTargetAssignmentMetadata
    current_assignment: ConsumerGroupCurrentMemberAssignment
    offset_commit: OffsetCommit
    group_config: GroupConfig
    generic: GenericRecord
    tombstone: Tombstone
    def __init__(self, version: int | None = ..., group_id: str | None = ..., member_id: str | None = ..., topic: str | None = ..., partition: int | None = ..., group_metadata: ConsumerGroupMetadata | _Mapping | None = ..., member_metadata: ConsumerGroupMemberMetadata | _Mapping | None = ..., target_member: ConsumerGroupTargetAssignmentMember | _Mapping | None = ..., target_metadata: ConsumerGroupTargetAssignmentMetadata | _Mapping | None = ..., current_assignment: ConsumerGroupCurrentMemberAssignment | _Mapping | None = ..., offset_commit: OffsetCommit | _Mapping | None = ..., group_config: GroupConfig | _Mapping | None = ..., generic: GenericRecord | _Mapping | None = ..., tombstone: Tombstone | _Mapping | None = ...) -> None: ...
