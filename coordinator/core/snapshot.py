"""The shard's whole state as records (for snapshots), and what to arm after a load.

Replaying `snapshot_records(shard)` into an empty shard rebuilds the same state, so a snapshot can replace
the log that led to it. Timers are not state: after a load every member's session timer is armed anew
(a member that died while the coordinator was down is fenced one session timeout later) and rebalance
timers for members still revoking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core.records import GroupConfig, GroupEmptySince
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.retention import ensure_timer

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard


def snapshot_records(shard: GroupCoordinatorShard) -> Iterator[Any]:
    for group_id, configs in shard.group_configs.items():
        yield GroupConfig(group_id, dict(configs))
    for group in list(shard.groups.values()):
        yield from group.snapshot_records()
    for group_id in shard.offsets.group_ids():
        yield from shard.offsets.committed(group_id).values()
    for group_id, since in shard.empty_since.items():
        yield GroupEmptySince(group_id, since)


def timers_after_load(shard: GroupCoordinatorShard, now: int, group_ids: frozenset[str] | None = None,
                      loaded: Callable[[str], bool] | None = None) -> Result[None]:
    """The timers to arm after a load, of every group type: every group's, plus the offset-retention check;
    with `group_ids`, only those groups' (a rollback rebuilds a few groups while every other timer is armed
    already); with `loaded`, the groups it accepts plus the retention check (a state partition's groups:
    partitioning.py). Their deadlines are noted for the shard's stale-timer check. Part of a load, not an
    operation: it changes classic groups from Initialize to their loaded state itself (`from_log`)."""

    result: Result[None] = Result(None, from_log=True)
    if group_ids is None:
        def wanted(group_id: str) -> bool:
            return loaded is None or loaded(group_id)
        groups = [g for k, g in shard.groups.items() if wanted(k)]
        if groups or shard.offsets:
            ensure_timer(shard, now, result)
    else:
        groups = [g for k, g in shard.groups.items() if k in group_ids]
    for group in groups:
        result.timers.extend(group.timers_after_load(now))
    shard.note_timers(result.timers)
    return result
