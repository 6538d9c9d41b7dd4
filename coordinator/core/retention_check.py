"""The offset-retention check (KIP-211; Kafka's OffsetMetadataManager.cleanupExpiredOffsets and
GroupMetadataManager.maybeDeleteGroup): what the retention timer runs, in batches, over every group type.

The rules are in `retention.py`'s docstring; this half sits above the group types because it deletes groups
(`admin.write_group_deletion`) and reads streams groups, while the half every type calls stays below them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core import admin
from groupcoord.coordinator.core.records import OffsetCommitTombstone
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.retention import RETENTION_TIMER, RetentionPending

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard

BATCH_GROUPS = 500  # groups per timer operation; the rest continue in the next operation


def on_retention_timer(shard: GroupCoordinatorShard, now: int) -> Result[None]:
    """One batch of the check. Pure: the groups still to visit are a volatile effect (`RetentionPending`), and
    whether anything is left to check next time is judged from what this batch deletes."""
    result: Result[None] = Result(None)
    # The groups as of now, visited from the end (a group in both lists is visited once).
    pending = list(shard.retention_pending) or [*shard.offsets.group_ids(), *shard.groups]
    visited: set[str] = set()
    gone: set[str] = set()  # groups this batch deletes with all their offsets
    for _ in range(min(BATCH_GROUPS, len(pending))):
        group_id = pending.pop()
        if group_id not in visited:
            visited.add(group_id)
            if cleanup_group(shard, group_id, now, result):
                gone.add(group_id)
    result.memory.append(RetentionPending(tuple(pending)))
    if pending:
        shard.arm_timer(result, RETENTION_TIMER, now)  # continue after the operations queued meanwhile
    elif any(gid not in gone for gid in shard.groups) or any(gid not in gone for gid in shard.offsets.group_ids()):
        shard.arm_timer(result, RETENTION_TIMER, now + int(shard.config["offsets.retention.check.interval.ms"]))
    return result


def cleanup_group(shard: GroupCoordinatorShard, group_id: str, now: int, result: Result[Any]) -> bool:
    """Tombstone `group_id`'s expired offsets, and the group itself when it may go: True when nothing of it is
    left (no group, no offsets) once `result` is applied."""
    group = shard.groups.get(group_id)
    retention_ms = int(shard.config["offsets.retention.minutes"]) * 60_000
    empty = group is None or group.is_empty()
    subscribed: set[str] | None = set()
    since: int | None = None
    if group is not None and empty:
        since = shard.empty_since.get(group_id)
    elif group is not None:
        subscribed = group.topics_in_use()
    if subscribed is None:
        return False  # a group with members whose subscriptions are opaque (classic, share) keeps its offsets
    all_expired = True
    for (topic, partition), c in list(shard.offsets.committed(group_id).items()):
        base = c.commit_timestamp_ms if since is None else max(since, c.commit_timestamp_ms)
        if topic not in subscribed and now - base >= retention_ms:
            shard._write(result, OffsetCommitTombstone(group_id, topic, partition))
        else:
            all_expired = False
    if all_expired and group is not None and empty and group.should_expire():
        admin.write_group_deletion(shard, group_id, group, result)
        return True
    return all_expired and group is None
