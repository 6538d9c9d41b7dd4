"""The committed image: the coordinator's state as of its durable log, for putting failed work back.

Kafka's `CoordinatorRuntime` keeps its state in timeline data structures and, when an operation throws or an
append fails, reverts them to the snapshot of the last committed offset. We keep the same two facts apart:
- `shard`: a second shard fed only records that are durable (a load's, and each operation's once its append
  completed), in log order; it is exactly what a fresh replay of the log would build;
- `pending`: the records of operations appended but not yet durable, per operation, in order.

Then every way an operation can fail is one step, on the event loop and without reading the log: the groups
it touched are rebuilt from the image (`group_state.restore_groups`), plus, when only this operation failed,
the pending records of earlier operations on those groups. Memory never holds what the log will not.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from groupcoord.coordinator.core.group_state import group_records, restore_groups
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.core.snapshot import snapshot_records

log = logging.getLogger("groupcoord.runtime")


def record_group_ids(records: Iterable[Any]) -> set[str]:
    """The groups records belong to (every record type names its group)."""
    return {r.group_id for r in records}


class CommittedImage:
    def __init__(self, make_shard: Callable[[], GroupCoordinatorShard]) -> None:
        self.shard = make_shard()
        self._pending: dict[int, list[Any]] = {}  # operation sequence -> its records, appended, not yet durable
        self._seqs = itertools.count(1)
        # While a snapshot thread reads the image (`frozen`), durable records wait here, in order.
        self.frozen = False
        self._held: list[Any] = []

    def replay(self, record: Any) -> None:
        """A record already durable (a load, a partition's replay)."""
        if self.frozen:
            self._held.append(record)
        else:
            self.shard.replay(record)

    def freeze(self) -> None:
        """Hold every change to the image until `thaw`: a snapshot is being written from it on another thread."""
        self.frozen = True

    def thaw(self) -> None:
        self.frozen = False
        held, self._held = self._held, []
        for record in held:
            self.shard.replay(record)

    async def write_snapshot(self, sink: Any, generation: int, rotated: Awaitable[Any]) -> None:
        """Write the image as the snapshot of `generation`, which `sink` (a FileLog) closed with a mark in its
        writer's queue: once the writer passed it (`rotated`), the image holds exactly what the closed
        generation's logs hold, and it is held still (`freeze`) while a thread reads it. A failure is logged:
        the log keeps everything."""
        try:
            await rotated
            self.freeze()
            try:
                await asyncio.to_thread(sink.write_snapshot, generation, snapshot_records(self.shard))
            finally:
                self.thaw()
        except Exception:
            log.exception("snapshot %d failed; the log keeps everything", generation)

    def appended(self, records: list[Any]) -> int:
        """An operation's records went to the log; returns the sequence to report durability with."""
        seq = next(self._seqs)
        self._pending[seq] = records
        return seq

    def durable(self, seq: int) -> None:
        for record in self._pending.pop(seq, ()):
            self.replay(record)

    def groups_of(self, seq: int) -> set[str]:
        return record_group_ids(self._pending.get(seq, ()))

    def pending_count(self) -> int:
        return len(self._pending)

    def discard(self, group_ids: set[str] | None = None) -> set[str]:
        """Forget the pending operations that touch `group_ids` (all of them: None) because their append failed
        or will fail; returns every group they touched (what must be put back)."""
        dropped: set[str] = set()
        for seq, records in list(self._pending.items()):
            touched = record_group_ids(records)
            if group_ids is None or touched & group_ids:
                dropped |= touched
                del self._pending[seq]
        return dropped

    def put_back(self, live: GroupCoordinatorShard, group_ids: set[str], now: int,
                 keep_pending: bool) -> Result[None]:
        """Rebuild `group_ids` in `live` from the image; with `keep_pending`, replay on top the pending records of
        earlier operations on them (they will be durable: only the running operation failed)."""
        gids = frozenset(group_ids)
        records = [r for gid in sorted(gids) for r in group_records(self.shard, gid)]
        records += [r for r in self._held if r.group_id in gids]  # durable, held while a snapshot is written
        if keep_pending:
            records += [r for recs in self._pending.values() for r in recs if r.group_id in gids]
        return restore_groups(live, gids, records, now)

