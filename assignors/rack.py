"""Rack awareness: prefer partitions with a replica in the member's rack, without touching balance.

Rack matching only reorders partitions among slots that balance has already fixed (which member gets how
many), so it can never make counts or lag worse than the rack-blind result; it trades which partition of
a batch goes where. Fetching from a same-rack replica (KIP-392) saves cross-rack traffic.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from groupcoord.assignors._layout import I32Array, IntArray
from groupcoord.assignors.api import TopicDescriber


class RackInfo:
    """Racks of members and (lazily, per partition) of replicas, over the flat numbering."""

    __slots__ = ("_base", "_cache", "_member_racks", "_topic_ids", "_topics")

    def __init__(
        self,
        member_racks: Sequence[str | None],
        topics: TopicDescriber,
        topic_ids: Sequence[str],
        base: IntArray,
    ) -> None:
        self._member_racks = list(member_racks)
        self._topics = topics
        self._topic_ids = list(topic_ids)
        self._base = base
        self._cache: dict[int, frozenset[str]] = {}

    @staticmethod
    def build(
        member_racks: Sequence[str | None], topics: TopicDescriber, topic_ids: Sequence[str], base: IntArray
    ) -> RackInfo | None:
        """None when no member has a rack: then every assignor skips rack work entirely."""
        if all(r is None for r in member_racks):
            return None
        return RackInfo(member_racks, topics, topic_ids, base)

    def partition_racks(self, g: int) -> frozenset[str]:
        racks = self._cache.get(g)
        if racks is None:
            t = int(np.searchsorted(self._base, g, side="right")) - 1
            racks = self._topics.partition_racks(self._topic_ids[t], g - int(self._base[t]))
            self._cache[g] = racks
        return racks

    def match(self, slots: Sequence[int], parts: Sequence[int]) -> list[int]:
        """Reorder `parts` so slot i (a member) gets a same-rack partition where one is left; the rest keep
        their relative order."""
        by_rack: dict[str, deque[int]] = {}
        for j, g in enumerate(parts):
            for rack in self.partition_racks(g):
                by_rack.setdefault(rack, deque()).append(j)
        if not by_rack:
            return list(parts)
        used = [False] * len(parts)
        out: list[int] = [-1] * len(slots)
        for i, m in enumerate(slots):
            r = self._member_racks[m]
            q = by_rack.get(r) if r is not None else None
            while q and used[q[0]]:
                q.popleft()
            if q:
                j = q.popleft()
                used[j] = True
                out[i] = parts[j]
        rest = (g for j, g in enumerate(parts) if not used[j])
        return [g if g >= 0 else next(rest) for g in out]

    def contiguous_fill(self, incoming: IntArray, members: IntArray, caps: IntArray, owner: I32Array) -> None:
        slots = np.repeat(members, caps)
        ordered = self.match(slots.tolist(), incoming.tolist())
        owner[np.asarray(ordered, dtype=np.int64)] = slots.astype(np.int32)
