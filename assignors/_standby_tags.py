"""Tag-aware standby placement for the streams task assignor, as Kafka's `RackAwareStandbyPicker`
(group.streams.rack.aware.assignment.tags, KIP-1071's port of Kafka Streams' client-tag-aware standbys).

The tag keys are in priority order. For one task, a standby goes to an eligible process whose value for the
highest-priority key is not yet carried by a holder of the task; among those, the one whose values for the
lower-priority keys are new to the task on the most significant keys wins (a diversity vector compared
lexicographically), then the caller's tie-break. When no eligible process has a new value for the key, the
key is given up and the search repeats with the next one. Once every key is given up no process can make
the task more diverse, and the caller's tag-blind pass places what is left.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence


class TagPicker:
    """One instance per assignment. Per task: `start_task()`, `mark_used(active's process)`, then per standby
    `pick(eligible, rank)` and `mark_used(winner)`."""

    def __init__(self, keys: Sequence[str], processes: Sequence[str], tags: Mapping[str, Mapping[str, str]]) -> None:
        self.keys = list(keys)
        self.tags = tags
        self.all = list(processes)  # group order: sorted process ids
        self.used: list[set[str]] = [set() for _ in self.keys]
        self.priority = 0
        self.candidates = self.all

    def start_task(self) -> None:
        for values in self.used:
            values.clear()
        self.priority = 0
        self.candidates = self.all

    def mark_used(self, process: str) -> None:
        tags = self.tags.get(process, {})
        for i, key in enumerate(self.keys):
            value = tags.get(key)
            if value is not None:
                self.used[i].add(value)

    def _new(self, process: str, i: int) -> bool:
        value = self.tags.get(process, {}).get(self.keys[i])
        return value is not None and value not in self.used[i]

    def _diversity(self, process: str) -> tuple[bool, ...]:
        """One entry per lower-priority key, False (sorting first) where the value is new to the task."""
        return tuple(not self._new(process, i) for i in range(self.priority + 1, len(self.keys)))

    def pick(self, eligible: Callable[[str], bool], rank: Callable[[str], tuple[object, ...]]) -> str | None:
        """The process for the next standby, or None once no process can make the task more diverse."""
        while self.priority < len(self.keys):
            survivors = [p for p in self.candidates if self._new(p, self.priority) and eligible(p)]
            if not survivors:
                self.priority += 1
                self.candidates = self.all
                continue
            # A process the filter dropped stays out while this key is the priority: used values only grow and
            # a holder stays a holder, so the survivors are the pool for the task's next standby.
            self.candidates = survivors
            scored = [(self._diversity(p), p) for p in survivors]
            best = min(d for d, _ in scored)
            return min((p for d, p in scored if d == best), key=lambda p: (rank(p), p))
        return None
