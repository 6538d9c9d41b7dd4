from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StreamsKeyValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class StreamsTopicInfo(_message.Message):
    __slots__ = ("name", "partitions", "replication_factor", "topic_configs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    TOPIC_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: int
    replication_factor: int
    topic_configs: _containers.RepeatedCompositeFieldContainer[StreamsKeyValue]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., topic_configs: _Optional[_Iterable[_Union[StreamsKeyValue, _Mapping]]] = ...) -> None: ...

class StreamsCopartitionGroup(_message.Message):
    __slots__ = ("source_topics", "source_topic_regex", "repartition_source_topics")
    SOURCE_TOPICS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TOPIC_REGEX_FIELD_NUMBER: _ClassVar[int]
    REPARTITION_SOURCE_TOPICS_FIELD_NUMBER: _ClassVar[int]
    source_topics: _containers.RepeatedScalarFieldContainer[int]
    source_topic_regex: _containers.RepeatedScalarFieldContainer[int]
    repartition_source_topics: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, source_topics: _Optional[_Iterable[int]] = ..., source_topic_regex: _Optional[_Iterable[int]] = ..., repartition_source_topics: _Optional[_Iterable[int]] = ...) -> None: ...

class StreamsSubtopology(_message.Message):
    __slots__ = ("subtopology_id", "source_topics", "source_topic_regex", "state_changelog_topics", "repartition_sink_topics", "repartition_source_topics", "copartition_groups")
    SUBTOPOLOGY_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TOPICS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TOPIC_REGEX_FIELD_NUMBER: _ClassVar[int]
    STATE_CHANGELOG_TOPICS_FIELD_NUMBER: _ClassVar[int]
    REPARTITION_SINK_TOPICS_FIELD_NUMBER: _ClassVar[int]
    REPARTITION_SOURCE_TOPICS_FIELD_NUMBER: _ClassVar[int]
    COPARTITION_GROUPS_FIELD_NUMBER: _ClassVar[int]
    subtopology_id: str
    source_topics: _containers.RepeatedScalarFieldContainer[str]
    source_topic_regex: _containers.RepeatedScalarFieldContainer[str]
    state_changelog_topics: _containers.RepeatedCompositeFieldContainer[StreamsTopicInfo]
    repartition_sink_topics: _containers.RepeatedScalarFieldContainer[str]
    repartition_source_topics: _containers.RepeatedCompositeFieldContainer[StreamsTopicInfo]
    copartition_groups: _containers.RepeatedCompositeFieldContainer[StreamsCopartitionGroup]
    def __init__(self, subtopology_id: _Optional[str] = ..., source_topics: _Optional[_Iterable[str]] = ..., source_topic_regex: _Optional[_Iterable[str]] = ..., state_changelog_topics: _Optional[_Iterable[_Union[StreamsTopicInfo, _Mapping]]] = ..., repartition_sink_topics: _Optional[_Iterable[str]] = ..., repartition_source_topics: _Optional[_Iterable[_Union[StreamsTopicInfo, _Mapping]]] = ..., copartition_groups: _Optional[_Iterable[_Union[StreamsCopartitionGroup, _Mapping]]] = ...) -> None: ...

class StreamsTopology(_message.Message):
    __slots__ = ("epoch", "subtopologies")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SUBTOPOLOGIES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    subtopologies: _containers.RepeatedCompositeFieldContainer[StreamsSubtopology]
    def __init__(self, epoch: _Optional[int] = ..., subtopologies: _Optional[_Iterable[_Union[StreamsSubtopology, _Mapping]]] = ...) -> None: ...

