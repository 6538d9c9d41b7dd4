"""Large groups' assignor inputs kept in the worker processes, so a run crosses as what changed since the last.

Why: a run on a 10,000-member group carries every member's row and its current target's 10,000 member ids.
Pickled a slice at a time on the event loop (`sliced_run`) that is 2.7 ms of the coordinator's CPU in 30 loop
passes per run, and at assignment interval 0 a churning group runs several times a second: the slices' time,
and the wake-ups of the threads that used to send them, were what the other groups' heartbeats waited for.
Here a group of at least `CACHE_MIN_MEMBERS` stays with one worker process (`Holdings`, on the coordinator's
side), which keeps its rows and member ids (`RunCache`, on the worker's). The next run for that group carries
the hollow run (the spec without rows or member ids: a few kilobytes plus the owner array) and the changes
since the worker's copy, which the group's snapshots already know (`SpecLineage`); the worker applies them
with the group's own operations, so the run it executes is the one a full send would have given it.
"""

from __future__ import annotations

import pickle
from bisect import bisect_left, insort
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from groupcoord.coordinator.core.consumer.spec_members import Row, RowEvent, SpecLineage, SpecMembers, apply_row_events
from groupcoord.coordinator.core.consumer.target_store import MemberEvent
from groupcoord.coordinator.runtime.sliced_run import SlicedRun, hollow_run, unslice

if TYPE_CHECKING:  # the executor imports this module
    from groupcoord.coordinator.runtime.executor import CompactRun

CACHE_MIN_MEMBERS = 1000  # smaller groups cross whole: a few hundred rows pickle in well under 0.1 ms
CACHE_GROUPS_PER_WORKER = 32  # groups each worker keeps (least recently run out first)
CACHE_MISS = "background executor: the worker no longer holds the group's rows"


@dataclass(frozen=True, slots=True)
class Keep:
    """A whole run (sliced or not) for the worker to execute and then keep under `group_id`, at these serials."""

    group_id: str
    rows_serial: int
    ids_serial: int | None  # None: the run had no current target
    run: object  # SlicedRun | CompactRun


@dataclass(frozen=True, slots=True)
class CachedRun:
    """A run for a group the worker keeps: the hollow run and the changes from the worker's copy (serials
    `rows_base`, `ids_base`) to this run's (`rows_serial`, `ids_serial`)."""

    group_id: str
    head: bytes
    rows_base: int
    rows_serial: int
    row_events: tuple[RowEvent, ...]
    ids_base: int | None
    ids_serial: int | None
    id_events: tuple[MemberEvent, ...]


class CacheMiss(Exception):
    """The worker does not hold what the coordinator thought (it never should): the run is sent again whole."""


class Holdings:
    """The coordinator's record of which worker keeps which group, at which serials, so it knows when a
    `CachedRun` will find its base there. Messages to one worker are read in order, so recording a send is
    enough: the worker holds what was last sent to it by the time it reads the next."""

    def __init__(self, workers: int, per_worker: int = CACHE_GROUPS_PER_WORKER) -> None:
        self._held: dict[str, tuple[int, int, int | None]] = {}  # group -> worker, rows serial, ids serial
        self._lru: list[OrderedDict[str, None]] = [OrderedDict() for _ in range(workers)]
        self._per_worker = per_worker

    def holder(self, group_id: str) -> int | None:
        held = self._held.get(group_id)
        return None if held is None else held[0]

    def cached_run(self, group_id: str, run: CompactRun) -> tuple[int, CachedRun] | None:
        """(the worker, what to send it) when a worker holds the base of `run`, else None."""
        held = self._held.get(group_id)
        lineage = _lineage(run)
        if held is None or lineage is None:
            return None
        worker, rows_serial, ids_serial = held
        if lineage.rows_base != rows_serial:
            return None
        id_events: tuple[MemberEvent, ...] = ()
        if lineage.ids is None:  # no current target
            new_ids: int | None = None
        elif lineage.ids[1] == ids_serial:
            new_ids = ids_serial  # the same current target as last time
        elif ids_serial is not None and lineage.ids[0] == ids_serial:
            new_ids, id_events = lineage.ids[1], lineage.ids[2]
        else:
            return None
        head = pickle.dumps(hollow_run(run), protocol=pickle.HIGHEST_PROTOCOL)
        return worker, CachedRun(group_id, head, rows_serial, lineage.rows_serial, lineage.row_events,
                                 ids_serial, new_ids, id_events)

    def keep(self, group_id: str, worker: int, rows_serial: int, ids_serial: int | None) -> tuple[str, ...]:
        """Record that `worker` now keeps `group_id` at these serials; returns the groups it must drop."""
        held = self._held.get(group_id)
        if held is not None and held[0] != worker:
            self._lru[held[0]].pop(group_id, None)
        self._held[group_id] = (worker, rows_serial, ids_serial)
        lru = self._lru[worker]
        lru[group_id] = None
        lru.move_to_end(group_id)
        evicted: list[str] = []
        while len(lru) > self._per_worker:
            old, _ = lru.popitem(last=False)
            del self._held[old]
            evicted.append(old)
        return tuple(evicted)

    def forget(self, group_id: str) -> None:
        held = self._held.pop(group_id, None)
        if held is not None:
            self._lru[held[0]].pop(group_id, None)

    def forget_worker(self, worker: int) -> None:
        """The worker died: whatever it kept is gone."""
        for group_id in self._lru[worker]:
            self._held.pop(group_id, None)
        self._lru[worker].clear()


