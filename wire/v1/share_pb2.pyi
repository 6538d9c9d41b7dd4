from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TopicNames(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

class ShareTopicPartitions(_message.Message):
    __slots__ = ("topic_id", "partitions", "topic_name")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    topic_name: str
    def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ..., topic_name: _Optional[str] = ...) -> None: ...

class ShareGroupHeartbeatRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "member_epoch", "rack_id", "subscribed_topic_names", "client_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str
    subscribed_topic_names: TopicNames
    client_id: str
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., rack_id: _Optional[str] = ..., subscribed_topic_names: _Optional[_Union[TopicNames, _Mapping]] = ..., client_id: _Optional[str] = ...) -> None: ...

class ShareGroupHeartbeatResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "member_id", "member_epoch", "heartbeat_interval_ms", "has_assignment", "assignment")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    HAS_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    has_assignment: bool
    assignment: _containers.RepeatedCompositeFieldContainer[ShareTopicPartitions]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., has_assignment: _Optional[bool] = ..., assignment: _Optional[_Iterable[_Union[ShareTopicPartitions, _Mapping]]] = ...) -> None: ...

class AcquirePartition(_message.Message):
    __slots__ = ("topic_id", "partition", "log_start_offset", "log_end_offset")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partition: int
    log_start_offset: int
    log_end_offset: int
    def __init__(self, topic_id: _Optional[str] = ..., partition: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., log_end_offset: _Optional[int] = ...) -> None: ...

class ShareAcquireRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "partitions", "max_records")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_RECORDS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[AcquirePartition]
    max_records: int
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AcquirePartition, _Mapping]]] = ..., max_records: _Optional[int] = ...) -> None: ...

class AcquiredRecords(_message.Message):
    __slots__ = ("first_offset", "last_offset", "delivery_count")
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_COUNT_FIELD_NUMBER: _ClassVar[int]
    first_offset: int
    last_offset: int
    delivery_count: int
    def __init__(self, first_offset: _Optional[int] = ..., last_offset: _Optional[int] = ..., delivery_count: _Optional[int] = ...) -> None: ...

class AcquiredPartition(_message.Message):
    __slots__ = ("topic_id", "partition", "error_code", "error_message", "acquired_records", "lock_deadline_ms", "start_offset")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACQUIRED_RECORDS_FIELD_NUMBER: _ClassVar[int]
    LOCK_DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partition: int
    error_code: int
    error_message: str
    acquired_records: _containers.RepeatedCompositeFieldContainer[AcquiredRecords]
    lock_deadline_ms: int
    start_offset: int
    def __init__(self, topic_id: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., acquired_records: _Optional[_Iterable[_Union[AcquiredRecords, _Mapping]]] = ..., lock_deadline_ms: _Optional[int] = ..., start_offset: _Optional[int] = ...) -> None: ...

class ShareAcquireResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "partitions", "record_lock_duration_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    RECORD_LOCK_DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    partitions: _containers.RepeatedCompositeFieldContainer[AcquiredPartition]
    record_lock_duration_ms: int
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AcquiredPartition, _Mapping]]] = ..., record_lock_duration_ms: _Optional[int] = ...) -> None: ...

class AcknowledgementBatch(_message.Message):
    __slots__ = ("topic_id", "partition", "first_offset", "last_offset", "acknowledge_type")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ACKNOWLEDGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partition: int
    first_offset: int
    last_offset: int
    acknowledge_type: int
    def __init__(self, topic_id: _Optional[str] = ..., partition: _Optional[int] = ..., first_offset: _Optional[int] = ..., last_offset: _Optional[int] = ..., acknowledge_type: _Optional[int] = ...) -> None: ...

class ShareAcknowledgeRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "batches")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    batches: _containers.RepeatedCompositeFieldContainer[AcknowledgementBatch]
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., batches: _Optional[_Iterable[_Union[AcknowledgementBatch, _Mapping]]] = ...) -> None: ...

class AcknowledgementResult(_message.Message):
    __slots__ = ("topic_id", "partition", "first_offset", "last_offset", "error_code", "error_message")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partition: int
    first_offset: int
    last_offset: int
    error_code: int
    error_message: str
    def __init__(self, topic_id: _Optional[str] = ..., partition: _Optional[int] = ..., first_offset: _Optional[int] = ..., last_offset: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class ShareAcknowledgeResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "results")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    results: _containers.RepeatedCompositeFieldContainer[AcknowledgementResult]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., results: _Optional[_Iterable[_Union[AcknowledgementResult, _Mapping]]] = ...) -> None: ...

class DescribeShareGroupOffsetsRequest(_message.Message):
    __slots__ = ("group_id",)
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    def __init__(self, group_id: _Optional[str] = ...) -> None: ...

class SharePartitionOffsets(_message.Message):
    __slots__ = ("topic_id", "topic_name", "partition", "start_offset", "end_offset", "in_flight", "acquired", "available")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    ACQUIRED_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    topic_name: str
    partition: int
    start_offset: int
    end_offset: int
    in_flight: int
    acquired: int
    available: int
    def __init__(self, topic_id: _Optional[str] = ..., topic_name: _Optional[str] = ..., partition: _Optional[int] = ..., start_offset: _Optional[int] = ..., end_offset: _Optional[int] = ..., in_flight: _Optional[int] = ..., acquired: _Optional[int] = ..., available: _Optional[int] = ...) -> None: ...

class DescribeShareGroupOffsetsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "partitions")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    partitions: _containers.RepeatedCompositeFieldContainer[SharePartitionOffsets]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[SharePartitionOffsets, _Mapping]]] = ...) -> None: ...
