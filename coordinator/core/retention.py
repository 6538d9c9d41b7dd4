"""When groups became empty, and the offset-retention timer (KIP-211), as every group type notes them after an
operation; the check the timer runs is `retention_check.py`, at the shard's level, since it deletes groups.

Every `offsets.retention.check.interval.ms` a core timer walks the groups (in batches, so one check never
holds the event loop for long) and writes tombstones for expired offsets:
- a group that never had members (standalone commits): an offset expires `offsets.retention.minutes` after
  its commit;
- an empty group: after it became empty (`GroupEmptySince`, a record, so replay agrees), or after the
  commit if that is later (a commit into an empty group is not expired earlier than a standalone one);
- a consumer group with members: offsets of topics no member subscribes to expire after their commit
  (Kafka's ConsumerGroup condition); a classic group with members keeps its offsets.
A group with no members and no offsets left is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core.records import GroupEmptySince, GroupEmptySinceTombstone
from groupcoord.coordinator.core.results import Result, TimerKey

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard

RETENTION_TIMER: TimerKey = ("offsets-retention",)


@dataclass(frozen=True, slots=True)
class RetentionPending:
    """A volatile effect (`Result.memory`): the groups the running retention check has still to visit."""

    group_ids: tuple[str, ...]


def ensure_timer(shard: GroupCoordinatorShard, now: int, result: Result[Any]) -> None:
    if RETENTION_TIMER not in shard.timer_deadlines:
        shard.arm_timer(result, RETENTION_TIMER, now + int(shard.config["offsets.retention.check.interval.ms"]))


def note_membership(shard: GroupCoordinatorShard, group_id: str, now: int, result: Result[Any]) -> None:
    """After an operation on `group_id`: record when it became empty, or forget it when members came back. The
    operation says itself whether the group is empty after it (`Result.empty_after`): the group it reads is the
    one before the operation."""
    empty = result.empty_after
    if empty is None:
        return
    since = shard.empty_since.get(group_id)
    if empty:
        if since is None:
            shard._write(result, GroupEmptySince(group_id, now))
            ensure_timer(shard, now, result)
    elif since is not None:
        shard._write(result, GroupEmptySinceTombstone(group_id))
