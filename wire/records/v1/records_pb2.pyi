from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PartitionSet(_message.Message):
    __slots__ = ("topic_id", "partitions")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class PartitionEpochs(_message.Message):
    __slots__ = ("topic_id", "partitions", "epochs")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    epochs: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ..., epochs: _Optional[_Iterable[int]] = ...) -> None: ...

class ConsumerGroupMetadata(_message.Message):
    __slots__ = ("epoch", "metadata_hash")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_HASH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    metadata_hash: int
    def __init__(self, epoch: _Optional[int] = ..., metadata_hash: _Optional[int] = ...) -> None: ...

class ConsumerGroupMemberMetadata(_message.Message):
    __slots__ = ("member_id", "instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names", "subscribed_topic_regex", "server_assignor", "rebalance_timeout_ms", "principal")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_REGEX_FIELD_NUMBER: _ClassVar[int]
    SERVER_ASSIGNOR_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    instance_id: str
    rack_id: str
    client_id: str
    client_host: str
    subscribed_topic_names: _containers.RepeatedScalarFieldContainer[str]
    subscribed_topic_regex: str
    server_assignor: str
    rebalance_timeout_ms: int
    principal: str
    def __init__(self, member_id: _Optional[str] = ..., instance_id: _Optional[str] = ..., rack_id: _Optional[str] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., subscribed_topic_names: _Optional[_Iterable[str]] = ..., subscribed_topic_regex: _Optional[str] = ..., server_assignor: _Optional[str] = ..., rebalance_timeout_ms: _Optional[int] = ..., principal: _Optional[str] = ...) -> None: ...

class ConsumerGroupTargetAssignmentMember(_message.Message):
    __slots__ = ("member_id", "partitions")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionSet]
    def __init__(self, member_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionSet, _Mapping]]] = ...) -> None: ...

class ConsumerGroupTargetAssignmentMetadata(_message.Message):
    __slots__ = ("assignment_epoch", "timestamp_ms")
    ASSIGNMENT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    assignment_epoch: int
    timestamp_ms: int
    def __init__(self, assignment_epoch: _Optional[int] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

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
    def __init__(self, member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., previous_member_epoch: _Optional[int] = ..., state: _Optional[str] = ..., assigned_partitions: _Optional[_Iterable[_Union[PartitionEpochs, _Mapping]]] = ..., partitions_pending_revocation: _Optional[_Iterable[_Union[PartitionSet, _Mapping]]] = ...) -> None: ...

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
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., committed_offset: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., metadata: _Optional[str] = ..., commit_timestamp_ms: _Optional[int] = ...) -> None: ...

class GroupConfig(_message.Message):
    __slots__ = ("configs",)
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    configs: _containers.ScalarMap[str, str]
    def __init__(self, configs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GenericRecord(_message.Message):
    __slots__ = ("type", "json")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    type: str
    json: bytes
    def __init__(self, type: _Optional[str] = ..., json: _Optional[bytes] = ...) -> None: ...

class Tombstone(_message.Message):
    __slots__ = ("kind",)
    KIND_FIELD_NUMBER: _ClassVar[int]
    kind: str
    def __init__(self, kind: _Optional[str] = ...) -> None: ...

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
    def __init__(self, version: _Optional[int] = ..., group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ..., group_metadata: _Optional[_Union[ConsumerGroupMetadata, _Mapping]] = ..., member_metadata: _Optional[_Union[ConsumerGroupMemberMetadata, _Mapping]] = ..., target_member: _Optional[_Union[ConsumerGroupTargetAssignmentMember, _Mapping]] = ..., target_metadata: _Optional[_Union[ConsumerGroupTargetAssignmentMetadata, _Mapping]] = ..., current_assignment: _Optional[_Union[ConsumerGroupCurrentMemberAssignment, _Mapping]] = ..., offset_commit: _Optional[_Union[OffsetCommit, _Mapping]] = ..., group_config: _Optional[_Union[GroupConfig, _Mapping]] = ..., generic: _Optional[_Union[GenericRecord, _Mapping]] = ..., tombstone: _Optional[_Union[Tombstone, _Mapping]] = ...) -> None: ...
