"""The background executor: offloaded assignor runs (KIP-1263) and regex resolutions, with its metrics.

`group.coordinator.background.threads` workers. Assignors are pure functions of immutable snapshots, so a
run needs no lock and cannot corrupt coordinator state; its result goes back through the event queue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from assignors.api import AssignorError
from assignors.registry import get_server_assignor
from coordinator.core.target_assignment import AssignorCompletion, AssignorRun
from coordinator.core.topic_regex import RegexResolution, RegexResolutionCompletion, resolve_topic_regexes
from coordinator.runtime.metrics import CoordinatorMetrics

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


class BackgroundExecutor:
    def __init__(self, threads: int, metrics: CoordinatorMetrics) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="groupcoord-background")
        # Regex resolutions get one worker of their own: a flood of new patterns then queues there instead of
        # taking every background thread (and more of the GIL) from assignors and the event loop.
        self._regex_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="groupcoord-regex")
        self._metrics = metrics

    def submit(self, run: AssignorRun, done: Callable[[AssignorCompletion], None]) -> None:
        """Run the assignor on a worker; `done` is called on that worker with the completion."""
        submitted = time.perf_counter()

        def task() -> None:
            started = time.perf_counter()
            self._metrics.background_queue_time.record((started - submitted) * 1000)
            try:
                assignment = get_server_assignor(run.assignor_name).assign(run.spec, run.topics, run.lag)
                completion = AssignorCompletion(run.group_id, run.run_id, assignment)
            except (AssignorError, ValueError, KeyError) as e:
                log.warning("assignor %s failed for group %s: %s", run.assignor_name, run.group_id, e)
                completion = AssignorCompletion(run.group_id, run.run_id, None, str(e))
            except Exception as e:  # a bug in an assignor must not kill the worker or the group
                log.exception("assignor %s crashed for group %s", run.assignor_name, run.group_id)
                completion = AssignorCompletion(run.group_id, run.run_id, None, f"{type(e).__name__}: {e}")
            elapsed = time.perf_counter() - started
            self._metrics.background_processing_time.record(elapsed * 1000)
            self._metrics.background_idle.add_busy(elapsed)
            log.info("assignor %s ran for group %s (%d members) in %.1f ms", run.assignor_name, run.group_id,
                     len(run.spec.members), elapsed * 1000)
            done(completion)

        self._pool.submit(task)

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

        self._pool.submit(task)

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
        self._pool.shutdown(wait=True, cancel_futures=True)
