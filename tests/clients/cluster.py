"""A real coordinator process on loopback that tests can kill, restart (without state), pause and resume."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable

import grpc

from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.integration.conftest import FRONT_END  # GROUPCOORD_TEST_FRONT_END=grpcio: through grpcio

TopicPartition = tuple[str, int]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


class Coordinator:
    """`groupcoord serve` (with a state dir only when given); `settings` are `--set` pairs (low timeouts)."""

    def __init__(self, settings: dict[str, int], topics: str = "orders:12", state_dir: str | None = None) -> None:
        self.port = free_port()
        self._state_dir = state_dir
        self.address = f"127.0.0.1:{self.port}"
        self._settings = settings
        self._topics = topics
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Coordinator:
        args = [sys.executable, "-m", "groupcoord", "--log-level", "WARNING", "serve", "--listen", self.address,
                "--topic", self._topics, "--front-end", FRONT_END]
        if self._state_dir is not None:
            args += ["--state-dir", self._state_dir]
        for k, v in self._settings.items():
            args += ["--set", f"{k}={v}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.wait_serving()
        return self

    def wait_serving(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            # A fresh channel per try: a reused one would wait out gRPC's reconnect backoff and notice late.
            with grpc.insecure_channel(self.address) as channel:
                try:
                    if pb_grpc.GroupCoordinatorStub(channel).ListGroups(pb.ListGroupsRequest(),
                                                                        timeout=1).error_code == 0:
                        return
                except grpc.RpcError:
                    pass
            time.sleep(0.01)
        raise AssertionError("coordinator did not come up")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()


class OverlapSampler:
    """Samples what every member says it may act on, as often as it can; records any partition two members
    claim at the same moment. It reads only what the clients expose (their lease-aware assignment)."""

    def __init__(self, members: Iterable[object]) -> None:
        self._members = list(members)
        self.overlaps: list[tuple[float, TopicPartition]] = []
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> OverlapSampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        # Three passes: member j's claim in the middle pass overlaps member i's when i claimed the partition in
        # the passes just before and just after it (so a clean hand-over between two reads is not counted).
        passes = [self._pass(), self._pass()]
        while not self._stop.is_set():
            passes.append(self._pass())
            before, middle, after = passes[-3:]
            for j, claimed in enumerate(middle):
                for i in range(len(middle)):
                    if i != j:
                        for tp in claimed & before[i] & after[i]:
                            self.overlaps.append((time.monotonic(), tp))
            del passes[0]
            self.samples += 1
            time.sleep(0.002)

    def _pass(self) -> list[frozenset[TopicPartition]]:
        return [m.assignment() for m in self._members]  # type: ignore[attr-defined]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
