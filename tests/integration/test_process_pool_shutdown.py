"""Shutting the background pool down while its workers are still starting.

The coordinator's runtime shuts the pool down from a thread, then its event loop stops. A worker start still in
flight at that moment was left as a pending task on a stopped loop ("Task was destroyed but it is pending",
printed at many tests' teardown), and its process was never joined. Real worker processes on a real loop."""

from __future__ import annotations

import asyncio
import socket
import threading

from groupcoord.coordinator.runtime.process_pool import ProcessPool, serve_jobs


def echo(payload: int) -> int:
    return payload


def worker(sock: socket.socket) -> None:
    serve_jobs(sock, echo)


def test_a_shutdown_during_the_workers_start_leaves_no_pending_task_and_no_process() -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        async def make_pool() -> ProcessPool:  # bound to the running loop, as the coordinator's is
            pool = ProcessPool(2, worker, (), ["tests.integration.test_process_pool_shutdown"], lambda reason: -1)
            pool.loop()
            return pool

        pool = asyncio.run_coroutine_threadsafe(make_pool(), loop).result(10)
        pool.start()
        pool.shutdown()  # at once: both starts are in flight
        pending = asyncio.run_coroutine_threadsafe(_other_tasks(), loop).result(10)
        assert pending == [], pending
        processes = [w.process for w in pool._workers if w.process is not None]
        assert processes, "no worker had begun to start: the shutdown came too early to test anything"
        assert not [p for p in processes if p.is_alive()]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def _other_tasks() -> list[str]:
    current = asyncio.current_task()
    return [repr(t) for t in asyncio.all_tasks() if t is not current and not t.done()]
