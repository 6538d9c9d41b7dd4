"""The background executor: offloaded assignor runs (KIP-1263) and regex resolutions, with its metrics.

`group.coordinator.background.threads` workers. Assignors are pure functions of immutable snapshots, so a
run needs no lock and cannot corrupt coordinator state; its result goes back through the event queue.

`group.coordinator.background.executor` says where the workers are. `process` (the default): a pool of
worker processes forked from a forkserver started with the coordinator, so an assignor run on a large group
holds another interpreter's GIL, never the one answering heartbeats. The run crosses as a small pickle
(`compact_run`: the spec, and only the subscribed topics' partition counts and racks rather than the whole
metadata image: 0.6 MB for 10,000 members on 100 topics of 1,000 partitions); the assignment comes back in
chunks the coordinator loads with the event loop running in between. The child times its own start and
run, so the background-* metrics stay true. The workers run `group.coordinator.background.niceness` below
the coordinator's CPU priority, under SCHED_IDLE by default (`group.coordinator.background.idle.scheduling`),
so a run never competes with the heartbeat path for a core. `thread`:
threads of this process (no start-up cost; for tests and small deployments).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import multiprocessing
import os
import pickle
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
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
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.core.spec_members import SpecMembers
from groupcoord.coordinator.core.target_assignment import AssignorCompletion, AssignorRun
from groupcoord.coordinator.core.target_delta import TargetDelta, as_delta, assignment_changes
from groupcoord.coordinator.core.topic_regex import RegexResolution, RegexResolutionCompletion, resolve_topic_regexes
from groupcoord.coordinator.runtime.metrics import CoordinatorMetrics
from groupcoord.coordinator.runtime.sliced_run import SlicedRun, slice_run, slicing, unslice

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
    one chunk at a time and lets the event loop run in between (`load_chunks`)."""
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


def load_chunks(chunks: tuple[bytes, ...]) -> GroupAssignment:
    assignment: dict[str, MemberAssignment] = {}
    for chunk in chunks:
        loaded = pickle.loads(chunk)
        if isinstance(loaded, CompactAssignment):
            return loaded
        assignment.update(loaded)
        time.sleep(0)  # hand the GIL to the event loop between chunks
    return assignment


def load_outcome(outcome: RunOutcome, run: AssignorRun) -> RunOutcome:
    """A worker's outcome with its assignment loaded (on the coordinator's side): only the changed members
    when the worker sent those, over the snapshot `run` was given."""
    if outcome.changes is not None and run.spec.current is not None:
        return RunOutcome(TargetDelta.over(run.spec, outcome.changes), None, outcome.started, outcome.elapsed)
    if not outcome.chunks:
        return outcome
    return RunOutcome(load_chunks(outcome.chunks), None, outcome.started, outcome.elapsed)


def _warm() -> int:
    return 0


def _exit_with(coordinator_pid: int, niceness: int = 0, idle_scheduling: bool = False) -> None:
    """Pool initializer: lower the worker's CPU priority by `niceness` (and to SCHED_IDLE with
    `idle_scheduling`), and exit when the coordinator is gone. A coordinator killed with SIGKILL cannot stop its
    pool, and a worker never sees EOF on its call queue (it holds the queue's write end itself).

    Why the priority: on a machine whose cores the coordinator's event loop (and whatever shares the machine)
    already keeps busy, a 40 ms assignor run at equal priority time-slices with the heartbeat path, and every
    other group's heartbeats wait for the scheduler during it. Niced, the run takes only the CPU left over; but
    Linux's EEVDF scheduler lets a running niced task finish its slice before a waking event loop gets the core,
    so heartbeats still wait a millisecond or more behind it. A SCHED_IDLE task is preempted at once."""
    if niceness:
        os.nice(niceness)
    if idle_scheduling and hasattr(os, "SCHED_IDLE"):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    server_assignor_names()  # import the built-in assignors now, not in the first run

    def watch() -> None:
        while True:
            time.sleep(1.0)
            try:
                os.kill(coordinator_pid, 0)
            except ProcessLookupError:
                os._exit(0)

    threading.Thread(target=watch, name="groupcoord-parent-watch", daemon=True).start()


