"""A group's members as the assignor sees them, kept as columns and made into `MemberSpec`s only when read.

Why: the coordinator snapshots a group for every assignor run on the event loop, and with offload the
snapshot is pickled for a worker process. One `MemberSpec` per member, each with its view of the current
target, cost 24 ms to build and 35 ms to pickle for 10,000 members, though no one on the coordinator's side
reads them. Here the snapshot is a list of member ids, their subscriptions (shared frozensets, which pickle
once each), racks and instance ids, plus the target's owner array; a worker builds the specs it reads.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from groupcoord.assignors.api import MemberSpec
from groupcoord.assignors.compact import CompactAssignment

_EMPTY: Mapping[str, frozenset[int]] = {}


class SpecMembers(Mapping[str, MemberSpec]):
    """member id -> `MemberSpec`, whose `assigned_partitions` is `current`'s view of the member (nothing for a
    member `current` lacks)."""

    __slots__ = ("_index", "_specs", "current", "ids", "instance_ids", "rack_ids", "subscriptions")

    def __init__(self, ids: Sequence[str], subscriptions: Sequence[frozenset[str]],
                 rack_ids: Sequence[str | None], instance_ids: Sequence[str | None],
                 current: CompactAssignment | None) -> None:
        self.ids = ids
        self.subscriptions = subscriptions
        self.rack_ids = rack_ids
        self.instance_ids = instance_ids
        self.current = current
        self._index: dict[str, int] | None = None
        self._specs: dict[str, MemberSpec] = {}

    @property
    def index(self) -> dict[str, int]:
        if self._index is None:
            self._index = {m: i for i, m in enumerate(self.ids)}
        return self._index

    def distinct_subscriptions(self) -> list[frozenset[str]]:
        """Each subscription once (members mostly share theirs)."""
        return list({id(s): s for s in self.subscriptions}.values())

    def __getitem__(self, member_id: str) -> MemberSpec:
        spec = self._specs.get(member_id)
        if spec is None:
            i = self.index[member_id]
            current = self.current
            target = current.view(member_id) if current is not None and member_id in current else _EMPTY
            spec = MemberSpec(self.subscriptions[i], target, self.rack_ids[i], self.instance_ids[i])
            self._specs[member_id] = spec
        return spec

    def __contains__(self, member_id: object) -> bool:
        return member_id in self.index

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def __reduce__(self) -> tuple[object, ...]:
        return SpecMembers, (self.ids, self.subscriptions, self.rack_ids, self.instance_ids, self.current)
