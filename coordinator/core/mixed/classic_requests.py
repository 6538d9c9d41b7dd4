"""The classic protocol's four requests, routed: a consumer group with members takes them itself as a mixed group
(Kafka 4.x, `mixed/group.py`); any other group id goes to the classic group's handlers (`classic/handlers.py`).

This routing sits here, above both types, so that neither the classic nor the consumer package imports the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from groupcoord.coordinator.core.classic import handlers as classic_handlers
from groupcoord.coordinator.core.classic import messages as cm
from groupcoord.coordinator.core.mixed import group as mixed_group
from groupcoord.coordinator.core.results import Result

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard


def _mixed_join(shard: GroupCoordinatorShard, request: cm.JoinGroupRequest,
                now: int) -> Result[cm.JoinGroupResponse | None] | None:
    group = shard.groups.get(request.group_id)
    return mixed_group.join(shard, group, request, now) if mixed_group.takes_classic_requests(group) else None


def join(shard: GroupCoordinatorShard, request: cm.JoinGroupRequest, now: int,
         token: int) -> Result[cm.JoinGroupResponse | None]:
    """Every JoinGroup is validated first (`classic_handlers.join_group`), then offered to a mixed group."""
    return classic_handlers.join_group(shard, request, now, token, _mixed_join)


def sync(shard: GroupCoordinatorShard, request: cm.SyncGroupRequest, now: int,
         token: int) -> Result[cm.SyncGroupResponse | None]:
    group = shard.groups.get(request.group_id)
    if mixed_group.takes_classic_requests(group):
        return mixed_group.sync(shard, group, request, now)
    return classic_handlers.sync_group(shard, request, now, token)


def heartbeat(shard: GroupCoordinatorShard, request: cm.HeartbeatRequest, now: int) -> Result[cm.HeartbeatResponse]:
    group = shard.groups.get(request.group_id)
    if mixed_group.takes_classic_requests(group):
        return mixed_group.heartbeat(shard, group, request, now)
    return classic_handlers.heartbeat(shard, request, now)


def leave(shard: GroupCoordinatorShard, request: cm.LeaveGroupRequest, now: int) -> Result[cm.LeaveGroupResponse]:
    """A LeaveGroup naming no member is refused by the classic handler whatever the group's type."""
    group = shard.groups.get(request.group_id)
    if request.members and mixed_group.takes_classic_requests(group):
        return mixed_group.leave(shard, group, request, now)
    return classic_handlers.leave_group(shard, request, now)
