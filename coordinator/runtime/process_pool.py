"""Assignor worker processes driven from the coordinator's event loop, with no thread of the coordinator's own.

Why not `concurrent.futures.ProcessPoolExecutor`: it sends through a feeder thread and collects through a
management thread, both Python threads of the coordinator. Each run woke them, and each took the GIL from the
event loop while it answered other groups' heartbeats; on a coordinator given one core they also took the
core. It also cannot say which worker runs what, and a large group's rows are kept by one worker
(`run_cache`). Here each worker is a process with a Unix socket to the coordinator; the event loop writes
the jobs (length-prefixed pickles) and reads the outcomes as it reads any socket.

A worker exits when its socket reaches end of file: the coordinator closed it or is gone (even killed with
SIGKILL, which no handler sees). A worker that dies fails the runs it had (the groups retry them), and a new
one takes its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import pickle
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from typing import Any

log = logging.getLogger("groupcoord.executor")

_HEADER = struct.Struct("<Q")
RESPAWN_DELAY_S = 1.0
YIELD_EVERY_S = 0.0002  # a SCHED_IDLE worker yields the core this often during a job (`yield_the_core_often`)
Outcome = Any  # the executor's RunOutcome (this module does not know what a run is)


def lower_priority(niceness: int, idle_scheduling: bool) -> None:
    """Run `niceness` below the coordinator, and under SCHED_IDLE with `idle_scheduling`.

    Why: on a machine whose cores the coordinator's event loop (and whatever shares the machine) already keeps
    busy, a 40 ms assignor run at equal priority time-slices with the heartbeat path, and every other group's
    heartbeats wait for the scheduler during it. Niced, the run takes only the CPU left over; but Linux's EEVDF
    scheduler lets a running niced task finish its slice before a waking event loop gets the core, so
    heartbeats still wait a millisecond or more behind it. A SCHED_IDLE task is preempted at once."""
    if niceness:
        os.nice(niceness)
    if idle_scheduling and hasattr(os, "SCHED_IDLE"):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        yield_the_core_often()


_yield_every_s = 0.0  # this worker's `yield_the_core_often` period while it handles a job; 0: never
yields = 0  # how many times this worker gave the core back (for tests)


def _yield_core(signum: int, frame: object) -> None:
    global yields
    yields += 1
    os.sched_yield()


def yield_the_core_often(every_s: float = YIELD_EVERY_S) -> None:
    """While this worker handles a job, give the core back every `every_s` (`sched_yield` from a SIGALRM
    handler; the timer runs only during jobs, so an idle worker is never woken).

    Why: SCHED_IDLE stops a waking worker from preempting the coordinator, but not the scheduler from picking
    the worker when the coordinator, still running, has used up its slice: Linux's EEVDF picks the eligible
    task, and a worker that slept is. The worker then keeps the core until the next scheduler tick (4 ms at
    HZ=250) while the coordinator is ready to run: measured in the coordinator, 2-4.6 ms of the event loop
    waiting, right after it sent a run. A timer on CPU time cannot help (it too fires only at ticks); a
    high-resolution real-time one can. A yield with nobody waiting for the core costs one system call."""
    global _yield_every_s
    if not hasattr(signal, "setitimer") or every_s <= 0:
        return
    signal.signal(signal.SIGALRM, _yield_core)
    _yield_every_s = every_s


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def serve_jobs(sock: socket.socket, handle: Callable[[Any], Any]) -> None:
    """The worker's loop: read a job, answer `(job id, handle(job))`, until end of file."""
    with sock:
        while True:
            header = _recv_exactly(sock, _HEADER.size)
            if header is None:
                return
            body = _recv_exactly(sock, _HEADER.unpack(header)[0])
            if body is None:
                return
            every = _yield_every_s
            if every:
                signal.setitimer(signal.ITIMER_REAL, every, every)
            try:
                job_id, payload = pickle.loads(body)
                answer = pickle.dumps((job_id, handle(payload)), protocol=pickle.HIGHEST_PROTOCOL)
            finally:
                if every:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            sock.sendall(_HEADER.pack(len(answer)) + answer)


