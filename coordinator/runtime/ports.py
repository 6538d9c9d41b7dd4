"""The runtime's ports to the outside that every deployment fills differently: where records go (`RecordSink`:
the FileLog, the Kafka log, or `InMemorySink`), where topic metadata comes from (polled by `poll_metadata`),
and the wall clock."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from groupcoord.coordinator.core.errors import CoordinatorError
from groupcoord.coordinator.core.metadata import MetadataImage

log = logging.getLogger("groupcoord.runtime")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class RecordSink(Protocol):
    """Where records go before a response leaves. `append` takes one operation's records (written as a unit)
    and returns None when they are already durable, or an awaitable that completes when they are. It raises
    `RecordTooLargeError`, writing nothing, for an operation its loader could not read back."""

    def append(self, records: list[Any]) -> Awaitable[None] | None: ...


class InMemorySink:
    """Keeps nothing durable: the default until a log is configured (state is lost on restart)."""

    def __init__(self) -> None:
        self.count = 0

    def append(self, records: list[Any]) -> None:
        self.count += len(records)


class MetadataSource(Protocol):
    def snapshot(self) -> MetadataImage: ...


async def poll_metadata(source: MetadataSource, current: Callable[[], MetadataImage],
                        update: Callable[[MetadataImage], Awaitable[Any]], interval_s: float) -> None:
    """Every `interval_s`, hand a changed image to `update` (an operation on the shard's queue)."""
    while True:
        image = source.snapshot()
        if image is not current() and image != current():
            try:
                await update(image)
            except CoordinatorError as e:  # its write (or one before it) failed: the next poll tries again
                log.warning("metadata update not applied: %s", e)
            except Exception:  # a bug: the operation applied nothing; keep polling
                log.exception("metadata update failed")
        await asyncio.sleep(interval_s)
