"""The parent of `serve --workers N`: starts the N worker processes, restarts one that dies, forwards SIGTERM.

Each worker is `groupcoord serve` again with the same flags plus `--worker-index K` (see
`groupcoord.coordinator.runtime.workers` for what a worker serves). A worker that exits while the parent is not stopping
is restarted after a backoff that grows while it keeps dying quickly (1 s, doubling to 30 s; reset after a
minute up). SIGTERM or SIGINT is forwarded to every worker, which shuts down gracefully; one still running
after `STOP_GRACE_S` is killed.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

log = logging.getLogger("groupcoord.supervisor")

STOP_GRACE_S = 30.0
RESTART_BACKOFF_S = (1.0, 30.0)
STABLE_AFTER_S = 60.0


@dataclass
class _Worker:
    index: int
    process: subprocess.Popen[bytes]
    started: float
    backoff_s: float = RESTART_BACKOFF_S[0]
    restart_at: float | None = None


def worker_argv(argv: Sequence[str], index: int) -> list[str]:
    return [sys.executable, "-m", "groupcoord", *argv, "--worker-index", str(index)]


def supervise(argv: Sequence[str], workers: int, ports: Sequence[int]) -> int:
    """Run until SIGTERM/SIGINT; returns 0 after every worker stopped."""
    stopping = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stopping.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)

    def spawn(index: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(worker_argv(argv, index))

    pool = [_Worker(k, spawn(k), time.monotonic()) for k in range(workers)]
    print(f"groupcoord: supervising {workers} workers on ports {', '.join(map(str, ports))}", flush=True)
    while not stopping.wait(0.2):
        now = time.monotonic()
        for w in pool:
            if w.restart_at is not None:
                if now >= w.restart_at:
                    log.warning("restarting worker %d", w.index)
                    w.process, w.started, w.restart_at = spawn(w.index), now, None
                continue
            code = w.process.poll()
            if code is None:
                continue
            if now - w.started >= STABLE_AFTER_S:
                w.backoff_s = RESTART_BACKOFF_S[0]
            log.warning("worker %d (pid %d) exited with %d; restarting it in %.0f s", w.index, w.process.pid, code,
                        w.backoff_s)
            w.restart_at = now + w.backoff_s
            w.backoff_s = min(w.backoff_s * 2, RESTART_BACKOFF_S[1])
    print("groupcoord: stopping the workers", flush=True)
    live = [w.process for w in pool if w.restart_at is None and w.process.poll() is None]
    for p in live:
        p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for p in live:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("worker pid %d did not stop within %.0f s; killing it", p.pid, STOP_GRACE_S)
            p.kill()
            p.wait()
    return 0