class _Frames(asyncio.Protocol):
    """The coordinator's end of one worker's socket: length-prefixed pickles in, whole frames out."""

    def __init__(self, on_frame: Callable[[bytes], None], on_lost: Callable[[], None]) -> None:
        self._buffer = bytearray()
        self._on_frame = on_frame
        self._on_lost = on_lost

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        while len(buffer) >= _HEADER.size:
            size = _HEADER.unpack_from(buffer)[0]
            end = _HEADER.size + size
            if len(buffer) < end:
                return
            frame = bytes(buffer[_HEADER.size:end])
            del buffer[:end]
            self._on_frame(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost()


@dataclass(eq=False)
class _Worker:
    index: int
    process: BaseProcess | None = None
    transport: asyncio.Transport | None = None
    state: str = "down"  # down -> starting -> up -> down (died or closed)
    queued: list[bytes] = field(default_factory=list)  # frames written once it is up
    inflight: dict[int, Callable[[Outcome], None]] = field(default_factory=dict)


class ProcessPool:
    """`workers` processes, each running `target(socket, *target_args)` (a module-level function of the
    forkserver's preloaded modules that serves jobs). `send` runs on the pool's event loop: the running loop
    of whoever first called `start` or `loop` (the coordinator's), or a private one on a thread of its own
    when there is none (tools and tests). `start`, `pids` and `shutdown` may be called from any thread."""

    def __init__(self, workers: int, target: Callable[..., None], target_args: tuple[Any, ...],
                 preload: list[str], failure: Callable[[str], Outcome],
                 on_worker_lost: Callable[[int], None] = lambda index: None) -> None:
        self._workers = [_Worker(i) for i in range(workers)]
        self._target = target
        self._target_args = target_args
        self._failure = failure  # the outcome a run gets when its worker died
        self._on_worker_lost = on_worker_lost
        self._job_ids = iter(range(1, 1 << 62))
        self._closing = False
        self._starting: set[asyncio.Future[None]] = set()  # workers being started; shutdown waits for them
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        # forkserver: children are forked from a clean single-threaded server that imported the assignors once,
        # never from this process with its gRPC threads (fork would copy their locks mid-use).
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(preload)

    @property
    def size(self) -> int:
        return len(self._workers)

    def loop(self) -> asyncio.AbstractEventLoop:
        """The pool's loop, bound on first use: the caller's running loop, or a private one."""
        if self._loop is None:
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=loop.run_forever, name="groupcoord-background-io",
                                                daemon=True)
                self._thread.start()
                self._loop = loop
        return self._loop

    def on_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.loop()
        except RuntimeError:
            return False

    def start(self) -> None:
        """Start every worker now (on the pool's loop), so the first run does not wait for one."""
        loop = self.loop()
        def spawn_all() -> None:
            for w in self._workers:
                if w.state == "down":
                    self._spawn(w)

        loop.call_soon_threadsafe(spawn_all)

    def pick(self) -> int:
        """The worker with the fewest runs in flight (a live one first)."""
        return min(self._workers, key=lambda w: (w.state == "down", len(w.inflight))).index

    def send(self, index: int, payload: Any, done: Callable[[Outcome], None]) -> None:
        """Run `payload` on worker `index`; `done(outcome)` is called on the loop. On the pool's loop only."""
        worker = self._workers[index]
        if self._closing:
            done(self._failure("background executor: shut down"))
            return
        try:
            job_id = next(self._job_ids)
            body = pickle.dumps((job_id, payload), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # a run that does not pickle fails as a run, never the loop
            done(self._failure(f"background executor: {type(e).__name__}"))
            return
        worker.inflight[job_id] = done
        frame = _HEADER.pack(len(body)) + body
        if worker.state == "up" and worker.transport is not None:
            worker.transport.write(frame)
            return
        worker.queued.append(frame)
        if worker.state == "down":
            self._spawn(worker)

    def _spawn(self, worker: _Worker) -> None:
        worker.state = "starting"
        starting = asyncio.ensure_future(self._start(worker), loop=self.loop())
        self._starting.add(starting)
        starting.add_done_callback(self._starting.discard)

    async def _start(self, worker: _Worker) -> None:
        ours, theirs = socket.socketpair()
        try:
            process = self._context.Process(target=self._target, args=(theirs, *self._target_args),
                                            name=f"groupcoord-background-{worker.index}", daemon=True)
            # starting talks to the forkserver (and starts it the first time): not on the event loop
            await asyncio.to_thread(process.start)
            theirs.close()
            ours.setblocking(False)
            transport, _ = await self.loop().create_unix_connection(
                lambda: _Frames(lambda frame: self._on_frame(worker, frame), lambda: self._on_lost(worker)),
                sock=ours)
        except Exception as e:
            theirs.close()
            ours.close()
            worker.state = "down"
            if self._closing:  # shut down while it started (its loop may be closed already): nothing is lost
                log.debug("background worker %d not started: shutting down (%r)", worker.index, e)
                return
            log.error("starting background worker %d failed: %r", worker.index, e)
            self._fail(worker, f"background executor: {type(e).__name__}")
            return
        worker.process = process
        if self._closing:
            transport.close()
            return
        worker.transport = transport  # type: ignore[assignment]
        worker.state = "up"
        for frame in worker.queued:
            transport.write(frame)  # type: ignore[attr-defined]
        worker.queued.clear()

    def _on_frame(self, worker: _Worker, frame: bytes) -> None:
        job_id, outcome = pickle.loads(frame)
        done = worker.inflight.pop(job_id, None)
        if done is not None:
            done(outcome)

    def _on_lost(self, worker: _Worker) -> None:
        worker.state, worker.transport = "down", None
        if self._closing:
            return
        log.error("background worker %d (pid %s) exited; starting another", worker.index,
                  worker.process.pid if worker.process is not None else "?")
        self._on_worker_lost(worker.index)
        self._fail(worker, "background executor: the worker process exited")
        # Another in a second (sooner if a run is sent to it): a worker that dies as it starts must not make
        # the coordinator fork in a loop.
        self.loop().call_later(RESPAWN_DELAY_S, lambda: self._spawn(worker) if worker.state == "down"
                               and not self._closing else None)

    def _fail(self, worker: _Worker, reason: str) -> None:
        inflight, worker.inflight = worker.inflight, {}
        worker.queued.clear()
        for done in inflight.values():
            done(self._failure(reason))

    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w.process is not None and w.process.pid is not None
                and w.state == "up"]

    def shutdown(self, timeout: float = 5.0) -> None:
        """Close every worker's socket (they exit at end of file) and wait for them; any thread."""
        loop = self._loop
        if loop is None:
            return
        self._closing = True

        def close() -> None:
            for w in self._workers:
                if w.transport is not None:
                    w.transport.close()
                self._fail(w, "background executor: shut down")

        async def close_and_settle() -> None:
            close()
            # A worker still starting finishes its start (and sees `_closing`) before the loop may stop: a
            # start cut off with the loop left its process unjoined and its task "destroyed but pending".
            if self._starting:
                await asyncio.wait(set(self._starting), timeout=timeout)

        if self.on_loop():
            close()
        else:
            with contextlib.suppress(RuntimeError, TimeoutError):  # the loop is closed already, or is stuck
                asyncio.run_coroutine_threadsafe(close_and_settle(), loop).result(timeout + 1)
        deadline = time.monotonic() + timeout
        for w in self._workers:
            if w.process is not None and w.process.pid is not None:
                w.process.join(max(0.0, deadline - time.monotonic()))
                if w.process.is_alive():
                    w.process.kill()
                    w.process.join(1.0)
        if self._thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout)

