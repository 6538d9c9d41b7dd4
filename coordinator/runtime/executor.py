"""The background executor: offloaded assignor runs (KIP-1263) and regex resolutions, with its metrics.

`group.coordinator.background.threads` workers. Assignors are pure functions of immutable snapshots, so a
run needs no lock and cannot corrupt coordinator state; its result goes back through the event queue.

`group.coordinator.background.executor` says where the workers are. `process` (the default): worker
processes forked from a forkserver started with the coordinator (`process_pool`, driven from the event loop
with no thread of its own), so an assignor run on a large group holds another interpreter's GIL, never the
one answering heartbeats. A run crosses as a small pickle (`compact_run`: the spec, and only the subscribed
topics' partition counts and racks rather than the whole metadata image), a large group's as only what
changed since its worker's copy (`run_cache`); the assignment comes back as the changed members, or in
chunks the coordinator loads with the event loop running in between. The child times its own start and
run, so the background-* metrics stay true. The workers run `group.coordinator.background.niceness` below
the coordinator's CPU priority, under SCHED_IDLE by default (`group.coordinator.background.idle.scheduling`),
so a run never competes with the heartbeat path for a core. `thread`: threads of this process (no start-up
cost; for tests and small deployments).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import pickle
import socket
import time
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from groupcoord.assignors.api import (
    AssignorError,
    GroupAssignment,
    GroupSpec,
    LagSnapshot,
    MemberAssignment,
    StaticTopicDescriber,
    TopicDescriber,
)
from groupcoord.assignors.compact import CompactAssignment
from groupcoord.assignors.registry import get_server_assignor, server_assignor_names
from groupcoord.coordinator.core.consumer.spec_members import SpecMembers
from groupcoord.coordinator.core.consumer.target_delta import TargetDelta, as_delta, assignment_changes
from groupcoord.coordinator.core.consumer.topic_regex import (
    RegexResolution,
    RegexResolutionCompletion,
    resolve_topic_regexes,
)
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion, AssignorRun
from groupcoord.coordinator.runtime.metrics import CoordinatorMetrics
from groupcoord.coordinator.runtime.process_pool import ProcessPool, lower_priority, serve_jobs
from groupcoord.coordinator.runtime.run_cache import CACHE_MISS, CacheMiss, Holdings, Keep, RunCache, keep_for
from groupcoord.coordinator.runtime.sliced_run import SlicedRun, slicing, to_the_end, unslice

log = logging.getLogger("groupcoord.executor")


REGEX_SLICE_NAMES = 256  # topic names matched per slice; the worker yields the GIL between slices


def resolve_in_slices(task: RegexResolution) -> RegexResolutionCompletion:
    """`task.run()`, a slice of topic names at a time, yielding the GIL between slices: matching thousands of
    names is pure CPU in this thread, and without yielding it holds the GIL for up to the switch interval
    (5 ms) at a time, which the event loop, answering heartbeats, would wait for."""
    found: dict[str, set[str]] = {regex: set() for regex in task.regexes}
    names = task.topic_names
    for start in range(0, max(len(names), 1), REGEX_SLICE_NAMES):
        for regex, topics in resolve_topic_regexes(task.regexes, names[start:start + REGEX_SLICE_NAMES]).items():
            found[regex].update(topics)
        time.sleep(0)
    return RegexResolutionCompletion(task.group_id, task.run_id, {r: frozenset(t) for r, t in found.items()})


@dataclass(frozen=True, slots=True)
class CompactRun:
    """What crosses to a worker process: the assignor's inputs and nothing else of the coordinator."""

    assignor_name: str
    spec: GroupSpec
    topics: StaticTopicDescriber
    lag: LagSnapshot | None


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What comes back: the assignment or the failure, and when (monotonic, shared by every process on the
    machine) the run started and how long it took, for the background-* metrics."""

    assignment: GroupAssignment | None
    error: str | None
    started: float
    elapsed: float
    chunks: tuple[bytes, ...] = ()  # from a process: the assignment as pickles of a few hundred members each
    changes: dict[str, dict[str, frozenset[int]]] | None = None  # or only the members it changed (`TargetDelta`)


def compact_run(run: AssignorRun) -> CompactRun:
    """Only the subscribed topics' metadata: the image can describe thousands of topics the group ignores."""
    subscribed: set[str] = set()
    members = run.spec.members
    for topic_ids in (members.distinct_subscriptions() if isinstance(members, SpecMembers)
                      else (m.subscribed_topic_ids for m in members.values())):
        subscribed.update(topic_ids)
    counts: dict[str, int] = {}
    racks: dict[str, tuple[frozenset[str], ...]] = {}
    for topic_id in subscribed:
        count = run.topics.partition_count(topic_id)
        if count < 0:
            continue
        counts[topic_id] = count
        if isinstance(run.topics, MetadataImage):  # the image has them as a tuple already (often empty)
            topic_racks = run.topics.by_id[topic_id].partition_racks[:count]
        else:
            topic_racks = tuple(run.topics.partition_racks(topic_id, p) for p in range(count))
        if any(topic_racks):
            racks[topic_id] = topic_racks
    return CompactRun(run.assignor_name, run.spec, StaticTopicDescriber(counts, racks), run.lag)


