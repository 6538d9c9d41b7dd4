from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TopicPartitions(_message.Message):
    __slots__ = ("topic_id", "partitions", "topic_name")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    topic_name: str
    def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ..., topic_name: _Optional[str] = ...) -> None: ...

class TopicPartitionsList(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ...) -> None: ...

class StringList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

class ConsumerGroupHeartbeatRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "member_epoch", "instance_id", "rack_id", "rebalance_timeout_ms", "subscribed_topic_names", "subscribed_topic_regex", "server_assignor", "topic_partitions")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_REGEX_FIELD_NUMBER: _ClassVar[int]
    SERVER_ASSIGNOR_FIELD_NUMBER: _ClassVar[int]
    TOPIC_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str
    rack_id: str
    rebalance_timeout_ms: int
    subscribed_topic_names: StringList
    subscribed_topic_regex: str
    server_assignor: str
    topic_partitions: TopicPartitionsList
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., instance_id: _Optional[str] = ..., rack_id: _Optional[str] = ..., rebalance_timeout_ms: _Optional[int] = ..., subscribed_topic_names: _Optional[_Union[StringList, _Mapping]] = ..., subscribed_topic_regex: _Optional[str] = ..., server_assignor: _Optional[str] = ..., topic_partitions: _Optional[_Union[TopicPartitionsList, _Mapping]] = ...) -> None: ...

class ConsumerGroupHeartbeatResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "member_id", "member_epoch", "heartbeat_interval_ms", "assignment", "session_timeout_ms")
    class Assignment(_message.Message):
        __slots__ = ("topic_partitions",)
        TOPIC_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic_partitions: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
        def __init__(self, topic_partitions: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: ConsumerGroupHeartbeatResponse.Assignment
    session_timeout_ms: int
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., assignment: _Optional[_Union[ConsumerGroupHeartbeatResponse.Assignment, _Mapping]] = ..., session_timeout_ms: _Optional[int] = ...) -> None: ...

class ConsumerGroupHeartbeatBatchRequest(_message.Message):
    __slots__ = ("heartbeats",)
    HEARTBEATS_FIELD_NUMBER: _ClassVar[int]
    heartbeats: _containers.RepeatedCompositeFieldContainer[ConsumerGroupHeartbeatRequest]
    def __init__(self, heartbeats: _Optional[_Iterable[_Union[ConsumerGroupHeartbeatRequest, _Mapping]]] = ...) -> None: ...

class ConsumerGroupHeartbeatBatchResponse(_message.Message):
    __slots__ = ("responses",)
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedCompositeFieldContainer[ConsumerGroupHeartbeatResponse]
    def __init__(self, responses: _Optional[_Iterable[_Union[ConsumerGroupHeartbeatResponse, _Mapping]]] = ...) -> None: ...

class JoinGroupRequestProtocol(_message.Message):
    __slots__ = ("name", "metadata")
    NAME_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    name: str
    metadata: bytes
    def __init__(self, name: _Optional[str] = ..., metadata: _Optional[bytes] = ...) -> None: ...

class JoinGroupRequest(_message.Message):
    __slots__ = ("group_id", "session_timeout_ms", "rebalance_timeout_ms", "member_id", "group_instance_id", "protocol_type", "protocols", "reason")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOLS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str
    protocol_type: str
    protocols: _containers.RepeatedCompositeFieldContainer[JoinGroupRequestProtocol]
    reason: str
    def __init__(self, group_id: _Optional[str] = ..., session_timeout_ms: _Optional[int] = ..., rebalance_timeout_ms: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocols: _Optional[_Iterable[_Union[JoinGroupRequestProtocol, _Mapping]]] = ..., reason: _Optional[str] = ...) -> None: ...

class JoinGroupResponseMember(_message.Message):
    __slots__ = ("member_id", "group_instance_id", "metadata")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    group_instance_id: str
    metadata: bytes
    def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., metadata: _Optional[bytes] = ...) -> None: ...

class JoinGroupResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "generation_id", "protocol_type", "protocol_name", "leader", "member_id", "members", "skip_assignment")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    SKIP_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    generation_id: int
    protocol_type: str
    protocol_name: str
    leader: str
    member_id: str
    members: _containers.RepeatedCompositeFieldContainer[JoinGroupResponseMember]
    skip_assignment: bool
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., generation_id: _Optional[int] = ..., protocol_type: _Optional[str] = ..., protocol_name: _Optional[str] = ..., leader: _Optional[str] = ..., member_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[JoinGroupResponseMember, _Mapping]]] = ..., skip_assignment: _Optional[bool] = ...) -> None: ...

class SyncGroupRequestAssignment(_message.Message):
    __slots__ = ("member_id", "assignment")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    assignment: bytes
    def __init__(self, member_id: _Optional[str] = ..., assignment: _Optional[bytes] = ...) -> None: ...

class SyncGroupRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id", "protocol_type", "protocol_name", "assignments")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str
    protocol_type: str
    protocol_name: str
    assignments: _containers.RepeatedCompositeFieldContainer[SyncGroupRequestAssignment]
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocol_name: _Optional[str] = ..., assignments: _Optional[_Iterable[_Union[SyncGroupRequestAssignment, _Mapping]]] = ...) -> None: ...

class SyncGroupResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "protocol_type", "protocol_name", "assignment")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    protocol_type: str
    protocol_name: str
    assignment: bytes
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocol_name: _Optional[str] = ..., assignment: _Optional[bytes] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("error_code", "error_message")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class MemberIdentity(_message.Message):
    __slots__ = ("member_id", "group_instance_id", "reason")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    group_instance_id: str
    reason: str
    def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class LeaveGroupRequest(_message.Message):
    __slots__ = ("group_id", "members")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    members: _containers.RepeatedCompositeFieldContainer[MemberIdentity]
    def __init__(self, group_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[MemberIdentity, _Mapping]]] = ...) -> None: ...

class MemberResponse(_message.Message):
    __slots__ = ("member_id", "group_instance_id", "error_code", "error_message")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    group_instance_id: str
    error_code: int
    error_message: str
    def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class LeaveGroupResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "members")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    members: _containers.RepeatedCompositeFieldContainer[MemberResponse]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., members: _Optional[_Iterable[_Union[MemberResponse, _Mapping]]] = ...) -> None: ...

class OffsetCommitRequestPartition(_message.Message):
    __slots__ = ("partition_index", "committed_offset", "committed_leader_epoch", "committed_metadata")
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_METADATA_FIELD_NUMBER: _ClassVar[int]
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    committed_metadata: str
    def __init__(self, partition_index: _Optional[int] = ..., committed_offset: _Optional[int] = ..., committed_leader_epoch: _Optional[int] = ..., committed_metadata: _Optional[str] = ...) -> None: ...

class OffsetCommitRequestTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetCommitRequestPartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetCommitRequestPartition, _Mapping]]] = ...) -> None: ...

class OffsetCommitRequest(_message.Message):
    __slots__ = ("group_id", "generation_id_or_member_epoch", "member_id", "group_instance_id", "topics")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_OR_MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id_or_member_epoch: int
    member_id: str
    group_instance_id: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetCommitRequestTopic]
    def __init__(self, group_id: _Optional[str] = ..., generation_id_or_member_epoch: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetCommitRequestTopic, _Mapping]]] = ...) -> None: ...

class OffsetCommitResponsePartition(_message.Message):
    __slots__ = ("partition_index", "error_code", "error_message")
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    partition_index: int
    error_code: int
    error_message: str
    def __init__(self, partition_index: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class OffsetCommitResponseTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetCommitResponsePartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetCommitResponsePartition, _Mapping]]] = ...) -> None: ...

class OffsetCommitResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "topics")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetCommitResponseTopic]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetCommitResponseTopic, _Mapping]]] = ...) -> None: ...

class OffsetFetchRequestTopic(_message.Message):
    __slots__ = ("name", "partition_indexes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_INDEXES_FIELD_NUMBER: _ClassVar[int]
    name: str
    partition_indexes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., partition_indexes: _Optional[_Iterable[int]] = ...) -> None: ...

