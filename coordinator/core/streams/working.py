"""The group a streams operation works on: the stored group as the operation's own records would leave it,
without changing the stored group (issue 26: handlers are pure).

A streams heartbeat reads what it just decided at every step (the member it updated, the epoch it bumped, the
target it installed, the tasks it reconciled), as Kafka's streamsGroupHeartbeat passes its updated member, new
epoch and new target on as local values. Here those local values are kept in one place: a *working view* of the
group, a copy whose member, assignment and static-member maps are copy-on-write overlays over the stored group's
(`Overlay`), so building it costs nothing however large the group, and the operation's records are applied to the
view as it writes them (`apply_record`, the same code the replay runs). The stored group changes only when
`GroupCoordinatorShard.apply` (or a test's driver) replays the returned records and volatile effects.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import replace
from typing import Generic, TypeVar

from groupcoord.coordinator.core.streams.state import StreamsGroup

K = TypeVar("K")
V = TypeVar("V")


class Overlay(MutableMapping[K, V], Generic[K, V]):
    """A mapping over `base` that keeps its own changes and never writes to `base`. It iterates as the dict
    `base` would after the same changes: kept keys in place, new keys (and keys removed and set again) at the end
    in the order they were set."""

    __slots__ = ("_base", "_set", "_hidden")

    def __init__(self, base: Mapping[K, V]) -> None:
        self._base = base
        self._set: dict[K, V] = {}  # values set here (base keys kept in place, then the rest in order)
        self._hidden: set[K] = set()  # base keys removed here (and, if set again, now in `_set`'s order)

    def __getitem__(self, key: K) -> V:
        if key in self._set:
            return self._set[key]
        if key in self._hidden:
            raise KeyError(key)
        return self._base[key]

    def __contains__(self, key: object) -> bool:
        return key in self._set or key not in self._hidden and key in self._base

    def __setitem__(self, key: K, value: V) -> None:
        self._set[key] = value

    def __delitem__(self, key: K) -> None:
        if key not in self:
            raise KeyError(key)
        self._set.pop(key, None)
        if key in self._base:
            self._hidden.add(key)

    def __iter__(self) -> Iterator[K]:
        base, hidden = self._base, self._hidden
        for key in base:
            if key not in hidden:
                yield key
        for key in self._set:
            if key not in base or key in hidden:
                yield key

    def __len__(self) -> int:
        base, hidden = self._base, self._hidden
        return len(base) - len(hidden) + sum(1 for key in self._set if key not in base or key in hidden)


def working(group: StreamsGroup) -> StreamsGroup:
    """A view of `group` that an operation may change freely: its scalars are copies, its maps overlays."""
    return replace(group, members=Overlay(group.members), static_members=Overlay(group.static_members),
                   current=Overlay(group.current), target=Overlay(group.target),
                   owned_active=Overlay(group.owned_active))
