"""The runtime's part in core tests: a virtual clock and the timers the shard arms, fired in order."""

from __future__ import annotations

import abc
from typing import Any

from groupcoord.coordinator.core.results import CancelTimer, Result, ScheduleTimer, TimerKey
from tests.purity import state_of

PURITY_EVERY_OP_FOR = 300  # the first operations of a scenario, each checked
PURITY_SAMPLE = 50  # then every 50th


class VirtualClock(abc.ABC):
    """Mixed into the test contexts; they provide `shard`, `now`, `records` and `apply(result)`."""

    shard: Any
    now: int
    timers: dict[TimerKey, int]
    records: list[Any]

    _state_after: Any = None  # the shard's state after the last result was applied (None: not taken)
    _applied = 0  # results applied so far

    def record(self, result: Result[Any]) -> None:
        """Apply a result as the runtime does (`shard.apply`), keep its records and arm/cancel its timers. An
        operation's handler must have left the shard as the last apply did: any difference is a mutation
        outside `apply` (tests/purity.py). Walking the whole state costs time in proportion to it (a churn of
        9,000 operations took 18 s instead of 2 s), so after the first `PURITY_EVERY_OP_FOR` operations of a
        scenario only every `PURITY_SAMPLE`-th is checked."""
        if self._state_after is not None and not result.from_log:  # a load changes memory by design
            assert state_of(self.shard) == self._state_after, "a handler changed the shard's state"
        self.shard.apply(result)
        self._applied += 1
        checked = self._applied < PURITY_EVERY_OP_FOR or self._applied % PURITY_SAMPLE == 0
        self._state_after = state_of(self.shard) if checked else None
        self.records.extend(result.records)
        for t in result.timers:
            if isinstance(t, ScheduleTimer):
                self.timers[t.key] = t.deadline_ms
            elif isinstance(t, CancelTimer):
                self.timers.pop(t.key, None)

    @abc.abstractmethod
    def apply(self, result: Result[Any]) -> Any:
        """Route a result the context's way (each context keeps its own extras: runs, parked answers)."""

    def advance(self, ms: int) -> None:
        """Move the virtual clock, firing due timers in deadline order."""
        end = self.now + ms
        while True:
            due = sorted((d, k) for k, d in self.timers.items() if d <= end)
            if not due:
                break
            deadline, key = due[0]
            del self.timers[key]
            self.now = max(self.now, deadline)
            self.apply(self.shard.on_timer(key, self.now))
        self.now = end
