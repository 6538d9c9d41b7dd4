"""A group's new assignment told as the members' given assignments with the few that changed laid over them.

Why: when one member of 10,000 leaves and one joins, `uniform` changes two members' assignments. Building a
10,000-entry result dict, and a `MemberSpec` with a view per member to fill it, cost most of an offloaded
run; then finding the two changed members meant comparing all 10,000. An `OverlayAssignment` answers every
member, holds only the changed ones, and says which they are (`overrides`).

A members mapping can promise, by construction, that each member's `assigned_partitions` is
`current.view(member)` for the members the group's `current` owner array has, and an empty mapping for the
others: it says so by carrying that very `current` as its attribute `current` (`given_as_views`; the
coordinator's `SpecMembers` does). An assignor need then neither check nor read the members it leaves alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from groupcoord.assignors.api import MemberAssignment, MemberSpec
from groupcoord.assignors.compact import CompactAssignment


def given_as_views(members: Mapping[str, MemberSpec], current: CompactAssignment) -> bool:
    """Whether `members` promises that every member's `assigned_partitions` is `current.view(member)` (an
    empty mapping for a member `current` lacks), by construction: it carries that very `current` as its
    attribute `current`."""
    return getattr(members, "current", None) is current


class OverlayAssignment(Mapping[str, MemberAssignment]):
    """member id -> new assignment: `overrides` for the members whose assignment was rebuilt, the very object
    the member was given (`members[m].assigned_partitions`) for the rest. `order` is `members`' ids in the
    order to iterate them (the order a plain-dict result would have)."""

    __slots__ = ("members", "order", "overrides")

    def __init__(self, members: Mapping[str, MemberSpec], order: Sequence[str],
                 overrides: dict[str, MemberAssignment]) -> None:
        assert len(order) == len(members)
        self.members = members
        self.order = order
        self.overrides = overrides

    def __getitem__(self, member_id: str) -> MemberAssignment:
        got = self.overrides.get(member_id)
        return self.members[member_id].assigned_partitions if got is None else got

    def __contains__(self, member_id: object) -> bool:
        return member_id in self.members

    def __iter__(self) -> Iterator[str]:
        return iter(self.order)

    def __len__(self) -> int:
        return len(self.order)

    def __repr__(self) -> str:
        return f"OverlayAssignment({len(self.order)} members, overrides={self.overrides!r})"
