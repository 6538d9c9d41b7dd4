"""Static membership for streams groups: a member with an instance id (Kafka Streams' `group.instance.id`)
outlives its member id, as Kafka's streamsGroupHeartbeat runs it (getOrMaybeCreateStaticStreamsGroupMember,
streamsGroupStaticMemberGroupLeave), with the rules KIP-345 gave consumer groups:

- A join (epoch 0) naming an instance id no member holds is a new member.
- A join naming an instance id whose member left with epoch -2 *replaces* that member: the old member id's
  records go (no timers are cancelled: they find no member and do nothing), the new member id gets the old
  one's target and current tasks at epoch 0, so it reconciles straight back to the same tasks, and the group
  epoch moves only if what the assignor reads of the member (process, rack, tags) changed.
- A join naming an instance id held by a member that has not left is UNRELEASED_INSTANCE_ID.
- A heartbeat (epoch > 0 or a leave) naming an instance id held by another member id is FENCED_INSTANCE_ID;
  naming one no member holds is UNKNOWN_MEMBER_ID.
- A leave with epoch -2 keeps the member, its target and its tasks, at member epoch -2 with nothing pending
  revocation: no rebalance. Its session timer keeps running; if the instance does not come back within the
  session timeout, the member is removed like any other and its tasks move.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.limits import ECHO_MAX_CHARS
from groupcoord.coordinator.core.streams.messages import StreamsHeartbeatRequest
from groupcoord.coordinator.core.streams.records import (
    MEMBER_TOMBSTONES,
    NO_TASKS,
    StreamsGroupCurrentMemberAssignment,
    StreamsGroupTargetAssignmentMember,
    Tasks,
)

if TYPE_CHECKING:
    from groupcoord.coordinator.core.streams.group import StreamsGroup

LEAVE_STATIC_EPOCH = -2


def _ids(s: str) -> str:
    return s[:ECHO_MAX_CHARS]


def static_member(g: StreamsGroup | None, req: StreamsHeartbeatRequest) -> str | None:
    """Check the request's instance id against the group (before any record is written). For a join, the
    member id it replaces (a member that left with epoch -2), else None."""
    if req.instance_id is None or g is None:
        return None
    holder = g.static_members.get(req.instance_id)
    inst, mid = _ids(req.instance_id), _ids(req.member_id)
    if req.member_epoch == 0:
        if holder is None:
            return None
        if g.current[holder].member_epoch != LEAVE_STATIC_EPOCH:
            raise CoordinatorError(Errors.UNRELEASED_INSTANCE_ID,
                                   f"Static member {mid} with instance id {inst} cannot join the group because the "
                                   f"instance id is owned by {_ids(holder)} member.")
        return holder
    if holder is None:
        raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {inst} is unknown.")
    if holder != req.member_id:
        raise CoordinatorError(Errors.FENCED_INSTANCE_ID,
                               f"Static member {mid} with instance id {inst} was fenced by member {_ids(holder)}.")
    return None


def replace_member(g: StreamsGroup, old_id: str, new_id: str, emit: Callable[[object], None]) -> None:
    """The records that move a released static member's tasks to the member id that now holds its instance
    (Kafka's replaceMember); the new member's metadata record follows from the heartbeat."""
    gid = g.group_id
    old_cur = g.current[old_id]
    old_target = g.target.get(old_id)
    if new_id != old_id and new_id in g.members:
        MEMBER_TOMBSTONES.remove(emit, gid, new_id, new_id in g.target)  # the new id was another member's
    MEMBER_TOMBSTONES.remove(emit, gid, old_id, old_id in g.target)
    if old_target is not None:
        emit(StreamsGroupTargetAssignmentMember(gid, new_id, old_target.active, old_target.standby,
                                                old_target.warmup))
    emit(StreamsGroupCurrentMemberAssignment(gid, new_id, 0, 0, "STABLE", old_cur.active, old_cur.standby,
                                             old_cur.warmup, NO_TASKS))


def static_leave(g: StreamsGroup, member_id: str, emit: Callable[[object], None]) -> None:
    """Epoch -2: the member stays with its tasks, at epoch -2, nothing pending revocation (Kafka's
    streamsGroupStaticMemberGroupLeave)."""
    cur = g.current[member_id]
    emit(replace(cur, member_epoch=LEAVE_STATIC_EPOCH, active_pending_revocation=NO_TASKS))


def remap_replaced(
    assignment: Mapping[str, tuple[Tasks, Tasks, Tasks]], instances: Mapping[str, str],
    static_members: Mapping[str, str],
) -> dict[str, tuple[Tasks, Tasks, Tasks]]:
    """An offloaded run's result names the member ids it was started with: a static member replaced since
    then hands its tasks to the member id that holds its instance now."""
    out = dict(assignment)
    for old_id, instance in instances.items():
        new_id = static_members.get(instance)
        if new_id is not None and new_id != old_id and old_id in out:
            out[new_id] = out.pop(old_id)
    return out