def run_assignor(name: str, spec: GroupSpec, topics: TopicDescriber, lag: LagSnapshot | None) -> RunOutcome:
    """One assignor run, timed; failures are values (a bug in an assignor must not kill the worker)."""
    started = time.monotonic()
    try:
        assignment: GroupAssignment | None = get_server_assignor(name).assign(spec, topics, lag)
        error = None
    except (AssignorError, ValueError, KeyError) as e:
        assignment, error = None, str(e)
    except Exception as e:
        log.exception("assignor %s crashed", name)
        assignment, error = None, f"{type(e).__name__}: {e}"
    return RunOutcome(assignment, error, started, time.monotonic() - started)


RESULT_CHUNK_MEMBERS = 512


def run_compact(run: CompactRun) -> RunOutcome:
    """The worker process's entry point. The assignment goes back in chunks: unpickling frozensets is C code
    that holds the GIL throughout (50 ms for 10,000 members on a loaded machine), so the coordinator loads
    one chunk at a time and lets the event loop run in between (`loading`)."""
    outcome = run_assignor(run.assignor_name, run.spec, run.topics, run.lag)
    if outcome.assignment is None:
        return outcome
    changes = assignment_changes(run.spec, outcome.assignment)
    if changes is not None:  # the coordinator has the rest: the snapshot it sent
        return RunOutcome(None, None, outcome.started, outcome.elapsed, changes=changes)
    if isinstance(outcome.assignment, CompactAssignment):  # arrays: one small pickle, no frozensets to load
        return RunOutcome(None, None, outcome.started, outcome.elapsed, (pickle.dumps(outcome.assignment),))
    items = list(outcome.assignment.items())
    chunks = tuple(pickle.dumps(dict(items[i:i + RESULT_CHUNK_MEMBERS]), protocol=pickle.HIGHEST_PROTOCOL)
                   for i in range(0, len(items), RESULT_CHUNK_MEMBERS))
    return RunOutcome(None, None, outcome.started, outcome.elapsed, chunks)


def run_sliced(run: SlicedRun | CompactRun) -> RunOutcome:
    """The worker process's entry point: the run put back together if it came in slices (`slice_run`)."""
    return run_compact(unslice(run) if isinstance(run, SlicedRun) else run)


def loading(outcome: RunOutcome, run: AssignorRun) -> Generator[None, None, RunOutcome]:
    """A worker's outcome with its assignment loaded (on the coordinator's side): only the changed members
    when the worker sent those, over the snapshot `run` was given. Yields between chunks of frozensets
    (unpickling one is C code that holds the GIL throughout), so its driver decides what runs in between."""
    if outcome.changes is not None and run.spec.current is not None:
        return RunOutcome(TargetDelta.over(run.spec, outcome.changes), None, outcome.started, outcome.elapsed)
    if not outcome.chunks:
        return outcome
    assignment: dict[str, MemberAssignment] = {}
    for i, chunk in enumerate(outcome.chunks):
        if i:
            yield
        loaded = pickle.loads(chunk)
        if isinstance(loaded, CompactAssignment):  # arrays: always the one chunk
            return RunOutcome(loaded, None, outcome.started, outcome.elapsed)
        assignment.update(loaded)
    return RunOutcome(assignment, None, outcome.started, outcome.elapsed)


def load_outcome(outcome: RunOutcome, run: AssignorRun) -> RunOutcome:
    """`loading` driven to its end at once."""
    return to_the_end(loading(outcome, run))


_RUN_CACHE = RunCache()  # a worker process's kept groups (`run_cache`)


def handle_job(job: tuple[tuple[str, ...], object]) -> RunOutcome:
    """A worker process's answer to one job: (groups to drop, the run as sent)."""
    evict, body = job
    _RUN_CACHE.evict(evict)
    try:
        run = _RUN_CACHE.resolve(body)
    except CacheMiss:
        return RunOutcome(None, CACHE_MISS, time.monotonic(), 0.0)
    except Exception as e:  # a payload that does not load fails as a run, never the worker
        log.exception("loading an assignor run failed")
        return RunOutcome(None, f"background executor: {type(e).__name__}", time.monotonic(), 0.0)
    assert isinstance(run, CompactRun)
    return run_compact(run)


