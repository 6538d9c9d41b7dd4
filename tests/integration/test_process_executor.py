"""The process-pool background executor: same assignments as the thread one, metrics recorded (and exported), a
killed worker process does not wedge the executor."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from groupcoord.assignors.api import GroupSpec, MemberSpec
from groupcoord.clients.group_member import GroupMember
from groupcoord.coordinator.core.metadata import MetadataImage, TopicMetadata
from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion, AssignorRun
from groupcoord.coordinator.runtime.executor import BackgroundExecutor
from groupcoord.coordinator.runtime.metrics import CoordinatorMetrics
from tests.integration.conftest import start_server


def _run(run_id: int, members: int = 300, assigned: bool = False) -> AssignorRun:
    topics = [TopicMetadata(f"id-{i}", f"topic-{i}", 40 + i) for i in range(5)]
    subs = frozenset(t.topic_id for t in topics[: 3]) if run_id % 2 else frozenset(t.topic_id for t in topics)
    specs = {f"member{i}": MemberSpec(subs if i % 3 else frozenset(t.topic_id for t in topics[1:]),
                                      {"id-1": frozenset({i % 41})} if assigned else {})
             for i in range(members)}
    # an image with many topics the group does not subscribe to: they must not matter
    image = MetadataImage.of(topics + [TopicMetadata(f"other-{i}", f"other-{i}", 3) for i in range(200)])
    return AssignorRun(f"g{run_id}", run_id, "uniform", 1, GroupSpec.of(specs), image, None)


def _collect(executor: BackgroundExecutor, runs: list[AssignorRun]) -> dict[int, AssignorCompletion]:
    done: dict[int, AssignorCompletion] = {}
    finished = threading.Event()

    def on_done(c: AssignorCompletion) -> None:
        done[c.run_id] = c
        if len(done) == len(runs):
            finished.set()

    for run in runs:
        executor.submit(run, on_done)
    assert finished.wait(120), f"only {len(done)} of {len(runs)} runs completed"
    return done


def test_process_executor_produces_the_same_assignments_as_the_thread_executor() -> None:
    runs = [_run(i, assigned=i > 1) for i in range(4)]
    results = {}
    for mode in ("thread", "process"):
        metrics = CoordinatorMetrics(2)
        executor = BackgroundExecutor(2, metrics, mode)
        executor.start()
        try:
            results[mode] = _collect(executor, runs)
        finally:
            executor.shutdown()
        assert metrics.background_processing_time.count == len(runs)
        assert metrics.background_queue_time.count == len(runs)
        assert metrics.background_processing_time.sum_ms > 0
    for run in runs:
        thread, process = results["thread"][run.run_id], results["process"][run.run_id]
        assert process.error is None and thread.error is None
        assert process.assignment == thread.assignment
        assert sum(len(ps) for a in process.assignment.values() for ps in a.values()) > 0


def test_process_executor_reports_assignor_errors_as_failed_runs() -> None:
    run = _run(7)
    bad = AssignorRun(run.group_id, run.run_id, "no-such-assignor", 1, run.spec, run.topics, None)
    executor = BackgroundExecutor(1, CoordinatorMetrics(1), "process")
    try:
        done = _collect(executor, [bad])
    finally:
        executor.shutdown()
    assert done[7].assignment is None and done[7].error


def test_process_executor_workers_run_at_the_configured_lower_cpu_priority() -> None:
    executor = BackgroundExecutor(2, CoordinatorMetrics(2), "process", niceness=7)
    try:
        _collect(executor, [_run(1)])  # the workers exist and have run an assignor
        pids = executor.worker_pids()
        assert pids  # started on demand: one per run in flight
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        assert [os.getpriority(os.PRIO_PROCESS, pid) for pid in pids] == [min(19, mine + 7)] * len(pids)
    finally:
        executor.shutdown()


@pytest.mark.parametrize("idle_scheduling", [True, False])
def test_process_executor_workers_run_under_sched_idle_when_configured(idle_scheduling: bool) -> None:
    executor = BackgroundExecutor(1, CoordinatorMetrics(1), "process", idle_scheduling=idle_scheduling)
    try:
        done = _collect(executor, [_run(1)])
        assert done[1].error is None  # a SCHED_IDLE worker still runs assignors
        pids = executor.worker_pids()
        assert pids
        expected = os.SCHED_IDLE if idle_scheduling else os.sched_getscheduler(0)
        assert [os.sched_getscheduler(pid) for pid in pids] == [expected] * len(pids)
    finally:
        executor.shutdown()


def test_process_executor_recovers_after_a_worker_process_is_killed() -> None:
    executor = BackgroundExecutor(1, CoordinatorMetrics(1), "process")
    try:
        _collect(executor, [_run(1)])
        pids = executor.worker_pids()
        assert pids
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        outcomes = {}
        for attempt in range(2, 6):  # the run in flight when the pool noticed may fail; later ones succeed
            outcomes.update(_collect(executor, [_run(attempt)]))
            if outcomes[attempt].error is None:
                break
        assert any(c.error is None and c.assignment for c in outcomes.values())
    finally:
        executor.shutdown()


def test_offloaded_runs_on_worker_processes_show_in_the_background_metrics() -> None:
    server = start_server({"orders": 24}, **{"group.coordinator.background.executor": "process"})
    members: list[GroupMember] = []
    try:
        assert server.server.runtime is not None and server.server.runtime.executor.mode == "process"
        members = [GroupMember(server.address, "metered", ["orders"]).start() for _ in range(3)]
        for m in members:
            assert m.wait_joined(timeout=60)
        url = f"http://127.0.0.1:{server.server.metrics_port}/metrics"
        deadline = time.monotonic() + 60
        while True:
            body = urllib.request.urlopen(url, timeout=10).read().decode()
            runs = re.search(r'^group_coordinator_assignor_runs_total\{mode="offloaded"\} (\S+)$', body, re.M)
            count = re.search(r"^group_coordinator_background_processing_time_ms_count (\S+)$", body, re.M)
            if runs and count and float(runs.group(1)) > 0 and float(count.group(1)) > 0:
                break
            assert time.monotonic() < deadline, "no offloaded run recorded"
            time.sleep(0.2)
        for name in ("group_coordinator_background_queue_time_ms_count",
                     "group_coordinator_background_queue_time_ms_max",
                     "group_coordinator_background_thread_idle_ratio_avg"):
            assert re.search(rf"^{name} \S+$", body, re.M), name
    finally:
        for m in members:
            m.close()
        server.stop()


def _descendants(pid: int) -> list[int]:
    try:
        kids = [int(c) for t in os.listdir(f"/proc/{pid}/task")
                for c in open(f"/proc/{pid}/task/{t}/children").read().split()]  # noqa: SIM115
    except OSError:
        return []
    return [d for c in kids for d in (c, *_descendants(c))]


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's reaper may be slow in a container)."""
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]  # noqa: SIM115
    except OSError:
        return False
    return state != "Z"


def test_worker_processes_exit_when_the_coordinator_is_killed_with_sigkill() -> None:
    """No handler runs on SIGKILL: the workers notice the end of their socket to the coordinator and exit, so a
    restarted coordinator never finds the previous one's workers still holding memory and CPU."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "groupcoord", "serve", "--listen", f"127.0.0.1:{port}",
                             "--topic", "orders:4", "--set", "group.coordinator.background.executor=process",
                             "--set", "group.coordinator.background.threads=2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(_descendants(proc.pid)) < 3:  # the forkserver and its two workers
            assert proc.poll() is None, "the coordinator exited"
            assert time.monotonic() < deadline, f"workers not started: {_descendants(proc.pid)}"
            time.sleep(0.1)
        below = _descendants(proc.pid)
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 15
        while any(_running(pid) for pid in below):
            assert time.monotonic() < deadline, f"still running: {[p for p in below if _running(p)]}"
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
