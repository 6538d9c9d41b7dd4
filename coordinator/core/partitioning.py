"""Groups divided over the partitions of the state topic, as Kafka divides them over `__consumer_offsets`.

A group belongs to partition `state_partition(group_id, P)`; whoever owns that partition is the group's
coordinator. When an instance loses a partition it forgets the groups there (`drop_groups`): nothing is
written, the records stay in the topic for the next owner, whose replay is the only way the state comes back.
When it gains one, it replays the partition and arms the timers of those groups only
(`timers_after_partition_load`): re-arming every group's session timer would postpone the fencing of members
of groups it already served.

Kafka hashes with Java's `String.hashCode`; we use CRC-32 of the UTF-8 bytes: stable across processes and
Python versions (unlike `hash`, which is salted per process), and the same in any language.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from groupcoord.coordinator.core.group_state import forget_groups, known_group_ids
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.snapshot import timers_after_load

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard

GroupPredicate = Callable[[str], bool]


def state_partition(group_id: str, partitions: int) -> int:
    """The state-topic partition holding `group_id`'s records (and so deciding its coordinator)."""
    return zlib.crc32(group_id.encode("utf-8")) % partitions


def in_partitions(partitions: int, owned: frozenset[int] | set[int]) -> GroupPredicate:
    """A predicate for the groups whose state partition is one of `owned`."""
    return lambda group_id: state_partition(group_id, partitions) in owned


def drop_groups(shard: GroupCoordinatorShard, predicate: GroupPredicate) -> Result[list[str]]:
    """Forget every group matching `predicate`, of every type (`group_state.forget_groups`: nothing is written,
    the records stay in the topic for the next owner). The result cancels their timers; its response lists
    the dropped group ids."""
    dropped = sorted(g for g in known_group_ids(shard) if predicate(g))
    return Result(dropped, timers=forget_groups(shard, dropped))


def timers_after_partition_load(shard: GroupCoordinatorShard, predicate: GroupPredicate, now: int) -> Result[None]:
    """The timers to arm after replaying the groups matching `predicate` (see `timers_after_load`)."""
    return timers_after_load(shard, now, loaded=predicate)
