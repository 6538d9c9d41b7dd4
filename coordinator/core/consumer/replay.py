"""Consumer groups' hooks into the shard (`hooks`): their records' replayers (and their volatile effects',
`consumer/effects.py`), their member timers (session, rebalance) and their offloaded assignor runs' completions;
each group type's package has its own `hooks`. The timer handler is pure, as every consumer handler."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core import records
from groupcoord.coordinator.core.consumer import assignment as consumer_assignment
from groupcoord.coordinator.core.consumer import effects
from groupcoord.coordinator.core.consumer import heartbeat as consumer_heartbeat
from groupcoord.coordinator.core.consumer.effects import RebalanceTimerEpoch, emit
from groupcoord.coordinator.core.consumer.group import (
    GROUP_TYPE,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from groupcoord.coordinator.core.consumer.member_changes import with_assignment, with_metadata
from groupcoord.coordinator.core.consumer.staged import Staged
from groupcoord.coordinator.core.group import GroupTypeHooks
from groupcoord.coordinator.core.modern.replay import modern_replayers
from groupcoord.coordinator.core.results import Result, TimerKey

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard

TIMER_KINDS = ("session", "rebalance")


def hooks(shard: GroupCoordinatorShard) -> GroupTypeHooks:
    """Consumer groups' records, timers and assignor completions, for the shard's constructor."""
    replayers: dict[type, Callable[[Any], None]] = modern_replayers(
        partial(consumer_group, shard), partial(_existing, shard), attrgetter("target_assignment"),
        records.ConsumerGroupMetadata, records.ConsumerGroupTargetAssignmentMember,
        records.ConsumerGroupTargetAssignmentMemberTombstone, records.ConsumerGroupTargetAssignmentMetadata)
    replayers.update({record_type: partial(fn, shard) for record_type, fn in (
        (records.ConsumerGroupMetadataTombstone, _replay_group_tombstone),
        (records.ConsumerGroupMemberMetadata, _replay_member_metadata),
        (records.ConsumerGroupMemberMetadataTombstone, _replay_member_tombstone),
        (records.ConsumerGroupCurrentMemberAssignment, _replay_current_assignment),
        (records.ConsumerGroupCurrentMemberAssignmentTombstone, _replay_current_assignment_tombstone),
        (records.ConsumerGroupRegularExpression, _replay_regex),
        (records.ConsumerGroupRegularExpressionTombstone, _replay_regex_tombstone),
    )})
    replayers.update(effects.replayers(shard))  # volatile effects (consumer/effects.py)
    return GroupTypeHooks(replayers, {kind: partial(_on_member_timer, shard) for kind in TIMER_KINDS},
                          {GROUP_TYPE: partial(consumer_assignment.on_assignment_complete, shard)})


def _replay_group_tombstone(shard: GroupCoordinatorShard, r: records.ConsumerGroupMetadataTombstone) -> None:
    """Drops the group whatever its type: `partitioning.drop_groups` forgets any group with this record (replayed
    in memory only); a consumer group is marked deleted so an assignor run in flight for it is discarded."""
    group = shard.groups.pop(r.group_id, None)
    if isinstance(group, ConsumerGroup):
        group.deleted = True


def consumer_group(shard: GroupCoordinatorShard, group_id: str) -> ConsumerGroup:
    """The consumer group `group_id`, created (replacing a group of another type) when a record names it."""
    group = shard.groups.get(group_id)
    if not isinstance(group, ConsumerGroup):
        group = ConsumerGroup(group_id, timers=shard)
        shard.groups[group_id] = group
    return group


def _existing(shard: GroupCoordinatorShard, group_id: str) -> ConsumerGroup | None:
    group = shard.groups.get(group_id)
    return group if isinstance(group, ConsumerGroup) else None


def _replay_member_metadata(shard: GroupCoordinatorShard, r: records.ConsumerGroupMemberMetadata) -> None:
    group = consumer_group(shard, r.group_id)
    group.put_member(with_metadata(group.members.get(r.member_id) or ConsumerGroupMember(r.member_id), r))


def _replay_member_tombstone(shard: GroupCoordinatorShard, r: records.ConsumerGroupMemberMetadataTombstone) -> None:
    group = shard.groups.get(r.group_id)
    if isinstance(group, ConsumerGroup):
        group.remove_member(r.member_id)


def _replay_current_assignment(shard: GroupCoordinatorShard, r: records.ConsumerGroupCurrentMemberAssignment) -> None:
    group = consumer_group(shard, r.group_id)
    group.put_member(with_assignment(group.members.get(r.member_id) or ConsumerGroupMember(r.member_id), r))


def _replay_current_assignment_tombstone(shard: GroupCoordinatorShard,
                                         r: records.ConsumerGroupCurrentMemberAssignmentTombstone) -> None:
    group = shard.groups.get(r.group_id)
    if isinstance(group, ConsumerGroup):
        group.remove_member(r.member_id)


def _replay_regex(shard: GroupCoordinatorShard, r: records.ConsumerGroupRegularExpression) -> None:
    group = consumer_group(shard, r.group_id)
    group.resolved_regexes[r.regex] = frozenset(r.topics)
    group.regex_resolved_ms[r.regex] = r.timestamp_ms
    group.spec_dirty = None  # members' subscribed topic ids depend on the resolution


def _replay_regex_tombstone(shard: GroupCoordinatorShard, r: records.ConsumerGroupRegularExpressionTombstone) -> None:
    group = shard.groups.get(r.group_id)
    if isinstance(group, ConsumerGroup):
        group.resolved_regexes.pop(r.regex, None)
        group.regex_resolved_ms.pop(r.regex, None)
        group.spec_dirty = None


def _on_member_timer(shard: GroupCoordinatorShard, key: TimerKey, now: int) -> Result[None]:
    """Session expiry or rebalance timeout (a revoking member that did not revoke in time) fences the member,
    unless it was armed for an epoch the member has left (the shard's `on_timer` already dropped a stale one).
    Pure, a fence that downgrades the group too (`mixed/conversion.py`)."""
    kind, group_id, member_id = key[0], key[1], key[2]
    group = shard.groups.get(group_id)
    if not isinstance(group, ConsumerGroup):
        return Result(None, empty_after=membership(group))
    member = group.members.get(member_id)
    if member is None:
        return Result(None, empty_after=membership(group))
    stale = kind == "rebalance" and (member.state is not MemberState.UNREVOKED_PARTITIONS
                                     or shard.rebalance_timer_epochs.get((group_id, member_id)) != member.member_epoch)
    result: Result[None] = Result(None)
    if kind == "rebalance":
        emit(shard, result, RebalanceTimerEpoch(group_id, member_id, None))
        if stale:
            result.empty_after = membership(group)
            return result
        shard.stats.members_fenced_rebalance += 1
    else:
        shard.stats.members_fenced_session += 1
    if not shard.maybe_downgrade(group, member_id, result, now):
        staged = Staged(shard, result, group)
        consumer_heartbeat.remove_member_records(shard, staged, member, bump_epoch=True)
        result.empty_after = staged.member_count() == 0
    return result


def membership(group: Any) -> bool | None:
    """`Result.empty_after` for a pure operation that leaves `group` as it is (retention.note_membership)."""
    return group.is_empty() if group is not None and group.tracks_empty_since else None