class BackgroundExecutor:
    def __init__(self, threads: int, metrics: CoordinatorMetrics, mode: str = "thread", niceness: int = 0,
                 idle_scheduling: bool = False) -> None:
        self._threads = threads
        self._niceness = niceness  # worker processes only (`_exit_with`): threads share the coordinator's
        self._idle_scheduling = idle_scheduling
        self._metrics = metrics
        self.mode = mode
        self._lock = threading.Lock()
        self._pool: Executor = self._new_pool()
        self._sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="groupcoord-background-send")
        # Regex resolutions get one worker of their own: a flood of new patterns then queues there instead of
        # taking every background thread (and more of the GIL) from assignors and the event loop.
        self._regex_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="groupcoord-regex")
        # Self-contained calls (streams assignor runs) are closures, which a process pool cannot pickle: threads.
        self._call_pool = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="groupcoord-background-call")

    def _new_pool(self) -> Executor:
        if self.mode == "thread":
            return ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="groupcoord-background")
        # forkserver: children are forked from a clean single-threaded server that imported the assignors once,
        # never from this process with its gRPC threads (fork would copy their locks mid-use).
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["groupcoord.assignors.registry", "groupcoord.coordinator.runtime.executor"])
        return ProcessPoolExecutor(max_workers=self._threads, mp_context=context, initializer=_exit_with,
                                   initargs=(os.getpid(), self._niceness, self._idle_scheduling))

    def start(self) -> None:
        """Start the worker processes now, off the caller's thread, so the first run does not pay for them."""
        if self.mode == "process":
            pool = self._pool

            def warm() -> None:
                try:
                    for f in [pool.submit(_warm) for _ in range(self._threads)]:
                        f.result()
                except Exception as e:  # shut down meanwhile, or the pool broke: the first run retries
                    log.debug("warming the background processes failed: %s", e)

            threading.Thread(target=warm, name="groupcoord-background-warm", daemon=True).start()

    def submit(self, run: AssignorRun, done: Callable[[AssignorCompletion], None]) -> None:
        """Run the assignor on a worker; `done` is called (on a thread of this process) with the completion."""
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

        if self.mode == "thread":
            def in_thread() -> None:
                outcome = run_assignor(run.assignor_name, run.spec, run.topics, run.lag)
                if outcome.assignment is not None:  # the event loop then looks at the changed members only
                    outcome = dataclasses.replace(outcome, assignment=as_delta(run.spec, outcome.assignment))
                finish(outcome)

            self._pool.submit(in_thread)
            return

        def collected(pool: Executor, future: Future[RunOutcome]) -> None:
            try:
                outcome = future.result()
            except Exception as e:  # the worker died (BrokenProcessPool) or the input did not pickle
                log.error("background process failed running assignor %s for group %s: %r", run.assignor_name,
                          run.group_id, e)
                self._replace_broken(pool)
                outcome = RunOutcome(None, f"background executor: {type(e).__name__}", time.monotonic(), 0.0)
            finish(load_outcome(outcome, run))

        def send(payload: SlicedRun | CompactRun) -> None:
            with self._lock:
                pool = self._pool
            try:
                future = pool.submit(run_sliced, payload)  # the pool's feeder thread pickles it: a few bytes objects
            except RuntimeError as e:  # broken, or shut down
                self._replace_broken(pool)
                finish(RunOutcome(None, f"background executor: {e}", time.monotonic(), 0.0))
                return
            future.add_done_callback(lambda f: collected(pool, f))

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not called from an event loop (tools, tests): pickle on the sender thread
            self._sender.submit(lambda: send(slice_run(compact_run(run))))
            return
        # On the event loop, one slice per pass (`slicing`): heartbeats are answered in between, and no thread
        # of this process takes the GIL from the loop to pickle
        steps = slicing(compact_run(run))

        def step() -> None:
            try:
                next(steps)
            except StopIteration as done:
                send(done.value)
                return
            except Exception as e:  # a run that does not pickle fails as a run, never the loop
                log.error("pickling the run of assignor %s for group %s failed: %r", run.assignor_name,
                          run.group_id, e)
                finish(RunOutcome(None, f"background executor: {type(e).__name__}", time.monotonic(), 0.0))
                return
            loop.call_soon(step)

        loop.call_soon(step)

    def _replace_broken(self, broken: Executor) -> None:
        """A killed worker breaks the whole ProcessPoolExecutor: start a new one, once per broken pool."""
        with self._lock:
            if self._pool is not broken:
                return
            self._pool = self._new_pool()
        broken.shutdown(wait=False, cancel_futures=True)

    def submit_call(self, fn: Callable[[], Any], done: Callable[[Any], None]) -> None:
        """Run a self-contained background computation (a streams assignor run) and hand its result to `done`."""
        submitted = time.perf_counter()

        def task() -> None:
            started = time.perf_counter()
            self._metrics.background_queue_time.record((started - submitted) * 1000)
            result = fn()
            elapsed = time.perf_counter() - started
            self._metrics.background_processing_time.record(elapsed * 1000)
            self._metrics.background_idle.add_busy(elapsed)
            done(result)

        self._call_pool.submit(task)

    def submit_regex(self, task: RegexResolution, done: Callable[[RegexResolutionCompletion], None]) -> None:
        """Resolve a group's regexes against every topic on a worker (RE2: linear in each name), so neither a
        hostile pattern nor many topics hold the event loop."""
        submitted = time.perf_counter()

        def run() -> None:
            started = time.perf_counter()
            self._metrics.background_queue_time.record((started - submitted) * 1000)
            try:
                completion = resolve_in_slices(task)
            except Exception:  # a bug must not kill the worker; the group keeps its last resolution
                log.exception("regex resolution crashed for group %s", task.group_id)
                completion = RegexResolutionCompletion(task.group_id, task.run_id, {})
            elapsed = time.perf_counter() - started
            self._metrics.background_processing_time.record(elapsed * 1000)
            self._metrics.background_idle.add_busy(elapsed)
            done(completion)

        self._regex_pool.submit(run)

    def shutdown(self) -> None:
        self._regex_pool.shutdown(wait=True, cancel_futures=True)
        self._call_pool.shutdown(wait=True, cancel_futures=True)
        self._sender.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            pool = self._pool
        pool.shutdown(wait=True, cancel_futures=True)