class OffsetFetchRequestTopics(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[OffsetFetchRequestTopic]
    def __init__(self, topics: _Optional[_Iterable[_Union[OffsetFetchRequestTopic, _Mapping]]] = ...) -> None: ...

class OffsetFetchRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "member_epoch", "topics", "require_stable")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_STABLE_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    member_epoch: int
    topics: OffsetFetchRequestTopics
    require_stable: bool
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., topics: _Optional[_Union[OffsetFetchRequestTopics, _Mapping]] = ..., require_stable: _Optional[bool] = ...) -> None: ...

class OffsetFetchResponsePartition(_message.Message):
    __slots__ = ("partition_index", "committed_offset", "committed_leader_epoch", "metadata", "error_code")
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str
    error_code: int
    def __init__(self, partition_index: _Optional[int] = ..., committed_offset: _Optional[int] = ..., committed_leader_epoch: _Optional[int] = ..., metadata: _Optional[str] = ..., error_code: _Optional[int] = ...) -> None: ...

class OffsetFetchResponseTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetFetchResponsePartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetFetchResponsePartition, _Mapping]]] = ...) -> None: ...

class OffsetFetchResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "topics")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetFetchResponseTopic]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetFetchResponseTopic, _Mapping]]] = ...) -> None: ...

class DescribeGroupsRequest(_message.Message):
    __slots__ = ("group_ids",)
    GROUP_IDS_FIELD_NUMBER: _ClassVar[int]
    group_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, group_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribedMember(_message.Message):
    __slots__ = ("member_id", "instance_id", "rack_id", "member_epoch", "state", "subscribed_topic_names", "subscribed_topic_regex", "assignment", "target_assignment", "partitions_pending_revocation", "client_id", "client_host", "member_metadata", "member_assignment")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_REGEX_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    TARGET_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_PENDING_REVOCATION_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    MEMBER_METADATA_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    instance_id: str
    rack_id: str
    member_epoch: int
    state: str
    subscribed_topic_names: _containers.RepeatedScalarFieldContainer[str]
    subscribed_topic_regex: str
    assignment: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
    target_assignment: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
    partitions_pending_revocation: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes
    def __init__(self, member_id: _Optional[str] = ..., instance_id: _Optional[str] = ..., rack_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., state: _Optional[str] = ..., subscribed_topic_names: _Optional[_Iterable[str]] = ..., subscribed_topic_regex: _Optional[str] = ..., assignment: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ..., target_assignment: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ..., partitions_pending_revocation: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., member_metadata: _Optional[bytes] = ..., member_assignment: _Optional[bytes] = ...) -> None: ...

class DescribedGroup(_message.Message):
    __slots__ = ("error_code", "error_message", "group_id", "group_type", "group_state", "group_epoch", "assignment_epoch", "assignor_name", "protocol_type", "members", "assignment_timestamp_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_TYPE_FIELD_NUMBER: _ClassVar[int]
    GROUP_STATE_FIELD_NUMBER: _ClassVar[int]
    GROUP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ASSIGNOR_NAME_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    group_id: str
    group_type: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    protocol_type: str
    members: _containers.RepeatedCompositeFieldContainer[DescribedMember]
    assignment_timestamp_ms: int
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., group_id: _Optional[str] = ..., group_type: _Optional[str] = ..., group_state: _Optional[str] = ..., group_epoch: _Optional[int] = ..., assignment_epoch: _Optional[int] = ..., assignor_name: _Optional[str] = ..., protocol_type: _Optional[str] = ..., members: _Optional[_Iterable[_Union[DescribedMember, _Mapping]]] = ..., assignment_timestamp_ms: _Optional[int] = ...) -> None: ...

class DescribeGroupsResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[DescribedGroup]
    def __init__(self, groups: _Optional[_Iterable[_Union[DescribedGroup, _Mapping]]] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ("states_filter", "types_filter")
    STATES_FILTER_FIELD_NUMBER: _ClassVar[int]
    TYPES_FILTER_FIELD_NUMBER: _ClassVar[int]
    states_filter: _containers.RepeatedScalarFieldContainer[str]
    types_filter: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, states_filter: _Optional[_Iterable[str]] = ..., types_filter: _Optional[_Iterable[str]] = ...) -> None: ...

