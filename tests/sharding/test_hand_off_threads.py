"""A hand-off never queues behind other blocking work of the instance.

The polling thread that serves the coordinators' group waits while partitions are handed off (issue 29: while it
waits, this instance takes part in no rebalance). The hand-off's blocking steps (waiting for the writers'
transactions, closing the writers) ran on asyncio's default thread pool, which the loads share: a partition's
`acquire` (init_transactions) and `load_partition` each hold a thread up to the load timeout, and six stuck loads
fill the pool of a 2-core machine (min(32, cores + 4) threads). A hand-off queued behind them waited, with no
bound, and so did every partition the rebalance meant to move.

Here the default pool of the instance that owns every partition is filled with blocked work, another instance
joins, and the partitions the rebalance moves must be served by the newcomer within a few sessions.
"""

from __future__ import annotations

import asyncio
import threading

from groupcoord.embedded_kafka import EmbeddedKafka

from .conftest import PARTITIONS, STATE_TOPIC, TOPICS, owned, partitions_served, start_instance, wait_for


async def _fill_default_pool(release: threading.Event) -> None:
    """Occupy every thread of the running loop's default executor until `release` is set: it has at most 32
    (`ThreadPoolExecutor`'s default size is min(32, cores + 4)), so 32 blocked calls fill it whatever the machine."""
    loop = asyncio.get_running_loop()
    for _ in range(32):
        loop.run_in_executor(None, release.wait)


def test_a_hand_off_is_not_queued_behind_blocked_work_on_the_default_thread_pool() -> None:
    release = threading.Event()
    with EmbeddedKafka(1, topics={STATE_TOPIC: PARTITIONS, **TOPICS}) as kafka:
        first = start_instance(kafka)
        second = None
        try:
            wait_for(lambda: partitions_served([first]), "the first instance serves every partition")
            first.call(_fill_default_pool(release))
            second = start_instance(kafka)
            wait_for(lambda: partitions_served([first, second]) and bool(owned(second)),
                     "the second instance serves the partitions the rebalance moved to it", timeout_s=15)
        finally:
            release.set()
            for instance in (second, first):
                if instance is not None:
                    instance.stop()
