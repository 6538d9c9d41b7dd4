"""Plugs streams groups into the shard: their records and volatile effects into replay, their timers into the
timer path, and the one entry point per operation that keeps group ids unique across group types. Every
operation is pure (group.py): what it returns is applied by `GroupCoordinatorShard.apply`."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from groupcoord.coordinator.core import retention
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.group import CLASSIC, STREAMS, GroupTypeHooks, GroupView, not_this_type
from groupcoord.coordinator.core.limits import ECHO_MAX_CHARS
from groupcoord.coordinator.core.records import GroupEmptySinceTombstone
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.streams import records as sr
from groupcoord.coordinator.core.streams.config import StreamsConfigs
from groupcoord.coordinator.core.streams.group import (
    StreamsAssignorCompletion,
    StreamsGroups,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResponse,
)
from groupcoord.coordinator.core.streams.state import OwnedActive, ShutdownRequested, StreamsGroup

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard

RECORD_TYPES: tuple[type, ...] = (
    sr.StreamsGroupMetadata, sr.StreamsGroupMetadataTombstone, sr.StreamsGroupTopologyRecord,
    sr.StreamsGroupTopologyTombstone, sr.StreamsGroupMemberMetadata, sr.StreamsGroupMemberMetadataTombstone,
    sr.StreamsGroupTargetAssignmentMember, sr.StreamsGroupTargetAssignmentMemberTombstone,
    sr.StreamsGroupTargetAssignmentMetadata, sr.StreamsGroupCurrentMemberAssignment,
    sr.StreamsGroupCurrentMemberAssignmentTombstone,
)
R = TypeVar("R", bound=Result[Any])
EFFECT_TYPES: tuple[type, ...] = (ShutdownRequested, OwnedActive)
TIMER_KINDS = ("streams-session", "streams-rebalance", "streams-assign")


def new_groups(shard: GroupCoordinatorShard) -> StreamsGroups:
    """The operations on the shard's streams groups, kept in its `groups` beside every other type and reading its
    image, group configs, replay, metrics and run ids."""
    groups = StreamsGroups(StreamsConfigs(shard), stats=shard.stats, run_ids=shard._run_ids, store=shard.groups)
    groups.follow_image(lambda: shard.metadata)
    return groups


def hooks(shard: GroupCoordinatorShard) -> GroupTypeHooks:
    """Streams groups' records and timers, for the shard's constructor (after it built `shard.streams`)."""
    groups = shard.streams

    def on_timer(key: tuple[str, ...], now: int) -> Result[None]:
        return note_empty(shard, key[1], now, groups.fire_timer(key, now))  # `apply` notes its timers

    replayers: dict[type, Callable[[Any], None]] = dict.fromkeys(RECORD_TYPES, groups.replay)
    replayers.update(dict.fromkeys(EFFECT_TYPES, groups.apply_effect))  # RunStarted/RunEnded: the shard's own
    return GroupTypeHooks(replayers, dict.fromkeys(TIMER_KINDS, on_timer), {STREAMS: partial(assignor_done, shard)})


def heartbeat(shard: GroupCoordinatorShard, req: StreamsHeartbeatRequest, now: int) -> Result[StreamsHeartbeatResponse]:
    """A StreamsGroupHeartbeat. A group id held by a consumer, share or non-empty classic group is
    GROUP_ID_NOT_FOUND (Kafka's castToStreamsGroup: "Group %s is not a streams group."); a join to an empty
    classic group deletes it first (getOrCreateStreamsGroup -> maybeDeleteEmptyClassicGroup)."""
    groups: StreamsGroups = shard.streams
    other = shard.groups.get(req.group_id)
    if other is None or other.group_type == STREAMS:
        return note_empty(shard, req.group_id, now, groups.heartbeat(req, now))
    if req.member_epoch != 0 or not _is_empty_classic(other):
        return Result(StreamsHeartbeatResponse(int(Errors.GROUP_ID_NOT_FOUND), not_this_type(req.group_id, "streams"),
                                               req.member_id[:ECHO_MAX_CHARS], req.member_epoch))
    tombstones: list[object] = list(other.deletion_records())
    if req.group_id in shard.empty_since:  # streams offsets expire from their commit time, not from this
        tombstones.append(GroupEmptySinceTombstone(req.group_id))
    # The heartbeat reads no classic group (a streams group's view of the shard's groups sees none), so it runs
    # as it would once the tombstones are applied; they are applied before its own records.
    res = groups.heartbeat(req, now)
    if res.response.error_code:  # refused: no record leaves, and the classic group stays
        return res
    return Result(res.response, tombstones + res.records, res.timers, res.tasks, memory=res.memory)


def note_empty(shard: GroupCoordinatorShard, group_id: str, now: int, result: R) -> R:
    """A streams group left empty arms the offset retention check, which deletes it once its offsets have
    expired (Kafka's periodic cleanupGroupMetadata -> maybeDeleteGroup). No GroupEmptySince is written:
    streams offsets expire from their commit time."""
    if members_after(shard.streams.groups.get(group_id), group_id, result.records) == 0:
        retention.ensure_timer(shard, now, result)
    return result


def members_after(group: StreamsGroup | None, group_id: str, records: list[Any]) -> int | None:
    """How many members `group_id` has once `records` (an operation's, not yet applied) are, or None when no
    streams group holds it then. Reads only the records that add, remove or delete."""
    count = len(group.members) if group is not None else None
    added: dict[str, bool] = {}  # member id -> in the group after the records so far
    for rec in records:
        if getattr(rec, "group_id", None) != group_id:
            continue
        kind = type(rec)
        if kind is sr.StreamsGroupMetadata and count is None:
            count, group, added = 0, None, {}
        elif kind is sr.StreamsGroupMetadataTombstone:
            count, group, added = None, None, {}
        elif count is not None and kind in (sr.StreamsGroupMemberMetadata, sr.StreamsGroupMemberMetadataTombstone):
            mid = rec.member_id
            before = added.get(mid, group is not None and mid in group.members)
            after = kind is sr.StreamsGroupMemberMetadata
            count += int(after) - int(before)
            added[mid] = after
    return count


def _is_empty_classic(group: GroupView | None) -> bool:
    return group is not None and group.group_type == CLASSIC and group.is_empty()


def assignor_done(shard: GroupCoordinatorShard, done: StreamsAssignorCompletion, now: int) -> Result[None]:
    groups: StreamsGroups = shard.streams
    return groups.complete_assignor(done, now)
