"""What the metrics collector counts of the shard: groups by (type, state), members, and the core's stats."""

from __future__ import annotations

import asyncio
from typing import Any

from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime


def shard_counts(runtime: CoordinatorRuntime) -> dict[str, Any]:
    """Called from the scrape thread: it reads the shard on the event loop, so it never iterates a dict the loop
    is changing."""
    loop = runtime._loop
    if loop is not None and loop.is_running():
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not loop:
            async def on_loop() -> dict[str, Any]:
                return _count(runtime)

            return asyncio.run_coroutine_threadsafe(on_loop(), loop).result(timeout=10)
    return _count(runtime)


def _count(runtime: CoordinatorRuntime) -> dict[str, Any]:
    groups: dict[tuple[str, str], int] = {}
    members = 0
    for group in list(runtime.shard.groups.values()):  # every type, streams groups too
        listed = group.listed()
        key = (listed.group_type, listed.group_state)
        members += group.member_count()
        groups[key] = groups.get(key, 0) + 1
    return {"groups": groups, "members": members, "stats": runtime.shard.stats}
