"""A consumer group's target assignment, kept as arrays: per-topic owner arrays plus each member's partitions.

Why: a frozenset per member and topic costs tens of bytes per partition, and the assignors want an owner
array anyway. Records still carry one member's topic -> partitions (their bytes do not change); replaying
one writes that member's int32 arrays and its entries in the owner arrays, and reading a member derives its
mapping from its arrays. `snapshot()` hands the assignors the owner arrays in their layout
(`CompactAssignment`) without touching a Python object per partition.

Owner arrays hold one member per partition. While the records of one new target are replayed, a partition
may briefly be claimed by two members (the gainer's record before the loser's); the loser's later record
clears only entries it still owns, so the arrays end right (records applied in another order are caught by
counting claims against owned entries, and the owner arrays rebuilt from the members' arrays). Should claims
overlap for good (a custom assignor handing a partition to two members), `snapshot()` returns None and
callers use the per-member mappings, which stay exact.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Iterator, KeysView, Mapping, MutableMapping

import numpy as np
import numpy.typing as npt

from groupcoord.assignors.compact import CompactAssignment

I32Array = npt.NDArray[np.int32]
Partitions = Mapping[str, frozenset[int]]
_NONE = np.int32(-1)

# Snapshot serials, unique in the process (a group dropped and re-created must not reuse one): bookkeeping for
# the executor's per-worker caches, never part of the state or of any answer.
SERIALS = itertools.count(1)
MAX_LINEAGE_EVENTS = 4096  # membership changes remembered between two snapshots; beyond, the next has no lineage

MemberEvent = tuple[str, bool]  # member id, True: added to the target, False: removed from it
IdsLineage = tuple["int | None", int, tuple[MemberEvent, ...]]  # `TargetAssignment.lineage`


class TargetAssignment(MutableMapping[str, Partitions]):
    """member id -> topic id -> partitions, stored as arrays (see the module docstring)."""

    # What a `snapshot()` read memoises is named `*_cache`: a read fills it (tests/purity.py skips it), and
    # a store rebuilt from the log starts without it.
    __slots__ = ("_claims", "_events_cache", "_free", "_ids", "_lineage_cache", "_order_cache", "_order_slots_cache",
                 "_owned", "_owners", "_parts", "_slot", "_snapshot_cache", "_taken_cache", "version", "writes")

    def __init__(self, items: Mapping[str, Partitions] | None = None) -> None:
        self._slot: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._free: list[int] = []
        self._parts: list[dict[str, I32Array]] = []
        self._owners: dict[str, I32Array] = {}
        self._claims = 0  # partitions over every member's arrays
        self._owned = 0  # entries >= 0 over the owner arrays: equal to _claims unless claims overlap
        self._snapshot_cache: CompactAssignment | None = None
        self._taken_cache: list[tuple[CompactAssignment, int]] = []  # recent snapshots and `writes` when taken
        # member ids sorted, and their slots in that order: kept as members come and go (C-level inserts) once
        # a snapshot has been taken, so later snapshots need no sort and no pass in Python over the members
        self._order_cache: list[str] | None = None  # None: sorted at the next snapshot (replay inserts stay O(1))
        self._order_slots_cache = np.zeros(0, dtype=np.int32)
        self.version = 0
        self.writes = 0  # member assignments set (removals do not count: they change no one else's)
        # How the last snapshot's member ids follow from the one before: (that one's serial or None, this one's
        # serial, the members added and removed in between, in order). A worker process holding the previous
        # member ids then needs only the events, not 10,000 ids (`runtime.run_cache`).
        self._lineage_cache: IdsLineage | None = None
        self._events_cache: list[MemberEvent] | None = None  # since the last snapshot; None: too many, or none taken
        for k, v in (items or {}).items():
            self[k] = v

    @property
    def lineage(self) -> IdsLineage | None:
        return self._lineage_cache

    def copy(self) -> TargetAssignment:
        """An independent store with the same target (for an operation that reads a target its records have not
        yet set: `consumer/staged.py`); it shares no snapshot with this one."""
        new = TargetAssignment.__new__(TargetAssignment)
        new._slot, new._ids, new._free = dict(self._slot), list(self._ids), list(self._free)
        new._parts = list(self._parts)  # a member's arrays are replaced when it changes, never changed in place
        new._owners = {t: a.copy() for t, a in self._owners.items()}
        new._claims, new._owned = self._claims, self._owned
        new._snapshot_cache, new._taken_cache = None, []
        new._order_cache = None if self._order_cache is None else list(self._order_cache)
        new._order_slots_cache = self._order_slots_cache  # np.insert/np.delete make new arrays
        new.version, new.writes = self.version, self.writes
        new._lineage_cache = self._lineage_cache
        new._events_cache = None if self._events_cache is None else list(self._events_cache)
        return new

    def adopt_snapshot(self, other: TargetAssignment) -> None:
        """Keep the snapshot `other` (a `copy` of this store with changes this store has since made too) took,
        as if this store had taken it: the target an operation's spec was taken from, once its records apply."""
        snapshot = other._snapshot_cache
        if snapshot is None or other.writes != self.writes or other._slot != self._slot:
            return  # changed since: nothing to keep, as when this store changes after a snapshot
        self._snapshot_cache = snapshot
        self._taken_cache = [other._taken_cache[0], *self._taken_cache[:3]]
        self._lineage_cache, self._events_cache = other._lineage_cache, []
        self._order_cache = None if other._order_cache is None else list(other._order_cache)
        self._order_slots_cache = other._order_slots_cache

    # --- reading ----------------------------------------------------------------------------------------
    def __getitem__(self, member_id: str) -> dict[str, frozenset[int]]:
        parts = self._parts[self._slot[member_id]]
        return {t: frozenset(a.tolist()) for t, a in parts.items()}

    def __contains__(self, member_id: object) -> bool:
        return member_id in self._slot

    def __iter__(self) -> Iterator[str]:
        return iter(self._slot)

    def __len__(self) -> int:
        return len(self._slot)

    def keys(self) -> KeysView[str]:  # a dict's: set operations run in C
        return self._slot.keys()

    def partition_count(self, member_id: str) -> int:
        slot = self._slot.get(member_id)
        return 0 if slot is None else sum(len(a) for a in self._parts[slot].values())

    def nbytes(self) -> int:
        """Bytes of array data held (owner arrays and member arrays)."""
        return sum(a.nbytes for a in self._owners.values()) + sum(
            a.nbytes for parts in self._parts for a in parts.values())

    # --- replay -----------------------------------------------------------------------------------------
    def __setitem__(self, member_id: str, partitions: Partitions) -> None:
        slot = self._slot.get(member_id)
        if slot is None:
            slot = self._free.pop() if self._free else len(self._ids)
            if slot == len(self._ids):
                self._ids.append(member_id)
                self._parts.append({})
            else:
                self._ids[slot] = member_id
            self._slot[member_id] = slot
            if self._order_cache is not None:
                pos = bisect_left(self._order_cache, member_id)
                self._order_cache.insert(pos, member_id)
                self._order_slots_cache = np.insert(self._order_slots_cache, pos, slot)
            self._event(member_id, True)
        else:
            self._release(slot)
        parts: dict[str, I32Array] = {}
        for topic, ps in partitions.items():
            if not ps:
                continue
            arr = np.fromiter(ps, dtype=np.int64, count=len(ps))
            arr.sort()
            if arr[0] < 0 or arr[-1] >= 1 << 31:
                arr = arr[(arr >= 0) & (arr < 1 << 31)]  # not a partition: never valid, dropped as assignors do
            arr32 = arr.astype(np.int32)
            parts[topic] = arr32
            self._claims += len(arr32)
            owners = self._grow(topic, int(arr32[-1]) + 1 if len(arr32) else 0)
            self._owned += int(np.count_nonzero(owners[arr32] < 0))
            owners[arr32] = slot
        self._parts[slot] = parts
        self.writes += 1
        self._changed()

    def __delitem__(self, member_id: str) -> None:
        slot = self._slot.pop(member_id)
        if self._order_cache is not None:
            pos = bisect_left(self._order_cache, member_id)
            del self._order_cache[pos]
            self._order_slots_cache = np.delete(self._order_slots_cache, pos)
        self._event(member_id, False)
        self._release(slot)
        self._parts[slot] = {}
        self._ids[slot] = None
        self._free.append(slot)
        self._changed()

    def _release(self, slot: int) -> None:
        for topic, arr in self._parts[slot].items():
            self._claims -= len(arr)
            owners = self._owners[topic]
            mine = arr[owners[arr] == slot]
            owners[mine] = _NONE
            self._owned -= len(mine)

    def _grow(self, topic: str, size: int) -> I32Array:
        owners = self._owners.get(topic)
        if owners is None or len(owners) < size:
            # grow by a quarter: replay grows a topic member by member, and slack is memory kept
            grown = np.full(max(size, len(owners) * 5 // 4 if owners is not None else size), -1, dtype=np.int32)
            if owners is not None:
                grown[: len(owners)] = owners
            self._owners[topic] = owners = grown
        return owners

    def _rebuild_owners(self) -> None:
        for owners in self._owners.values():
            owners.fill(-1)
        for slot, parts in enumerate(self._parts):
            for topic, arr in parts.items():
                self._owners[topic][arr] = slot
        self._owned = sum(int(np.count_nonzero(a >= 0)) for a in self._owners.values())

    def _event(self, member_id: str, added: bool) -> None:
        events = self._events_cache
        if events is not None:
            events.append((member_id, added))
            if len(events) > MAX_LINEAGE_EVENTS:
                self._events_cache = None

    def _changed(self) -> None:
        self.version += 1
        self._snapshot_cache = None

    # --- for the assignors ------------------------------------------------------------------------------
    def snapshot(self) -> CompactAssignment | None:
        """The target as one owner array (topics sorted, members sorted), the same object until the next
        change; None when claims overlap (see the module docstring)."""
        if self._snapshot_cache is not None:
            return self._snapshot_cache
        if self._owned != self._claims:
            self._rebuild_owners()  # an overlap may have resolved in an order that left a claim unowned
            if self._owned != self._claims:
                return None
        if self._order_cache is None:
            self._order_cache = sorted(self._slot)
            self._order_slots_cache = np.fromiter(map(self._slot.__getitem__, self._order_cache), dtype=np.int32,
                                            count=len(self._order_cache))
        members = list(self._order_cache)
        remap = np.full(len(self._ids) + 1, -1, dtype=np.int32)  # the extra last entry maps -1 to -1
        remap[self._order_slots_cache] = np.arange(len(members), dtype=np.int32)
        topics = sorted(t for t, a in self._owners.items() if (a >= 0).any())
        arrays = [self._owners[t] for t in topics]
        base = np.zeros(len(arrays) + 1, dtype=np.int64)
        np.cumsum([len(a) for a in arrays], out=base[1:])
        owner = remap[np.concatenate(arrays)] if arrays else np.zeros(0, dtype=np.int32)
        self._snapshot_cache = CompactAssignment(members, topics, base, owner)
        lineage = self._lineage_cache
        previous = lineage[1] if lineage is not None and self._events_cache is not None else None
        self._lineage_cache = (previous, next(SERIALS), tuple(self._events_cache or ()))
        self._events_cache = []
        self._taken_cache = [(self._snapshot_cache, self.writes), *self._taken_cache[:3]]
        return self._snapshot_cache

    def holds_since(self, snapshot: CompactAssignment) -> bool:
        """Whether every member still in the store holds what `snapshot` (one of the recent snapshots) says:
        nothing was set since it was taken, only members removed. Lets a result computed from that snapshot
        write records for the members it changed and nobody else."""
        return any(s is snapshot and w == self.writes for s, w in self._taken_cache)
