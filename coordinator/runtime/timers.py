"""Timers the core asks for, kept so that re-arming is nearly free.

Every heartbeat re-arms its member's session timer. A key keeps at most one heap entry: re-arming to a
later deadline only updates a dict; when the stale entry surfaces it is pushed back at the newer deadline.
So the heartbeat hot path costs a dict write, not a heap push.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Hashable


class TimerQueue:
    def __init__(self) -> None:
        self._deadline: dict[Hashable, int] = {}  # key -> wanted deadline
        self._in_heap: dict[Hashable, int] = {}  # key -> earliest deadline of its heap entry
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._deadline)

    def schedule(self, key: Hashable, deadline: int) -> bool:
        """Arm `key` at `deadline` (replacing any earlier arming). True if the earliest deadline moved earlier."""
        self._deadline[key] = deadline
        heap_deadline = self._in_heap.get(key)
        if heap_deadline is not None and heap_deadline <= deadline:
            return False
        self._in_heap[key] = deadline
        earliest = self._heap[0][0] if self._heap else None
        heapq.heappush(self._heap, (deadline, next(self._seq), key))
        return earliest is None or deadline < earliest

    def cancel(self, key: Hashable) -> None:
        self._deadline.pop(key, None)

    def next_deadline(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: int) -> list[Hashable]:
        """Keys whose deadline is <= now, in deadline order; they are disarmed."""
        due: list[Hashable] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            deadline, _, key = heapq.heappop(heap)
            if self._in_heap.get(key) == deadline:
                del self._in_heap[key]
            wanted = self._deadline.get(key)
            if wanted is None:
                continue
            if wanted > deadline:
                if key not in self._in_heap:
                    self._in_heap[key] = wanted
                    heapq.heappush(heap, (wanted, next(self._seq), key))
                continue
            del self._deadline[key]
            due.append(key)
        return due


class LoopTimers(TimerQueue):
    """The runtime's timers on an event loop: one `call_later` for the earliest deadline, re-armed only when
    that deadline moves earlier; `on_due(key)` gets each key whose deadline has passed."""

    def __init__(self, clock: Callable[[], int], on_due: Callable[[Hashable], None]) -> None:
        super().__init__()
        self.clock = clock
        self.on_due = on_due
        self.loop: asyncio.AbstractEventLoop | None = None  # set when the runtime starts
        self.handle: asyncio.TimerHandle | None = None
        self._handle_at: int | None = None

    def arm(self, key: Hashable, deadline: int) -> None:
        if self.schedule(key, deadline) or self.handle is None:
            self.wake_up()

    def wake_up(self) -> None:
        """Make sure the loop wakes at the earliest deadline."""
        assert self.loop is not None
        deadline = self.next_deadline()
        if deadline is None or (self.handle is not None and self._handle_at is not None
                                and self._handle_at <= deadline):
            return
        if self.handle is not None:
            self.handle.cancel()
        self._handle_at = deadline
        self.handle = self.loop.call_later(max(0.0, (deadline - self.clock()) / 1000.0), self.fire)

    def fire(self) -> None:
        self.handle = None
        self._handle_at = None
        for key in self.pop_due(self.clock()):
            self.on_due(key)
        self.wake_up()

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        self.handle = self._handle_at = None
