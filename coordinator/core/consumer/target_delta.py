"""A new target assignment told as what changed against the target the assignor started from.

Why: an offloaded run on a 10,000-member group used to send back every member's partitions (4.8 MB of
frozensets for 20,000 partitions), and the coordinator compared every member's new target with its old one
on the event loop (94 ms) to find the two that changed. The worker process knows which members it changed:
it sends those (`assignment_changes`), and the coordinator reads everyone else from the snapshot the run
was given (`TargetDelta`), writing records only for the changed ones.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, KeysView, Mapping

from groupcoord.assignors.api import GroupAssignment, GroupSpec
from groupcoord.assignors.compact import CompactAssignment
from groupcoord.assignors.overlay import OverlayAssignment

Partitions = Mapping[str, frozenset[int]]
_EMPTY: Partitions = {}


def normalised(p: Mapping[str, Collection[int]]) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in p.items() if ps}


def assignment_changes(spec: GroupSpec, assignment: GroupAssignment) -> dict[str, dict[str, frozenset[int]]] | None:
    """The members of `spec` whose assignment in `assignment` differs from their current one, and those that
    had none in `spec.current`, with their new assignment; None when the result is not over exactly the
    spec's members (then it goes back whole).
    Assignors hand unchanged members' mappings back as given, so most members cost an identity check."""
    members, current = spec.members, spec.current
    if current is None:
        return None
    # an overlay over the spec's members has exactly their ids and gives every other member's back as given:
    # only the ones it overrides can differ
    overlay = assignment if isinstance(assignment, OverlayAssignment) and assignment.members is members else None
    if overlay is None and (len(assignment) != len(members) or any(m not in members for m in assignment)):
        return None
    candidates: Collection[str] = members
    if overlay is not None:
        candidates = sorted(m for m in overlay.overrides if m in members)  # sorted, deterministic, as below
    elif isinstance(assignment, CompactAssignment) and assignment.changed is not None \
            and assignment.previous is current:
        candidates = sorted(m for m in assignment.changed if m in members)  # a frozenset: sorted, deterministic
    changes: dict[str, dict[str, frozenset[int]]] = {}
    for m in candidates:
        new = assignment[m]
        old = members[m].assigned_partitions
        if new is old:
            continue
        new_n = normalised(new)
        if new_n != normalised(old):
            changes[m] = new_n
    # members without a target before the run get one even if empty: listing them here spares the
    # coordinator a pass over every member to find who has no target
    absent: Iterable[str] = (  # an overlay's by set difference in C, not a pass over every member; sorted
        sorted(members.keys() - current.index.keys()) if overlay is not None
        else (m for m in members if m not in current))
    changes.update((m, normalised(assignment[m])) for m in absent if m not in changes)
    return changes


def as_delta(spec: GroupSpec, assignment: GroupAssignment) -> GroupAssignment:
    """`assignment` as a `TargetDelta` over `spec.current` when it can be told so; else as it is."""
    changes = assignment_changes(spec, assignment)
    return assignment if changes is None else TargetDelta.over(spec, changes)


class TargetDelta(Mapping[str, Partitions]):
    """member id -> new target: `changes` for the members that changed, `previous` (the snapshot the run was
    given) for the rest of `members`. `changed` says which members to look at (see `target_records`)."""

    __slots__ = ("changes", "members", "previous")

    def __init__(self, previous: CompactAssignment, members: Collection[str],
                 changes: dict[str, dict[str, frozenset[int]]]) -> None:
        self.previous = previous
        self.members = members
        self.changes = changes

    @staticmethod
    def over(spec: GroupSpec, changes: dict[str, dict[str, frozenset[int]]]) -> TargetDelta:
        """The new target of a run on `spec` (which carried the current target) that made `changes`."""
        assert spec.current is not None
        return TargetDelta(spec.current, spec.members.keys(), changes)

    @property
    def changed(self) -> Collection[str]:
        return self.changes.keys()

    def __getitem__(self, member_id: str) -> Partitions:
        got = self.changes.get(member_id)
        if got is not None:
            return got
        if member_id not in self.members:
            raise KeyError(member_id)
        return self.previous.view(member_id) if member_id in self.previous else _EMPTY

    def __contains__(self, member_id: object) -> bool:
        return member_id in self.members

    def __iter__(self) -> Iterator[str]:
        return iter(self.members)

    def __len__(self) -> int:
        return len(self.members)

    def keys(self) -> KeysView[str]:
        return self.members if isinstance(self.members, KeysView) else KeysView(self)

    def reconciled(self, keep: Collection[str], moved: Mapping[str, str]) -> TargetDelta:
        """Only the members in `keep`, plus each `moved` new id (a replaced static member) taking its old
        id's target."""
        members = {m: None for m in self.members if m in keep}
        changes = {m: a for m, a in self.changes.items() if m in members}
        for new_id, old_id in moved.items():
            members[new_id] = None
            changes[new_id] = normalised(self[old_id])
        return TargetDelta(self.previous, members.keys(), changes)
