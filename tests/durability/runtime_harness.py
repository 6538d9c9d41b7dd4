"""A real runtime over a real FileLog in a temporary directory, on a virtual clock, for tests of what reaches
memory and the log: `memory()` and `durable()` give both states as comparable record lists."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.core.snapshot import snapshot_records
from groupcoord.coordinator.runtime.executor import BackgroundExecutor
from groupcoord.coordinator.runtime.log import FileLog
from groupcoord.coordinator.runtime.metrics import CoordinatorMetrics
from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime
from tests.core.context import image_of

START_MS = 1_000_000
CONFIG: dict[str, Any] = {
    "group.consumer.min.session.timeout.ms": 100,
    "group.consumer.session.timeout.ms": 1000,
    "group.consumer.min.heartbeat.interval.ms": 10,
    "group.consumer.heartbeat.interval.ms": 100,
    "group.consumer.assignment.interval.ms": 0,
    "group.consumer.assignor.offload.enable": False,
    "group.streams.min.heartbeat.interval.ms": 10,
    "group.streams.heartbeat.interval.ms": 100,
    "group.streams.min.session.timeout.ms": 100,
    "group.streams.session.timeout.ms": 1000,
    "group.streams.initial.rebalance.delay.ms": 0,
    "group.streams.assignment.interval.ms": 0,
    "group.streams.assignor.offload.enable": False,
}
TOPICS = {"foo": 4, "lines": 4}


def canonical(records: Any) -> list[str]:
    """A state as a sorted list of its records' reprs: equal states, equal lists."""
    return sorted(repr(r) for r in records)


class RuntimeHarness:
    def __init__(self, directory: Path, **config: Any) -> None:
        self.dir = directory
        self.config = BrokerConfig.from_mapping({**CONFIG, **config})
        self.now = [START_MS]
        self.runtime: CoordinatorRuntime | None = None
        self.log: FileLog | None = None
        self._ids = itertools.count(1)

    @property
    def shard(self) -> GroupCoordinatorShard:
        assert self.runtime is not None
        return self.runtime.shard

    async def start(self) -> None:
        """Start (or restart, as a new process would) from what the directory holds."""
        self.log = FileLog(self.dir, fsync="never")
        shard = GroupCoordinatorShard(self.config, lambda: f"m{next(self._ids)}", image_of(TOPICS))
        metrics = CoordinatorMetrics(1)
        self.runtime = CoordinatorRuntime(shard, metrics, BackgroundExecutor(1, metrics), sink=self.log,
                                          clock=lambda: self.now[0])
        await self.runtime.start(self.log.load)
        self._hold_wall_clock()

    async def stop(self) -> None:
        if self.runtime is not None:
            await self.runtime.stop()
        if self.log is not None:
            with contextlib.suppress(OSError, ValueError):  # a log whose descriptor a test closed
                self.log.close()

    def _hold_wall_clock(self) -> None:
        """Timers fire only when the test says (`fire_timers`), never on the wall clock."""
        assert self.runtime is not None
        self.runtime.timers.stop()

    async def submit(self, name: str, fn: Callable[[int], Any], *group_ids: str) -> Any:
        assert self.runtime is not None
        result = await self.runtime.submit(name, fn, tuple(group_ids))
        self._hold_wall_clock()
        return result

    async def fire_timers(self, advance_ms: int) -> None:
        """Advance the clock and run every timer due, as the runtime's wake-up would."""
        assert self.runtime is not None
        self.now[0] += advance_ms
        self.runtime.timers.fire()
        self._hold_wall_clock()
        await self.drain()

    async def drain(self) -> None:
        """Until the queue is empty and every append has completed."""
        assert self.runtime is not None
        for _ in range(1000):
            queue = self.runtime._queue
            if (queue is None or queue.empty()) and self.runtime.image.pending_count() == 0:
                return
            await asyncio.sleep(0.002)
        raise AssertionError("the runtime did not drain")

    def break_log(self) -> None:
        """A real I/O fault: the log file's descriptor is made read-only (it now refers to /dev/null opened for
        reading), so its next write fails with EBADF. The descriptor stays the log's own, so closing the log
        later closes nothing else."""
        assert self.log is not None and self.log._file is not None
        read_only = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(read_only, self.log._file.fileno())
        finally:
            os.close(read_only)

    def memory(self) -> list[str]:
        return canonical(snapshot_records(self.shard))

    def durable(self) -> list[str]:
        """What a fresh process would load from the directory now (read from a copy; nothing is changed)."""
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "log"
            shutil.copytree(self.dir, copy)
            fresh = GroupCoordinatorShard(self.config, lambda: "unused", image_of(TOPICS))
            log = FileLog(copy, fsync="never")
            try:
                log.load(fresh.replay)
            finally:
                log.close()
            return canonical(snapshot_records(fresh))
