"""A large group's offloaded runs cross to the worker process that keeps its rows as only what changed, and
give exactly what a whole run gives: through churn, a changed subscription, a worker killed, and the chain of
snapshots broken."""

from __future__ import annotations

import gc
import os
import pickle
import random
import signal
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion, AssignorRun
from groupcoord.coordinator.runtime.executor import BackgroundExecutor, RunOutcome
from groupcoord.coordinator.runtime.metrics import CoordinatorMetrics
from groupcoord.coordinator.runtime.run_cache import CACHE_MIN_MEMBERS, CachedRun, CacheMiss, RunCache
from tests.core.context import CoreContext, as_in_a_worker_process

MEMBERS = CACHE_MIN_MEMBERS + 200


def plain(assignment: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, frozenset[int]]]:
    return {m: {t: frozenset(ps) for t, ps in a.items() if ps} for m, a in assignment.items()}


def run_on(executor: BackgroundExecutor, run: AssignorRun) -> AssignorCompletion:
    done: list[AssignorCompletion] = []
    finished = threading.Event()

    def on_done(c: AssignorCompletion) -> None:
        done.append(c)
        finished.set()

    executor.submit(run, on_done)
    assert finished.wait(60), "the run did not complete"
    return done[0]


class Churn:
    """A stable group of MEMBERS, then one leave and one join per step, each run offloaded to `executor` and
    checked against the whole run computed here."""

    def __init__(self, executor: BackgroundExecutor) -> None:
        self.executor = executor
        self.ctx = CoreContext({"foo": 3 * MEMBERS, "bar": 40}, auto_complete_runs=False,
                               group_consumer_assignor_offload_enable=True, group_consumer_assignors="uniform")
        self.rng = random.Random(7)
        self.next_id = 0
        self.runs = 0
        for _ in range(MEMBERS):
            self.join()
        self.complete()

    def join(self, topics: tuple[str, ...] = ("foo",)) -> None:
        self.ctx.join(f"m{self.next_id}", subscribed_topic_names=topics)
        self.next_id += 1

    def complete(self) -> int:
        """Finish every pending run on the executor, checking each against the whole run; returns how many
        failed (a worker killed under them)."""
        failed = 0
        while self.ctx.pending_runs:
            run = self.ctx.pending_runs.pop(0)
            self.runs += 1
            expected = plain(as_in_a_worker_process(run))
            completion = run_on(self.executor, run)
            if completion.assignment is None:
                failed += 1
                completion = AssignorCompletion(run.group_id, run.run_id, as_in_a_worker_process(run))
            else:
                assert plain(completion.assignment) == expected
            self.ctx.apply(self.ctx.shard.on_assignment_complete(completion, self.ctx.now))
        return failed

    def step(self, topics: tuple[str, ...] = ("foo",)) -> int:
        members = sorted(self.ctx.group().members)
        self.ctx.heartbeat(member_id=self.rng.choice(members), member_epoch=-1)
        failed = self.complete()
        self.join(topics)
        return failed + self.complete()


@pytest.fixture
def executor() -> Any:
    executor = BackgroundExecutor(2, CoordinatorMetrics(2), "process")
    executor.start()
    yield executor
    executor.shutdown()


def test_a_large_groups_runs_after_the_first_cross_as_changes_and_match_whole_runs(executor: Any) -> None:
    churn = Churn(executor)
    churn.step()  # the first run over a current target: the worker keeps its member ids from here on
    whole, runs = executor.runs_sent_whole, churn.runs
    assert whole >= 1
    for i in range(6):
        assert churn.step(("foo", "bar") if i == 3 else ("foo",)) == 0  # one member subscribes to both topics
    assert churn.runs - runs >= 6
    assert executor.runs_sent_whole == whole
    assert executor.runs_sent_as_changes == churn.runs - runs


def test_after_the_keeping_worker_is_killed_runs_cross_whole_again_and_still_match(executor: Any) -> None:
    churn = Churn(executor)
    churn.step()
    whole = executor.runs_sent_whole
    for pid in executor.worker_pids():
        os.kill(pid, signal.SIGKILL)
    failures = sum(churn.step() for _ in range(3))
    assert failures <= 1  # only a run already on its way to a killed worker may fail
    assert executor.runs_sent_whole > whole
    as_changes = executor.runs_sent_as_changes
    churn.step()
    assert executor.runs_sent_as_changes > as_changes  # kept again by the new worker


def test_a_broken_chain_of_snapshots_sends_the_run_whole(executor: Any) -> None:
    churn = Churn(executor)
    churn.step()
    churn.ctx.group().spec_serial = None  # as if a snapshot was taken that no worker saw
    whole = executor.runs_sent_whole
    churn.step()
    assert executor.runs_sent_whole > whole


def test_a_worker_that_does_not_hold_the_base_says_so_instead_of_guessing() -> None:
    with pytest.raises(CacheMiss):
        RunCache().resolve(CachedRun("g", b"", 1, 2, (), None, None, ()))


def test_an_outcome_that_does_not_load_fails_its_run_instead_of_leaving_it_pending(executor: Any) -> None:
    """A corrupt byte in a chunk of a worker's answer: the run completes as failed (the group retries on its
    next heartbeat), where an exception in a loop callback would have left the group waiting for ever."""
    good = pickle.dumps({"m0": {"t": frozenset({0})}})
    corrupt = RunOutcome(None, None, 0.0, 0.0, (good, good[:-3] + b"\xff\xff\xff"))
    finished = threading.Event()
    got: list[RunOutcome] = []

    def finish(outcome: RunOutcome) -> None:
        got.append(outcome)
        finished.set()

    run_like = type("R", (), {"assignor_name": "uniform", "group_id": "g", "spec": None})()  # names only
    executor._processes.loop().call_soon_threadsafe(executor._load, corrupt, run_like, finish)
    assert finished.wait(10)
    assert got[0].assignment is None and got[0].error and "background executor" in got[0].error


def test_an_offloaded_run_leaves_no_reference_cycle_holding_the_groups_snapshot(executor: Any) -> None:
    """Everything a run made (its snapshot of 1,200 rows, the owner arrays, the views of them, the callbacks that
    carried it) is freed by reference counting when the run is done. In a cycle it lived until the cyclic
    garbage collector ran, and that collection, over dozens of such snapshots, paused the event loop for tens
    of milliseconds while a large group rebalanced."""
    churn = Churn(executor)
    churn.step()
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            churn.step()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        held = Counter(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    snapshots = {k: n for k, n in held.items() if k in {
        "SpecMembers", "GroupSpec", "CompactAssignment", "MemberAssignmentView", "TargetDelta", "AssignorRun"}}
    assert not snapshots, f"left in reference cycles by 3 runs: {snapshots}"
