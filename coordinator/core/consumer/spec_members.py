"""A group's members as the assignor sees them, kept as columns and made into `MemberSpec`s only when read.

Why: the coordinator snapshots a group for every assignor run on the event loop, and with offload the
snapshot is pickled for a worker process. One `MemberSpec` per member, each with its view of the current
target, cost 24 ms to build and 35 ms to pickle for 10,000 members, though no one on the coordinator's side
reads them. Here the snapshot is one row per member: its subscription (a shared frozenset, which pickles
once), rack and instance id, plus the target's owner array; a worker builds the specs it reads. The group
keeps the rows up to date as members change (`ConsumerGroup.spec_rows`), so a snapshot is a dict copy.
"""

from __future__ import annotations

from collections.abc import Iterator, KeysView, Mapping, Sequence
from dataclasses import dataclass

from groupcoord.assignors.api import MemberSpec
from groupcoord.assignors.compact import CompactAssignment
from groupcoord.coordinator.core.consumer.target_store import IdsLineage

_EMPTY: Mapping[str, frozenset[int]] = {}


Row = tuple[frozenset[str], "str | None", "str | None"]  # subscribed topic ids, rack id, instance id
RowEvent = tuple[str, bool, "Row | None"]  # member id, re-added (goes last), its row now (None: gone)


@dataclass(frozen=True, slots=True)
class SpecLineage:
    """How a snapshot's rows (and its current target's member ids) follow from the group's previous snapshot:
    that one's serial (None: rebuilt from scratch), this one's, and the changes in between, in the order the
    group applied them. Bookkeeping for the executor, never state: a worker process that holds the previous
    snapshot is sent only the changes (`runtime.run_cache`)."""

    rows_base: int | None
    rows_serial: int
    row_events: tuple[RowEvent, ...]
    ids: IdsLineage | None  # None: no current target, or not the store's snapshot


def apply_row_events(rows: dict[str, Row], events: Sequence[RowEvent]) -> None:
    """`rows` as `build_spec` changed the group's own: the same operations in the same order, so the same
    rows in the same order."""
    for member_id, readded, row in events:
        if readded:
            rows.pop(member_id, None)
        if row is not None:
            rows[member_id] = row


class SpecMembers(Mapping[str, MemberSpec]):
    """member id -> `MemberSpec`, whose `assigned_partitions` is `current`'s view of the member (nothing for a
    member `current` lacks). `rows` is the caller's copy (the group keeps its own up to date).

    That is a promise by construction, and `current` (the very `GroupSpec.current`) says so to the assignors
    (`assignors.overlay.given_as_views`): `uniform` then reads the specs of only the members it moves, and hands
    back an `OverlayAssignment` over this mapping. So `current` must not change, nor a spec be built otherwise."""

    __slots__ = ("_specs", "current", "distinct", "lineage", "rows")

    def __init__(self, rows: dict[str, Row], distinct: Sequence[frozenset[str]],
                 current: CompactAssignment | None, lineage: SpecLineage | None = None) -> None:
        self.rows = rows
        self.distinct = distinct
        self.current = current
        self.lineage = lineage  # not pickled: it is for this process's executor
        self._specs: dict[str, MemberSpec] = {}

    def distinct_subscriptions(self) -> Sequence[frozenset[str]]:
        """Each subscription once (members mostly share theirs)."""
        return self.distinct

    def __getitem__(self, member_id: str) -> MemberSpec:
        spec = self._specs.get(member_id)
        if spec is None:
            sub, rack, instance = self.rows[member_id]
            current = self.current
            target = current.view(member_id) if current is not None and member_id in current else _EMPTY
            spec = MemberSpec(sub, target, rack, instance)
            self._specs[member_id] = spec
        return spec

    def __contains__(self, member_id: object) -> bool:
        return member_id in self.rows

    def __iter__(self) -> Iterator[str]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def keys(self) -> KeysView[str]:  # a dict's: set operations run in C
        return self.rows.keys()

    def __reduce__(self) -> tuple[object, ...]:
        return SpecMembers, (self.rows, self.distinct, self.current)
