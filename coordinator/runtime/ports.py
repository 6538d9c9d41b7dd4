"""The runtime's ports to the outside that every deployment fills differently: where records go (`RecordSink`:
the FileLog, the Kafka log, or `InMemorySink`), where topic metadata comes from, and the wall clock."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any, Protocol

from groupcoord.coordinator.core.metadata import MetadataImage


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
