"""A group's assignment as one owner array: 4 bytes per partition instead of Python objects.

Why: a frozenset per member and topic costs tens of bytes per partition, and every assignor call used to
encode all of them into arrays and build all of them back. Here the assignment *is* the array, laid out as
`_layout` numbers partitions (topics sorted by id; partition p of topic t is global index base[t] + p;
owners index `member_ids`, -1 for none). A member's topic -> partitions mapping is derived only when it
is read (`MemberAssignmentView`), so callers pay for the members they look at, not for the group.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from groupcoord.assignors._lazy_view import LazyAssignmentView

IntArray = npt.NDArray[np.int64]
I32Array = npt.NDArray[np.int32]


class CompactAssignment(Mapping[str, Mapping[str, frozenset[int]]]):
    """member id -> its assignment, backed by an owner array. `previous` is the compact assignment this one
    was computed from and `changed` the members whose assignment differs from it (both None when unknown),
    which lets the coordinator write records for those members only."""

    __slots__ = ("_counts", "_index", "_order", "_starts", "base", "changed", "member_ids", "owner", "previous",
                 "topic_ids")

    def __init__(self, member_ids: Sequence[str], topic_ids: Sequence[str], base: IntArray, owner: I32Array,
                 previous: CompactAssignment | None = None, changed: frozenset[str] | None = None) -> None:
        self.member_ids = list(member_ids)
        self.topic_ids = list(topic_ids)
        self.base = base
        self.owner = owner
        self.previous = previous
        self.changed = changed
        self._index: dict[str, int] | None = None
        self._order: I32Array | None = None
        self._starts: list[int] | None = None
        self._counts: list[int] | None = None

    @property
    def index(self) -> dict[str, int]:
        if self._index is None:
            self._index = {m: i for i, m in enumerate(self.member_ids)}
        return self._index

    def counts(self) -> list[int]:
        """Partitions held by each member (by index)."""
        if self._counts is None:
            held = self.owner[self.owner >= 0]
            self._counts = np.bincount(held, minlength=len(self.member_ids)).tolist()
        return self._counts

    def _positions(self) -> tuple[I32Array, list[int]]:
        """Global partitions grouped by owner (ascending within each) and each member's start: one sort,
        then every member's read is a slice."""
        if self._order is None:
            n = len(self.member_ids)
            key = self.owner.astype(np.uint16 if n < 1 << 16 else np.uint32)  # -1 sorts last
            self._order = np.argsort(key, kind="stable").astype(np.int32)  # kept: 4 bytes per partition
            self._starts = [0, *np.cumsum(self.counts()).tolist()]
        assert self._starts is not None
        return self._order, self._starts

    def partitions_of(self, i: int) -> dict[str, frozenset[int]]:
        """Member `i`'s topic -> partitions (topics with none are absent)."""
        order, starts = self._positions()
        glob = order[starts[i]:starts[i + 1]]
        if len(glob) == 0:
            return {}
        topic = np.searchsorted(self.base, glob, side="right") - 1
        local = (glob - self.base[topic]).tolist()
        brk = [0, *(np.flatnonzero(topic[1:] != topic[:-1]) + 1).tolist(), len(glob)]
        tids = self.topic_ids
        tl = topic.tolist()
        return {tids[tl[a]]: frozenset(local[a:b]) for a, b in zip(brk, brk[1:], strict=False)}

    def view(self, member_id: str) -> MemberAssignmentView:
        """A new view each call, never cached here: a cache of views that point back at this object would be a
        reference cycle, and every snapshot (its owner array, its member ids) would then live until the cyclic
        garbage collector ran, which made that collection a pause of tens of milliseconds. Callers that need
        one view per member keep it (`SpecMembers` does)."""
        return MemberAssignmentView(self, self.index[member_id])

    def __getitem__(self, member_id: str) -> MemberAssignmentView:
        if member_id not in self.index:
            raise KeyError(member_id)
        return self.view(member_id)

    def __contains__(self, member_id: object) -> bool:
        return member_id in self.index

    def __iter__(self) -> Iterator[str]:
        return iter(self.member_ids)

    def __len__(self) -> int:
        return len(self.member_ids)

    def __reduce__(self) -> tuple[object, ...]:
        return CompactAssignment, (self.member_ids, self.topic_ids, self.base, self.owner, None, self.changed)


class MemberAssignmentView(LazyAssignmentView):
    """One member's assignment in a `CompactAssignment`, built on first read and kept."""

    __slots__ = ("index", "source")

    def __init__(self, source: CompactAssignment, index: int) -> None:
        super().__init__()
        self.source = source
        self.index = index

    def _build(self) -> dict[str, frozenset[int]]:
        return self.source.partitions_of(self.index)

    def __bool__(self) -> bool:
        return self.source.counts()[self.index] > 0

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, Mapping):
            return self._mapping() == {t: ps for t, ps in other.items() if ps}
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MemberAssignmentView({self._mapping()!r})"

    def __reduce__(self) -> tuple[type, tuple[CompactAssignment, int]]:
        # the source's arrays, pickled once however many of its views go in the same pickle (a GroupSpec
        # sent to an assignor process), rather than a mapping built per member
        return MemberAssignmentView, (self.source, self.index)


def compact_from_mapping(assignment: Mapping[str, Mapping[str, Collection[int]]]) -> CompactAssignment | None:
    """A dict-form assignment as a `CompactAssignment` (topics sorted, each as long as its highest partition
    + 1; members sorted); None when a partition is given to two members or is negative, which one owner
    array cannot say."""
    members = sorted(assignment)
    sizes: dict[str, int] = {}
    for a in assignment.values():
        for t, ps in a.items():
            if ps:
                sizes[t] = max(sizes.get(t, 0), max(ps) + 1)
    topics = sorted(sizes)
    base = np.zeros(len(topics) + 1, dtype=np.int64)
    np.cumsum([sizes[t] for t in topics], out=base[1:])
    start = dict(zip(topics, base.tolist(), strict=False))
    owner = np.full(int(base[-1]), -1, dtype=np.int32)
    claims = 0
    for i, m in enumerate(members):
        for t, ps in assignment[m].items():
            if ps:
                idx = np.fromiter(ps, dtype=np.int64, count=len(ps))
                if idx.min() < 0:
                    return None
                owner[start[t] + idx] = i
                claims += len(set(ps))
    if claims != int(np.count_nonzero(owner >= 0)):
        return None
    return CompactAssignment(members, topics, base, owner)
