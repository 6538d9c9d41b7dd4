"""The StreamsGroupHeartbeat request and response as the core sees them, and the offloaded assignor run.

Kafka's StreamsGroupHeartbeatRequest/Response fields; None means "null": unchanged since the last heartbeat.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from groupcoord.assignors.sticky_task import StreamsMemberSpec, TaskId, assign_tasks
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.streams.records import Tasks
from groupcoord.coordinator.core.streams.topology import StatusEntry, StreamsTopology, TopicInfo


@dataclass(frozen=True, slots=True)
class StreamsHeartbeatRequest:
    """Kafka's StreamsGroupHeartbeatRequest; None means "unchanged since the last heartbeat"."""

    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: StreamsTopology | None = None
    active_tasks: Tasks | None = None
    standby_tasks: Tasks | None = None
    warmup_tasks: Tasks | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    task_offsets: Mapping[TaskId, int] | None = None
    task_end_offsets: Mapping[TaskId, int] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""
    principal: str | None = None  # the authenticated caller (None: authentication off)


@dataclass(frozen=True, slots=True)
class EndpointPartitions:
    """Interactive queries: the partitions one user endpoint materializes (its members' tasks' inputs)."""

    host: str
    port: int
    active: tuple[tuple[str, tuple[int, ...]], ...]  # (topic, partitions)
    standby: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class StreamsHeartbeatResponse:
    error_code: int = 0
    error_message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    acceptable_recovery_lag: int = 0
    task_offset_interval_ms: int = 0
    status: tuple[StatusEntry, ...] | None = None
    active_tasks: Tasks | None = None
    standby_tasks: Tasks | None = None
    warmup_tasks: Tasks | None = None
    partitions_by_user_endpoint: tuple[EndpointPartitions, ...] | None = None
    endpoint_information_epoch: int = 0


@dataclass(frozen=True, slots=True)
class CreateInternalTopics:
    """A task for the runtime: create these internal topics (Kafka's heartbeat result carries them to
    AutoTopicCreationManager.createStreamsInternalTopics). Sent with every heartbeat while they are missing;
    the runtime skips topics in flight and keeps a failure for `error_ttl_ms` (twice the heartbeat interval)."""

    group_id: str
    topics: tuple[TopicInfo, ...]
    error_ttl_ms: int


@dataclass(frozen=True, slots=True)
class StreamsAssignorRun:
    """An offloaded assignor run: immutable input for the executor (`run()` is the pure computation)."""

    group_id: str
    run_id: int
    assignment_epoch: int
    members: Mapping[str, StreamsMemberSpec]
    subtopologies: Mapping[str, object]
    config: object

    def run(self) -> StreamsAssignorCompletion:
        try:
            result = assign_tasks(self.members, self.subtopologies, self.config)  # type: ignore[arg-type]
        except Exception as e:  # the assignor's failure keeps the old target; never crashes the shard
            return StreamsAssignorCompletion(self.group_id, self.run_id, None, type(e).__name__)
        out = {m: (a.active, a.standby, a.warmup) for m, a in result.items()}
        return StreamsAssignorCompletion(self.group_id, self.run_id, out)


@dataclass(frozen=True, slots=True)
class StreamsAssignorCompletion:
    group_id: str
    run_id: int
    assignment: Mapping[str, tuple[Tasks, Tasks, Tasks]] | None
    error: str | None = None


def validate_request(req: StreamsHeartbeatRequest) -> None:
    """Kafka's throwIfStreamsGroupHeartbeatRequestIsInvalid (INVALID_REQUEST), once, at the edge."""
    bad = Errors.INVALID_REQUEST
    if not req.group_id:
        raise CoordinatorError(bad, "GroupId can't be empty.")
    if not req.member_id:
        raise CoordinatorError(bad, "MemberId can't be empty.")
    if req.instance_id is not None and not req.instance_id.strip():
        raise CoordinatorError(bad, "InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id.strip():
        raise CoordinatorError(bad, "RackId can't be empty.")
    if req.member_epoch == 0:
        if req.topology is None:
            raise CoordinatorError(bad, "Topology must be non-null when joining the group.")
        if not req.process_id:
            raise CoordinatorError(bad, "ProcessId can't be empty.")
        if req.rebalance_timeout_ms <= 0:
            raise CoordinatorError(bad, "RebalanceTimeoutMs must be provided when joining the group.")
        if req.active_tasks is None or req.standby_tasks is None or req.warmup_tasks is None:
            raise CoordinatorError(bad, "Owned tasks must be provided when joining the group.")
    elif req.member_epoch > 0:
        if req.topology is not None:
            raise CoordinatorError(bad, "Topology can only be provided when joining the group.")
    elif req.member_epoch == -2:
        if req.instance_id is None:
            raise CoordinatorError(bad, "InstanceId can't be null.")
    elif req.member_epoch != -1:
        raise CoordinatorError(bad, f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2.")