class StreamsTaskIds(_message.Message):
    __slots__ = ("subtopology_id", "partitions")
    SUBTOPOLOGY_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    subtopology_id: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, subtopology_id: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class StreamsTaskIdList(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[StreamsTaskIds]
    def __init__(self, tasks: _Optional[_Iterable[_Union[StreamsTaskIds, _Mapping]]] = ...) -> None: ...

class StreamsEndpoint(_message.Message):
    __slots__ = ("host", "port")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    host: str
    port: int
    def __init__(self, host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class StreamsTaskOffset(_message.Message):
    __slots__ = ("subtopology_id", "partition", "offset")
    SUBTOPOLOGY_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    subtopology_id: str
    partition: int
    offset: int
    def __init__(self, subtopology_id: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class StreamsTaskOffsetList(_message.Message):
    __slots__ = ("offsets",)
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    offsets: _containers.RepeatedCompositeFieldContainer[StreamsTaskOffset]
    def __init__(self, offsets: _Optional[_Iterable[_Union[StreamsTaskOffset, _Mapping]]] = ...) -> None: ...

class StreamsKeyValueList(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[StreamsKeyValue]
    def __init__(self, items: _Optional[_Iterable[_Union[StreamsKeyValue, _Mapping]]] = ...) -> None: ...

class StreamsGroupHeartbeatRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "member_epoch", "endpoint_information_epoch", "instance_id", "rack_id", "rebalance_timeout_ms", "topology", "active_tasks", "standby_tasks", "warmup_tasks", "process_id", "user_endpoint", "client_tags", "task_offsets", "task_end_offsets", "shutdown_application", "client_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_INFORMATION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_TASKS_FIELD_NUMBER: _ClassVar[int]
    STANDBY_TASKS_FIELD_NUMBER: _ClassVar[int]
    WARMUP_TASKS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TAGS_FIELD_NUMBER: _ClassVar[int]
    TASK_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    TASK_END_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    SHUTDOWN_APPLICATION_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int
    instance_id: str
    rack_id: str
    rebalance_timeout_ms: int
    topology: StreamsTopology
    active_tasks: StreamsTaskIdList
    standby_tasks: StreamsTaskIdList
    warmup_tasks: StreamsTaskIdList
    process_id: str
    user_endpoint: StreamsEndpoint
    client_tags: StreamsKeyValueList
    task_offsets: StreamsTaskOffsetList
    task_end_offsets: StreamsTaskOffsetList
    shutdown_application: bool
    client_id: str
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., endpoint_information_epoch: _Optional[int] = ..., instance_id: _Optional[str] = ..., rack_id: _Optional[str] = ..., rebalance_timeout_ms: _Optional[int] = ..., topology: _Optional[_Union[StreamsTopology, _Mapping]] = ..., active_tasks: _Optional[_Union[StreamsTaskIdList, _Mapping]] = ..., standby_tasks: _Optional[_Union[StreamsTaskIdList, _Mapping]] = ..., warmup_tasks: _Optional[_Union[StreamsTaskIdList, _Mapping]] = ..., process_id: _Optional[str] = ..., user_endpoint: _Optional[_Union[StreamsEndpoint, _Mapping]] = ..., client_tags: _Optional[_Union[StreamsKeyValueList, _Mapping]] = ..., task_offsets: _Optional[_Union[StreamsTaskOffsetList, _Mapping]] = ..., task_end_offsets: _Optional[_Union[StreamsTaskOffsetList, _Mapping]] = ..., shutdown_application: _Optional[bool] = ..., client_id: _Optional[str] = ...) -> None: ...

class StreamsStatus(_message.Message):
    __slots__ = ("status_code", "status_detail")
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    STATUS_DETAIL_FIELD_NUMBER: _ClassVar[int]
    status_code: int
    status_detail: str
    def __init__(self, status_code: _Optional[int] = ..., status_detail: _Optional[str] = ...) -> None: ...

class StreamsStatusList(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[StreamsStatus]
    def __init__(self, items: _Optional[_Iterable[_Union[StreamsStatus, _Mapping]]] = ...) -> None: ...

class StreamsGroupHeartbeatResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "error_code", "error_message", "member_id", "member_epoch", "heartbeat_interval_ms", "acceptable_recovery_lag", "task_offset_interval_ms", "status", "active_tasks", "standby_tasks", "warmup_tasks", "partitions_by_user_endpoint", "endpoint_information_epoch")
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTABLE_RECOVERY_LAG_FIELD_NUMBER: _ClassVar[int]
    TASK_OFFSET_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_TASKS_FIELD_NUMBER: _ClassVar[int]
    STANDBY_TASKS_FIELD_NUMBER: _ClassVar[int]
    WARMUP_TASKS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_BY_USER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_INFORMATION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    error_code: int
    error_message: str
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    acceptable_recovery_lag: int
    task_offset_interval_ms: int
    status: StreamsStatusList
    active_tasks: StreamsTaskIdList
    standby_tasks: StreamsTaskIdList
    warmup_tasks: StreamsTaskIdList
    partitions_by_user_endpoint: StreamsEndpointToPartitionsList
    endpoint_information_epoch: int
    def __init__(self, throttle_time_ms: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., acceptable_recovery_lag: _Optional[int] = ..., task_offset_interval_ms: _Optional[int] = ..., status: _Optional[_Union[StreamsStatusList, _Mapping]] = ..., active_tasks: _Optional[_Union[StreamsTaskIdList, _Mapping]] = ..., standby_tasks: _Optional[_Union[StreamsTaskIdList, _Mapping]] = ..., warmup_tasks: _Optional[_Union[StreamsTaskIdList, _Mapping]] = ..., partitions_by_user_endpoint: _Optional[_Union[StreamsEndpointToPartitionsList, _Mapping]] = ..., endpoint_information_epoch: _Optional[int] = ...) -> None: ...

class StreamsTopicPartitions(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class StreamsEndpointToPartitions(_message.Message):
    __slots__ = ("user_endpoint", "active_partitions", "standby_partitions")
    USER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    STANDBY_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    user_endpoint: StreamsEndpoint
    active_partitions: _containers.RepeatedCompositeFieldContainer[StreamsTopicPartitions]
    standby_partitions: _containers.RepeatedCompositeFieldContainer[StreamsTopicPartitions]
    def __init__(self, user_endpoint: _Optional[_Union[StreamsEndpoint, _Mapping]] = ..., active_partitions: _Optional[_Iterable[_Union[StreamsTopicPartitions, _Mapping]]] = ..., standby_partitions: _Optional[_Iterable[_Union[StreamsTopicPartitions, _Mapping]]] = ...) -> None: ...

class StreamsEndpointToPartitionsList(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[StreamsEndpointToPartitions]
    def __init__(self, items: _Optional[_Iterable[_Union[StreamsEndpointToPartitions, _Mapping]]] = ...) -> None: ...

class StreamsGroupDescribeRequest(_message.Message):
    __slots__ = ("group_ids",)
    GROUP_IDS_FIELD_NUMBER: _ClassVar[int]
    group_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, group_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class StreamsDescribedMember(_message.Message):
    __slots__ = ("member_id", "member_epoch", "instance_id", "rack_id", "client_id", "client_host", "topology_epoch", "process_id", "user_endpoint", "client_tags", "task_offsets", "task_end_offsets", "active_tasks", "standby_tasks", "warmup_tasks", "target_active_tasks", "target_standby_tasks", "target_warmup_tasks")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TAGS_FIELD_NUMBER: _ClassVar[int]
    TASK_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    TASK_END_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_TASKS_FIELD_NUMBER: _ClassVar[int]
    STANDBY_TASKS_FIELD_NUMBER: _ClassVar[int]
    WARMUP_TASKS_FIELD_NUMBER: _ClassVar[int]
    TARGET_ACTIVE_TASKS_FIELD_NUMBER: _ClassVar[int]
    TARGET_STANDBY_TASKS_FIELD_NUMBER: _ClassVar[int]
    TARGET_WARMUP_TASKS_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    member_epoch: int
    instance_id: str
    rack_id: str
    client_id: str
    client_host: str
    topology_epoch: int
    process_id: str
    user_endpoint: StreamsEndpoint
    client_tags: _containers.RepeatedCompositeFieldContainer[StreamsKeyValue]
    task_offsets: _containers.RepeatedCompositeFieldContainer[StreamsTaskOffset]
    task_end_offsets: _containers.RepeatedCompositeFieldContainer[StreamsTaskOffset]
    active_tasks: _containers.RepeatedCompositeFieldContainer[StreamsTaskIds]
    standby_tasks: _containers.RepeatedCompositeFieldContainer[StreamsTaskIds]
    warmup_tasks: _containers.RepeatedCompositeFieldContainer[StreamsTaskIds]
    target_active_tasks: _containers.RepeatedCompositeFieldContainer[StreamsTaskIds]
    target_standby_tasks: _containers.RepeatedCompositeFieldContainer[StreamsTaskIds]
    target_warmup_tasks: _containers.RepeatedCompositeFieldContainer[StreamsTaskIds]
    def __init__(self, member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., instance_id: _Optional[str] = ..., rack_id: _Optional[str] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., topology_epoch: _Optional[int] = ..., process_id: _Optional[str] = ..., user_endpoint: _Optional[_Union[StreamsEndpoint, _Mapping]] = ..., client_tags: _Optional[_Iterable[_Union[StreamsKeyValue, _Mapping]]] = ..., task_offsets: _Optional[_Iterable[_Union[StreamsTaskOffset, _Mapping]]] = ..., task_end_offsets: _Optional[_Iterable[_Union[StreamsTaskOffset, _Mapping]]] = ..., active_tasks: _Optional[_Iterable[_Union[StreamsTaskIds, _Mapping]]] = ..., standby_tasks: _Optional[_Iterable[_Union[StreamsTaskIds, _Mapping]]] = ..., warmup_tasks: _Optional[_Iterable[_Union[StreamsTaskIds, _Mapping]]] = ..., target_active_tasks: _Optional[_Iterable[_Union[StreamsTaskIds, _Mapping]]] = ..., target_standby_tasks: _Optional[_Iterable[_Union[StreamsTaskIds, _Mapping]]] = ..., target_warmup_tasks: _Optional[_Iterable[_Union[StreamsTaskIds, _Mapping]]] = ...) -> None: ...

class StreamsDescribedGroup(_message.Message):
    __slots__ = ("error_code", "error_message", "group_id", "group_state", "group_epoch", "assignment_epoch", "topology", "members")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_STATE_FIELD_NUMBER: _ClassVar[int]
    GROUP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    topology: StreamsTopology
    members: _containers.RepeatedCompositeFieldContainer[StreamsDescribedMember]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., group_id: _Optional[str] = ..., group_state: _Optional[str] = ..., group_epoch: _Optional[int] = ..., assignment_epoch: _Optional[int] = ..., topology: _Optional[_Union[StreamsTopology, _Mapping]] = ..., members: _Optional[_Iterable[_Union[StreamsDescribedMember, _Mapping]]] = ...) -> None: ...

class StreamsGroupDescribeResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[StreamsDescribedGroup]
    def __init__(self, groups: _Optional[_Iterable[_Union[StreamsDescribedGroup, _Mapping]]] = ...) -> None: ...
