"""Tag-aware standby placement for the streams task assignor, as Kafka's `RackAwareStandbyPicker`
(group.streams.rack.aware.assignment.tags, KIP-1071's port of Kafka Streams' client-tag-aware standbys).

The tag keys are in priority order. For one task, a standby goes to an eligible process whose value for the
highest-priority key is not yet carried by a holder of the task; among those, the one whose values for the
lower-priority keys are new to the task on the most significant keys wins (a diversity vector compared
lexicographically), then the caller's tie-break: a previous holder of the task (by its rank), then the least
loaded, then the process id. When no eligible process has a new value for the key, the key is given up and
the search repeats with the next one. Once every key is given up no process can make the task more diverse,
and the caller's tag-blind pass places what is left.

Processes with the same values for every key are interchangeable for diversity (Kafka's IdenticalTagGroups):
the picker works on those groups, each with a heap of its processes by load, so one pick costs the number of
groups, not the number of processes. Eligible means: not holding the task, and with room (a member below the
per-member quota); a process without room never gets it back within an assignment, so it leaves its heap.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence

Group = tuple[str | None, ...]  # the process's value for each key (None: it has no such tag)
NOT_PREVIOUS = 1 << 30


class TagPicker:
    """One instance per assignment. Per task: `start_task()`, `mark_used(active's process)`, then per standby
    `pick(holds, previous)` and `mark_used(winner)`."""

    def __init__(self, keys: Sequence[str], processes: Sequence[str], tags: Mapping[str, Mapping[str, str]],
                 load: Callable[[str], float], has_room: Callable[[str], bool]) -> None:
        self.keys = list(keys)
        self.load, self.has_room = load, has_room
        self.group_of: dict[str, Group] = {p: tuple(tags.get(p, {}).get(k) for k in self.keys) for p in processes}
        members: dict[Group, list[tuple[float, str]]] = {}
        for p in processes:
            members.setdefault(self.group_of[p], []).append((load(p), p))
        self.groups = sorted(members, key=lambda g: tuple((v is None, v or "") for v in g))
        self.heaps = members
        for heap in self.heaps.values():
            heapq.heapify(heap)
        self.used: list[set[str]] = [set() for _ in self.keys]
        self.priority = 0
        self.candidates = self.groups

    def start_task(self) -> None:
        for values in self.used:
            values.clear()
        self.priority = 0
        self.candidates = self.groups

    def mark_used(self, process: str) -> None:
        for i, value in enumerate(self.group_of[process]):
            if value is not None:
                self.used[i].add(value)

    def _new(self, group: Group, i: int) -> bool:
        return group[i] is not None and group[i] not in self.used[i]

    def _diversity(self, group: Group) -> tuple[bool, ...]:
        """One entry per lower-priority key, False (sorting first) where the value is new to the task."""
        return tuple(not self._new(group, i) for i in range(self.priority + 1, len(self.keys)))

    def _best(self, group: Group, holds: Callable[[str], bool],
              previous: Mapping[str, int]) -> tuple[int, float, str] | None:
        """The group's eligible process that the tie-break prefers, as (previous rank, load, process id)."""
        best: tuple[int, float, str] | None = None
        for p, rank in previous.items():
            if self.group_of.get(p) == group and not holds(p) and self.has_room(p):
                cand = (rank, self.load(p), p)
                best = cand if best is None or cand < best else best
        if best is not None:
            return best
        heap, aside = self.heaps[group], []
        while heap:
            load, p = heap[0]
            if not self.has_room(p):
                heapq.heappop(heap)  # full for the rest of this assignment
            elif self.load(p) != load:
                heapq.heapreplace(heap, (self.load(p), p))  # stale entry
            elif holds(p):
                aside.append(heapq.heappop(heap))
            else:
                best = (NOT_PREVIOUS, load, p)
                break
        for entry in aside:
            heapq.heappush(heap, entry)
        return best

    def pick(self, holds: Callable[[str], bool], previous: Mapping[str, int]) -> str | None:
        """The process for the next standby, or None once no process can make the task more diverse.
        `holds(p)`: p holds the task already; `previous`: the task's previous holders' processes by rank."""
        while self.priority < len(self.keys):
            survivors = []
            for group in self.candidates:
                if self._new(group, self.priority):
                    best = self._best(group, holds, previous)
                    if best is not None:
                        survivors.append((group, best))
            if not survivors:
                self.priority += 1
                self.candidates = self.groups
                continue
            # A group the filter dropped stays out while this key is the priority: used values only grow and
            # eligibility only shrinks, so the survivors are the pool for the task's next standby.
            self.candidates = [g for g, _ in survivors]
            scored = [(self._diversity(g), best) for g, best in survivors]
            top = min(d for d, _ in scored)
            return min(best for d, best in scored if d == top)[2]
        return None