class ListedGroup(_message.Message):
    __slots__ = ("group_id", "protocol_type", "group_state", "group_type")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    GROUP_STATE_FIELD_NUMBER: _ClassVar[int]
    GROUP_TYPE_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str
    def __init__(self, group_id: _Optional[str] = ..., protocol_type: _Optional[str] = ..., group_state: _Optional[str] = ..., group_type: _Optional[str] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "groups")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    groups: _containers.RepeatedCompositeFieldContainer[ListedGroup]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., groups: _Optional[_Iterable[_Union[ListedGroup, _Mapping]]] = ...) -> None: ...

class DeleteGroupsRequest(_message.Message):
    __slots__ = ("group_ids",)
    GROUP_IDS_FIELD_NUMBER: _ClassVar[int]
    group_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, group_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DeletableGroupResult(_message.Message):
    __slots__ = ("group_id", "error_code", "error_message")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    error_code: int
    error_message: str
    def __init__(self, group_id: _Optional[str] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class DeleteGroupsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[DeletableGroupResult]
    def __init__(self, results: _Optional[_Iterable[_Union[DeletableGroupResult, _Mapping]]] = ...) -> None: ...

class OffsetDeleteRequestTopic(_message.Message):
    __slots__ = ("name", "partition_indexes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_INDEXES_FIELD_NUMBER: _ClassVar[int]
    name: str
    partition_indexes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., partition_indexes: _Optional[_Iterable[int]] = ...) -> None: ...

class OffsetDeleteRequest(_message.Message):
    __slots__ = ("group_id", "topics")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetDeleteRequestTopic]
    def __init__(self, group_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetDeleteRequestTopic, _Mapping]]] = ...) -> None: ...

class OffsetDeleteResponsePartition(_message.Message):
    __slots__ = ("partition_index", "error_code", "error_message")
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    partition_index: int
    error_code: int
    error_message: str
    def __init__(self, partition_index: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class OffsetDeleteResponseTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetDeleteResponsePartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetDeleteResponsePartition, _Mapping]]] = ...) -> None: ...

class OffsetDeleteResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "topics")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetDeleteResponseTopic]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetDeleteResponseTopic, _Mapping]]] = ...) -> None: ...

class ConfigEntry(_message.Message):
    __slots__ = ("name", "value", "is_default")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    is_default: bool
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., is_default: _Optional[bool] = ...) -> None: ...

class DescribeGroupConfigsRequest(_message.Message):
    __slots__ = ("group_ids",)
    GROUP_IDS_FIELD_NUMBER: _ClassVar[int]
    group_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, group_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribedGroupConfig(_message.Message):
    __slots__ = ("group_id", "error_code", "error_message", "configs")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    error_code: int
    error_message: str
    configs: _containers.RepeatedCompositeFieldContainer[ConfigEntry]
    def __init__(self, group_id: _Optional[str] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[ConfigEntry, _Mapping]]] = ...) -> None: ...

class DescribeGroupConfigsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[DescribedGroupConfig]
    def __init__(self, results: _Optional[_Iterable[_Union[DescribedGroupConfig, _Mapping]]] = ...) -> None: ...

class AlterableConfig(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class AlterGroupConfigsRequest(_message.Message):
    __slots__ = ("group_id", "configs", "validate_only")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    configs: _containers.RepeatedCompositeFieldContainer[AlterableConfig]
    validate_only: bool
    def __init__(self, group_id: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[AlterableConfig, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterGroupConfigsResponse(_message.Message):
    __slots__ = ("error_code", "error_message")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class FindCoordinatorRequest(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, keys: _Optional[_Iterable[str]] = ...) -> None: ...

class Coordinator(_message.Message):
    __slots__ = ("key", "host", "port", "error_code", "error_message", "node_id")
    KEY_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    key: str
    host: str
    port: int
    error_code: int
    error_message: str
    node_id: int
    def __init__(self, key: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., node_id: _Optional[int] = ...) -> None: ...

class FindCoordinatorResponse(_message.Message):
    __slots__ = ("coordinators",)
    COORDINATORS_FIELD_NUMBER: _ClassVar[int]
    coordinators: _containers.RepeatedCompositeFieldContainer[Coordinator]
    def __init__(self, coordinators: _Optional[_Iterable[_Union[Coordinator, _Mapping]]] = ...) -> None: ...