@dataclass(slots=True)
class _Kept:
    rows_serial: int
    rows: dict[str, Row]
    ids_serial: int | None
    member_ids: list[str] | None


class RunCache:
    """The worker's side: the groups it keeps, and the runs rebuilt from what it keeps and what it is sent."""

    def __init__(self) -> None:
        self._kept: dict[str, _Kept] = {}

    def evict(self, group_ids: Sequence[str]) -> None:
        for group_id in group_ids:
            self._kept.pop(group_id, None)

    def resolve(self, body: object) -> object:
        """The `CompactRun` to execute for what the coordinator sent (`Keep`, `CachedRun`, or a plain run)."""
        if isinstance(body, Keep):
            run = unslice(body.run) if isinstance(body.run, SlicedRun) else body.run
            members = run.spec.members  # type: ignore[attr-defined]
            current = run.spec.current  # type: ignore[attr-defined]
            assert isinstance(members, SpecMembers)
            self._kept[body.group_id] = _Kept(body.rows_serial, dict(members.rows), body.ids_serial,
                                              None if current is None else list(current.member_ids))
            return run
        if isinstance(body, CachedRun):
            return self._rebuild(body)
        return unslice(body) if isinstance(body, SlicedRun) else body

    def _rebuild(self, body: CachedRun) -> object:
        kept = self._kept.get(body.group_id)
        if kept is None or kept.rows_serial != body.rows_base or kept.ids_serial != body.ids_base:
            self._kept.pop(body.group_id, None)
            raise CacheMiss(body.group_id)
        run = pickle.loads(body.head)
        spec = run.spec
        members = spec.members
        assert isinstance(members, SpecMembers)
        apply_row_events(kept.rows, body.row_events)
        # every row's subscription is again the very object of this run's `distinct` (as `unslice` makes it)
        canonical = {s: s for s in members.distinct}
        kept.rows = {m: (canonical.get(s, s), rack, instance) for m, (s, rack, instance) in kept.rows.items()}
        members.rows = kept.rows.copy()
        kept.rows_serial = body.rows_serial
        if body.ids_serial is not None:
            ids = kept.member_ids
            if ids is None or spec.current is None:
                self._kept.pop(body.group_id, None)
                raise CacheMiss(body.group_id)
            for member_id, added in body.id_events:
                if added:
                    insort(ids, member_id)
                else:
                    at = bisect_left(ids, member_id)
                    if at == len(ids) or ids[at] != member_id:
                        self._kept.pop(body.group_id, None)
                        raise CacheMiss(body.group_id)
                    del ids[at]
            spec.current.member_ids = list(ids)
        else:
            kept.member_ids = None
        kept.ids_serial = body.ids_serial
        return run


def _lineage(run: CompactRun) -> SpecLineage | None:
    """The lineage of `run`'s snapshot, when it has one that covers its current target too (`ids` is None
    exactly when there is no current target); else None: the run can neither be sent as changes nor kept."""
    spec = run.spec
    members = spec.members
    if not isinstance(members, SpecMembers) or members.lineage is None or members.current is not spec.current:
        return None
    lineage = members.lineage
    return lineage if (lineage.ids is None) == (spec.current is None) else None


def keep_for(run: CompactRun) -> tuple[int, int | None] | None:
    """(rows serial, ids serial) to keep a whole run under, when its group is big enough and its snapshot has
    a lineage; else None (the run crosses whole and is not kept)."""
    lineage = _lineage(run)
    if lineage is None or len(run.spec.members) < CACHE_MIN_MEMBERS:
        return None
    return lineage.rows_serial, (None if lineage.ids is None else lineage.ids[1])
