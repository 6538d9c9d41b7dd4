"""A background worker under SCHED_IDLE gives the core back every 0.2 ms while it handles a job, and is never
woken while it has none.

Why it matters: with the coordinator and its workers on one core, Linux's EEVDF could pick the worker when the
coordinator used up its slice, and the worker then kept the core until the next tick (4 ms at HZ=250) while
the event loop was ready to run (measured 2-4.6 ms in `bench.heartbeat_bench`). Real worker processes over
the real pool; the count of yields is the worker's own."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from groupcoord.coordinator.runtime import process_pool
from groupcoord.coordinator.runtime.process_pool import ProcessPool, lower_priority, serve_jobs


def burn(cpu_ms: float) -> int:
    """Spend `cpu_ms` of this process's CPU, then say how many times it has yielded so far."""
    start = time.thread_time()
    while (time.thread_time() - start) * 1000 < cpu_ms:
        pass
    return process_pool.yields


def worker(sock: socket.socket, idle_scheduling: bool) -> None:
    lower_priority(0, idle_scheduling)
    serve_jobs(sock, burn)


def answers(idle_scheduling: bool, jobs: list[float]) -> list[int]:
    pool = ProcessPool(1, worker, (idle_scheduling,), ["tests.integration.test_worker_yield"], lambda reason: -1)
    pool.start()
    try:
        got: list[int] = []
        for cpu_ms in jobs:
            done = threading.Event()

            def on_done(outcome: Any, done: threading.Event = done) -> None:
                got.append(outcome)
                done.set()

            pool.loop().call_soon_threadsafe(pool.send, 0, cpu_ms, on_done)
            assert done.wait(30), "the worker did not answer"
            time.sleep(0.2)  # idle between jobs: no timer may wake the worker now
        return got
    finally:
        pool.shutdown()


def test_an_idle_scheduled_worker_yields_the_core_during_a_job_and_never_while_idle() -> None:
    after_burn, after_idle = answers(True, [30.0, 0.0])
    assert after_burn >= 20, f"a job of 30 ms of CPU yielded {after_burn} times (every 0.2 ms: about 150)"
    assert after_idle - after_burn <= 2, "the worker was woken to yield while it had no job"


def test_a_worker_at_normal_scheduling_never_yields() -> None:
    assert answers(False, [10.0]) == [0]
