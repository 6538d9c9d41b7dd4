"""Plugs streams groups into the shard: their records into replay, their timers into the timer path, and
the one entry point per operation that keeps group ids unique across group types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from coordinator.core import streams_records as sr
from coordinator.core.errors import Errors
from coordinator.core.results import Result
from coordinator.core.streams_config import StreamsGroupConfig
from coordinator.core.streams_group import (
    StreamsAssignorCompletion,
    StreamsGroups,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResponse,
)

if TYPE_CHECKING:
    from coordinator.core.shard import GroupCoordinatorShard

RECORD_TYPES: tuple[type, ...] = (
    sr.StreamsGroupMetadata, sr.StreamsGroupMetadataTombstone, sr.StreamsGroupTopologyRecord,
    sr.StreamsGroupTopologyTombstone, sr.StreamsGroupMemberMetadata, sr.StreamsGroupMemberMetadataTombstone,
    sr.StreamsGroupTargetAssignmentMember, sr.StreamsGroupTargetAssignmentMemberTombstone,
    sr.StreamsGroupTargetAssignmentMetadata, sr.StreamsGroupCurrentMemberAssignment,
    sr.StreamsGroupCurrentMemberAssignmentTombstone,
)
TIMER_KINDS = ("streams-session", "streams-rebalance", "streams-assign")


def install(shard: GroupCoordinatorShard, config: StreamsGroupConfig | None = None) -> StreamsGroups:
    """Give `shard` a `streams` attribute (the streams groups) wired into replay and timers."""
    if config is None:
        values = getattr(shard.config, "values", {})
        config = StreamsGroupConfig.from_broker({k: values[k] for k in StreamsGroupConfig.broker_keys()
                                                 if k in values})
    groups = StreamsGroups(config)
    groups.follow_image(lambda: shard.metadata)
    # The same dict, not a copy: AlterGroupConfigs' records update what the streams groups read.
    groups.follow_group_configs(cast("dict[str, Mapping[str, object]]", shard.group_configs))
    shard.streams = groups
    for t in RECORD_TYPES:
        shard.register_replayer(t, groups.replay)

    def on_timer(key: tuple[str, ...], now: int) -> Result[None]:
        return groups.fire_timer(key, now)

    for kind in TIMER_KINDS:
        shard.register_timer_handler(kind, on_timer)
    return groups


def heartbeat(shard: GroupCoordinatorShard, req: StreamsHeartbeatRequest, now: int) -> Result[StreamsHeartbeatResponse]:
    """A StreamsGroupHeartbeat; a group id taken by a consumer or classic group is GROUP_ID_NOT_FOUND (Kafka:
    "Group X is not a streams group")."""
    if req.group_id in shard.groups:
        return Result(StreamsHeartbeatResponse(int(Errors.GROUP_ID_NOT_FOUND),
                                               "The group is not a streams group.", req.member_id[:64]))
    groups: StreamsGroups = shard.streams
    return groups.heartbeat(req, now)


def assignor_done(shard: GroupCoordinatorShard, done: StreamsAssignorCompletion, now: int) -> Result[None]:
    groups: StreamsGroups = shard.streams
    return groups.complete_assignor(done, now)
