"""Offset retention (KIP-211; Kafka's OffsetMetadataManager.cleanupExpiredOffsets and
GroupMetadataManager.maybeDeleteGroup), and when groups became empty.

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

from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core import admin
from groupcoord.coordinator.core.records import GroupEmptySince, GroupEmptySinceTombstone, OffsetCommitTombstone
from groupcoord.coordinator.core.results import Result, TimerKey

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard

RETENTION_TIMER: TimerKey = ("offsets-retention",)
BATCH_GROUPS = 500  # groups per timer operation; the rest continue in the next operation


def ensure_timer(shard: GroupCoordinatorShard, now: int, result: Result[Any]) -> None:
    if RETENTION_TIMER not in shard.timer_deadlines:
        shard.arm_timer(result, RETENTION_TIMER, now + int(shard.config["offsets.retention.check.interval.ms"]))


def note_membership(shard: GroupCoordinatorShard, group_id: str, now: int, result: Result[Any]) -> None:
    """After an operation on `group_id`: record when it became empty, or forget it when members came back."""
    group = shard.groups.get(group_id)
    if group is None:
        return
    since = shard.empty_since.get(group_id)
    if group.is_empty():
        if since is None:
            shard._write(result, GroupEmptySince(group_id, now))
            ensure_timer(shard, now, result)
    elif since is not None:
        shard._write(result, GroupEmptySinceTombstone(group_id))


def on_retention_timer(shard: GroupCoordinatorShard, now: int) -> Result[None]:
    result: Result[None] = Result(None)
    pending: list[str] = shard.retention_pending
    if not pending:
        # The groups as of now, visited from the end (a group in both lists is visited twice: harmless).
        pending.extend(shard.offsets.group_ids())
        pending.extend(shard.groups)
        pending.extend(shard.streams.groups)
    for _ in range(min(BATCH_GROUPS, len(pending))):
        cleanup_group(shard, pending.pop(), now, result)
    if pending:
        shard.arm_timer(result, RETENTION_TIMER, now)  # continue after the operations queued meanwhile
    elif shard.groups or shard.offsets or shard.streams.groups:
        shard.arm_timer(result, RETENTION_TIMER, now + int(shard.config["offsets.retention.check.interval.ms"]))
    return result


def cleanup_group(shard: GroupCoordinatorShard, group_id: str, now: int, result: Result[Any]) -> None:
    group = shard.offset_group(group_id)
    retention_ms = int(shard.config["offsets.retention.minutes"]) * 60_000
    empty = group is None or group.is_empty()
    subscribed: set[str] | None = set()
    since: int | None = None
    if group is not None and empty:
        since = shard.empty_since.get(group_id)
    elif group is not None:
        subscribed = group.topics_in_use()
    if subscribed is None:
        return  # a group with members whose subscriptions are opaque (classic, share) keeps its offsets
    all_expired = True
    for (topic, partition), c in list(shard.offsets.committed(group_id).items()):
        base = c.commit_timestamp_ms if since is None else max(since, c.commit_timestamp_ms)
        if topic not in subscribed and now - base >= retention_ms:
            shard._write(result, OffsetCommitTombstone(group_id, topic, partition))
        else:
            all_expired = False
    if all_expired and group is not None and empty and group.should_expire():
        admin.write_group_deletion(shard, group_id, group, result)