def worker_main(sock: socket.socket, niceness: int, idle_scheduling: bool) -> None:
    """A worker process: lower its priority, import the assignors now (not in the first run), serve jobs
    until the coordinator closes the socket or is gone."""
    lower_priority(niceness, idle_scheduling)
    server_assignor_names()
    serve_jobs(sock, handle_job)


def _failed(reason: str) -> RunOutcome:
    return RunOutcome(None, reason, time.monotonic(), 0.0)


class _Stepper:
    """`BackgroundExecutor._stepwise`'s driver. An object rather than a closure that schedules itself: such a
    closure holds itself through its own cell, a reference cycle that kept each run's snapshot (10,000 rows)
    alive until the cyclic garbage collector ran, and made that collection a pause of tens of milliseconds."""

    __slots__ = ("done", "finish", "loop", "run", "steps", "what")

    def __init__(self, loop: asyncio.AbstractEventLoop, steps: Generator[None, None, Any],
                 done: Callable[[Any], None], run: AssignorRun, what: str,
                 finish: Callable[[RunOutcome], None]) -> None:
        self.loop, self.steps, self.done, self.run, self.what, self.finish = loop, steps, done, run, what, finish

    def __call__(self) -> None:
        try:
            next(self.steps)
        except StopIteration as stop:
            self.done(stop.value)
            return
        except Exception as e:
            log.error("%s the run of assignor %s for group %s failed: %r", self.what, self.run.assignor_name,
                      self.run.group_id, e)
            self.finish(_failed(f"background executor: {type(e).__name__}"))
            return
        self.loop.call_soon(self)


