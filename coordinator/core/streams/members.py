"""A streams member's metadata record from its heartbeat, the member fields the assignor reads (a change to them
bumps the group epoch), the member changes that call for a new assignment beyond those inputs, and a member's
target tasks as the assignor and reconciliation read them. Kept apart from `streams/group.py`, which decides
when to bump, assign and reconcile: these only say what of a member counts."""

from __future__ import annotations

from dataclasses import replace

from groupcoord.assignors.sticky_task import TaskId
from groupcoord.coordinator.core.streams.messages import StreamsHeartbeatRequest
from groupcoord.coordinator.core.streams.records import (
    NO_TASKS,
    StreamsGroupCurrentMemberAssignment,
    StreamsGroupMemberMetadata,
    Tasks,
)
from groupcoord.coordinator.core.streams.state import StreamsGroup


def member_metadata(
    group_id: str, topology_epoch: int, req: StreamsHeartbeatRequest, old: StreamsGroupMemberMetadata | None
) -> StreamsGroupMemberMetadata:
    """The member's record after this heartbeat: a null field keeps the old value (Kafka's "unchanged")."""
    if old is None:
        return StreamsGroupMemberMetadata(
            group_id, req.member_id, req.process_id or "", req.instance_id, req.rack_id,
            req.client_id, req.client_host, req.user_endpoint, req.client_tags or (),
            req.rebalance_timeout_ms, topology_epoch, dict(req.task_offsets or {}),
            dict(req.task_end_offsets or {}), req.principal)
    new = old
    if req.process_id is not None and req.process_id != old.process_id:
        new = replace(new, process_id=req.process_id)
    if req.rack_id is not None and req.rack_id != old.rack_id:
        new = replace(new, rack_id=req.rack_id)
    if req.user_endpoint is not None and req.user_endpoint != old.user_endpoint:
        new = replace(new, user_endpoint=req.user_endpoint)
    if req.client_tags is not None and req.client_tags != old.client_tags:
        new = replace(new, client_tags=req.client_tags)
    if req.rebalance_timeout_ms > 0 and req.rebalance_timeout_ms != old.rebalance_timeout_ms:
        new = replace(new, rebalance_timeout_ms=req.rebalance_timeout_ms)
    if req.member_epoch == 0 and topology_epoch != old.topology_epoch:
        new = replace(new, topology_epoch=topology_epoch)
    if req.task_offsets is not None and req.task_offsets != old.task_offsets:
        new = replace(new, task_offsets=dict(req.task_offsets))
    if req.task_end_offsets is not None and req.task_end_offsets != old.task_end_offsets:
        new = replace(new, task_end_offsets=dict(req.task_end_offsets))
    return new


def warmup_caught_up(
    cur: StreamsGroupCurrentMemberAssignment | None, old: StreamsGroupMemberMetadata,
    new: StreamsGroupMemberMetadata, acceptable_recovery_lag: int,
) -> bool:
    """A warm-up task that just caught up calls for a new assignment (it can take over the active)."""
    if cur is None:
        return False

    def caught(m: StreamsGroupMemberMetadata, t: TaskId) -> bool:
        off, end = m.task_offsets.get(t), m.task_end_offsets.get(t)
        return off is not None and end is not None and end - off <= acceptable_recovery_lag

    return any(caught(new, t) and not caught(old, t) for t in cur.warmup)


def target_tasks(g: StreamsGroup, member_id: str) -> tuple[Tasks, Tasks, Tasks]:
    """The member's target (active, standby, warm-up); none before the first computation (target epoch 0)."""
    t = g.target.get(member_id)
    if t is None or g.target_assignment_epoch == 0:
        return NO_TASKS, NO_TASKS, NO_TASKS
    return t.active, t.standby, t.warmup


def assignment_inputs(m: StreamsGroupMemberMetadata) -> tuple[object, ...]:
    """What the assignor reads of a member: a change here bumps the group epoch."""
    return (m.process_id, m.rack_id, m.client_tags, m.topology_epoch)