class BackgroundExecutor:
    def __init__(self, threads: int, metrics: CoordinatorMetrics, mode: str = "thread", niceness: int = 0,
                 idle_scheduling: bool = False) -> None:
        self._threads = threads
        self._metrics = metrics
        self.mode = mode
        self._pool: ThreadPoolExecutor | None = None
        self._processes: ProcessPool | None = None
        self._holdings = Holdings(threads)
        self.runs_sent_whole = 0  # runs that crossed to a worker process whole, and as changes (`run_cache`)
        self.runs_sent_as_changes = 0
        if mode == "thread":
            self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="groupcoord-background")
        else:
            self._processes = ProcessPool(
                threads, worker_main, (niceness, idle_scheduling),
                ["groupcoord.assignors.registry", "groupcoord.coordinator.runtime.executor"], _failed,
                on_worker_lost=self._holdings.forget_worker)
        # Regex resolutions get one worker of their own: a flood of new patterns then queues there instead of
        # taking every background thread (and more of the GIL) from assignors and the event loop.
        self._regex_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="groupcoord-regex")
        # Self-contained calls (streams assignor runs) are closures, which a process cannot be sent: threads.
        self._call_pool = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="groupcoord-background-call")

    def start(self) -> None:
        """Start the worker processes now, so the first run does not pay for them. Called on the coordinator's
        event loop, it binds the processes' I/O to that loop."""
        if self._processes is not None:
            self._processes.start()

    def worker_pids(self) -> list[int]:
        """The live worker processes (none with threads)."""
        return self._processes.pids() if self._processes is not None else []

    def submit(self, run: AssignorRun, done: Callable[[AssignorCompletion], None]) -> None:
        """Run the assignor on a worker; `done` is called with the completion (on the event loop with
        processes, on a worker thread with threads)."""
        submitted = time.monotonic()

        def finish(outcome: RunOutcome) -> None:
            self._metrics.background_queue_time.record(max(0.0, outcome.started - submitted) * 1000)
            self._metrics.background_processing_time.record(outcome.elapsed * 1000)
            self._metrics.background_idle.add_busy(outcome.elapsed)
            self._metrics.assignor_time.observe(outcome.elapsed, run.assignor_name)
            if outcome.error is not None:
                log.warning("assignor %s failed for group %s: %s", run.assignor_name, run.group_id, outcome.error)
            else:
                log.info("assignor %s ran for group %s (%d members) in %.1f ms", run.assignor_name, run.group_id,
                         len(run.spec.members), outcome.elapsed * 1000)
            done(AssignorCompletion(run.group_id, run.run_id, outcome.assignment, outcome.error))

        if self._pool is not None:
            def in_thread() -> None:
                outcome = run_assignor(run.assignor_name, run.spec, run.topics, run.lag)
                if outcome.assignment is not None:  # the event loop then looks at the changed members only
                    outcome = dataclasses.replace(outcome, assignment=as_delta(run.spec, outcome.assignment))
                finish(outcome)

            self._pool.submit(in_thread)
            return
        processes = self._processes
        assert processes is not None
        # In a loop pass of its own: the operation that asked for the run (a heartbeat that built the group's
        # snapshot) has held the loop long enough, and heartbeats waiting on I/O are answered in between.
        if processes.on_loop():
            processes.loop().call_soon(self._send, run, finish)
        else:  # tools and tests, off the loop the processes are driven from
            processes.loop().call_soon_threadsafe(self._send, run, finish)

    def _send(self, run: AssignorRun, finish: Callable[[RunOutcome], None]) -> None:
        """On the processes' event loop: the run to the worker that keeps its group, as what changed, when one
        does; else whole, pickled one slice per loop pass (`slicing`: heartbeats are answered in between)."""
        processes = self._processes
        assert processes is not None
        compact = compact_run(run)

        def collected(outcome: RunOutcome) -> None:
            if outcome.error == CACHE_MISS:  # never expected: the worker lost the group's rows; send it whole
                log.warning("background worker lost group %s's rows: sending its run whole", run.group_id)
                self._holdings.forget(run.group_id)
                self._send_whole(run, compact, lambda again: self._load(again, run, finish), finish)
                return
            self._load(outcome, run, finish)

        cached = self._holdings.cached_run(run.group_id, compact)
        if cached is not None:
            worker, body = cached
            evict = self._holdings.keep(run.group_id, worker, body.rows_serial, body.ids_serial)
            self.runs_sent_as_changes += 1
            processes.send(worker, (evict, body), collected)
            return
        self._send_whole(run, compact, collected, finish)

    def _send_whole(self, run: AssignorRun, compact: CompactRun, collected: Callable[[RunOutcome], None],
                    finish: Callable[[RunOutcome], None]) -> None:
        processes = self._processes
        assert processes is not None
        keep = keep_for(compact)

        def send(payload: object) -> None:
            holder = self._holdings.holder(run.group_id)
            worker = holder if holder is not None else processes.pick()
            evict: tuple[str, ...] = ()
            if keep is not None:
                evict = self._holdings.keep(run.group_id, worker, *keep)
                payload = Keep(run.group_id, keep[0], keep[1], payload)
            elif holder is not None:  # kept, but no longer worth keeping (or no lineage): dropped
                self._holdings.forget(run.group_id)
                evict = (run.group_id,)
            self.runs_sent_whole += 1
            processes.send(worker, (evict, payload), collected)

        self._stepwise(slicing(compact), send, run, "pickling", finish)

    def _load(self, outcome: RunOutcome, run: AssignorRun, finish: Callable[[RunOutcome], None]) -> None:
        self._stepwise(loading(outcome, run), finish, run, "loading", finish)

    @staticmethod
    def _stepwise(steps: Generator[None, None, Any], done: Callable[[Any], None], run: AssignorRun, what: str,
                  finish: Callable[[RunOutcome], None]) -> None:
        """`steps` one step per event-loop pass (heartbeats are answered in between), then `done(result)`. A
        step that fails (a run that does not pickle, an outcome that does not load) fails the run, never the
        loop, and never leaves the group waiting for a run that will not complete."""
        _Stepper(asyncio.get_running_loop(), steps, done, run, what, finish)()

    def submit_call(self, fn: Callable[[], Any], done: Callable[[Any], None]) -> None:
        """Run a self-contained background computation (a streams assignor run) and hand its result to `done`."""
        self._call_pool.submit(self._timed, fn, done, time.perf_counter())

    def submit_regex(self, task: RegexResolution, done: Callable[[RegexResolutionCompletion], None]) -> None:
        """Resolve a group's regexes against every topic on a worker (RE2: linear in each name), so neither a
        hostile pattern nor many topics hold the event loop."""
        def run() -> RegexResolutionCompletion:
            try:
                return resolve_in_slices(task)
            except Exception:  # a bug must not kill the worker; the group keeps its last resolution
                log.exception("regex resolution crashed for group %s", task.group_id)
                return RegexResolutionCompletion(task.group_id, task.run_id, {})

        self._regex_pool.submit(self._timed, run, done, time.perf_counter())

    def _timed(self, fn: Callable[[], Any], done: Callable[[Any], None], submitted: float) -> None:
        """`done(fn())` on a worker thread, counted in the background-* metrics."""
        started = time.perf_counter()
        self._metrics.background_queue_time.record((started - submitted) * 1000)
        result = fn()
        elapsed = time.perf_counter() - started
        self._metrics.background_processing_time.record(elapsed * 1000)
        self._metrics.background_idle.add_busy(elapsed)
        done(result)

    def shutdown(self) -> None:
        self._regex_pool.shutdown(wait=True, cancel_futures=True)
        self._call_pool.shutdown(wait=True, cancel_futures=True)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._processes is not None:
            self._processes.shutdown()
