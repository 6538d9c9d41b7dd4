"""The cluster under test: one coordinator process with a state dir, N member processes, one proxy each.

Why processes and proxies: kill -9, SIGSTOP and a silent network path are only real against real processes
and real sockets. Each member talks to the coordinator through its own `TcpProxy`, so the nemesis can cut
one member off while the others keep talking. The coordinator keeps its port across restarts, so the
proxies (and the members behind them) reconnect to whatever instance runs now.

`Cluster` also collects the history: member processes report JSON lines on stdout (see `worker.py`); a
reader thread per process turns them into `checker.Event`s. The nemesis adds its own events (deaths,
stops, resumes, state wipes, offset fetches), timestamped with the same monotonic clock.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import grpc

from groupcoord.faults.checker import Event, Kind, OwnershipState
from groupcoord.faults.tcp_proxy import TcpProxy
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc


@dataclass(frozen=True, slots=True)
class Timing:
    """Low timeouts so that a fault outlasts a session within seconds (min bounds lowered to allow them)."""

    session_timeout_ms: int = 3000
    heartbeat_interval_ms: int = 200
    commit_interval_ms: int = 50
    rpc_timeout_ms: int = 1000

    def server_flags(self) -> list[str]:
        sets = {
            "group.consumer.min.session.timeout.ms": 100,
            "group.consumer.session.timeout.ms": self.session_timeout_ms,
            "group.consumer.min.heartbeat.interval.ms": 10,
            "group.consumer.heartbeat.interval.ms": self.heartbeat_interval_ms,
            "group.consumer.assignment.interval.ms": 0,
            "groupcoord.log.snapshot.records": 2000,
        }
        return [arg for k, v in sets.items() for arg in ("--set", f"{k}={v}")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop_process(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGCONT)
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


class Member:
    """A member slot: its proxy stays; its process (an incarnation, named `m<slot>.<n>`) may be replaced."""

    def __init__(self, slot: int, proxy: TcpProxy) -> None:
        self.slot = slot
        self.proxy = proxy
        self.incarnation = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopped = False
        self.fatal = 0

    @property
    def name(self) -> str:
        return f"m{self.slot}.{self.incarnation}"


class Cluster:
    def __init__(self, workdir: Path, members: int, partitions: int, timing: Timing,
                 group: str = "faults", topic: str = "t") -> None:
        self.workdir = workdir
        self.state_dir = workdir / "state"
        self.partitions = partitions
        self.timing = timing
        self.group = group
        self.topic = topic
        self.port = free_port()
        self.coordinator: subprocess.Popen[bytes] | None = None
        self.coordinator_stopped = False
        self._lock = threading.Lock()
        workdir.mkdir(parents=True, exist_ok=True)
        self.history: list[Event] = []
        self.state = OwnershipState()
        self._history_file: IO[str] = (workdir / "history.jsonl").open("w")
        self._log_file: IO[bytes] = (workdir / "processes.log").open("ab")
        self.members = [Member(i, TcpProxy(f"127.0.0.1:{self.port}").start()) for i in range(members)]
        self._channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self._stub = pb_grpc.GroupCoordinatorStub(self._channel)

    # --- history -----------------------------------------------------------------------------------------
    def record(self, event: Event) -> None:
        with self._lock:
            self.history.append(event)
            self.state.apply(event)
            self._history_file.write(json.dumps({"t": event.t, "kind": event.kind.value, "member": event.member,
                                                 "p": list(event.partitions), "offsets": list(event.offsets),
                                                 "ts": event.t_sent, "detail": event.detail}) + "\n")

    def snapshot(self) -> list[Event]:
        with self._lock:
            return list(self.history)

    def live_members(self) -> list[str]:
        return [m.name for m in self.members if m.proc is not None and m.proc.poll() is None and not m.stopped]

    def converged(self) -> bool:
        """Every member live, every partition claimed by exactly one of them, and the coordinator agrees: its
        group has one stable member per process with exactly the partitions the processes claim (a member whose
        client stopped silently still claims partitions the coordinator no longer gives it)."""
        live = self.live_members()
        with self._lock:
            if len(live) != len(self.members) or not self.state.converged(live, self.partitions):
                return False
            claimed = sorted(sorted(self.state.owned.get(m, ())) for m in live)
        seen = self.coordinator_assignment()
        return seen is not None and sorted(seen) == claimed

    def coordinator_assignment(self) -> list[list[int]] | None:
        """Per member of the group as the coordinator describes it, its partitions; None unless all are STABLE."""
        try:
            group = self._stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=[self.group]), timeout=2).groups[0]
        except (grpc.RpcError, IndexError):
            return None
        if group.error_code or any(m.state != "STABLE" for m in group.members):
            return None
        return [sorted(p for tp in m.assignment for p in tp.partitions) for m in group.members]

    def quiet_since(self) -> float:
        with self._lock:
            return self.state.last_change

    # --- the coordinator ---------------------------------------------------------------------------------
    def start_coordinator(self) -> None:
        self.coordinator = subprocess.Popen(
            [sys.executable, "-m", "groupcoord", "--log-level", "WARNING", "serve",
             "--listen", f"127.0.0.1:{self.port}", "--state-dir", str(self.state_dir),
             "--topic", f"{self.topic}:{self.partitions}", *self.timing.server_flags()],
            stdout=self._log_file, stderr=self._log_file)
        self.coordinator_stopped = False
        self.wait_serving()

    def wait_serving(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.coordinator is not None and self.coordinator.poll() is not None:
                raise RuntimeError(f"coordinator exited with {self.coordinator.returncode}; see processes.log")
            try:
                if self._stub.ListGroups(pb.ListGroupsRequest(), timeout=1).error_code == 0:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.05)
        raise RuntimeError("coordinator did not come up")

    def kill_coordinator(self) -> float:
        assert self.coordinator is not None
        self.coordinator.kill()
        t = time.monotonic()
        self.coordinator.wait()
        return t

    def wipe_state(self) -> None:
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def signal_coordinator(self, sig: signal.Signals) -> None:
        assert self.coordinator is not None
        self.coordinator.send_signal(sig)
        self.coordinator_stopped = sig == signal.SIGSTOP

    def fetch_offsets(self) -> bool:
        """OffsetFetch of the whole group straight from the coordinator (no proxy); recorded for the checker."""
        t = time.monotonic()
        try:
            resp = self._stub.OffsetFetch(pb.OffsetFetchRequest(group_id=self.group, member_epoch=-1), timeout=10)
        except grpc.RpcError:
            return False
        if resp.error_code:
            return False
        offsets = tuple(sorted((p.partition_index, p.committed_offset) for tp in resp.topics if tp.name == self.topic
                               for p in tp.partitions))
        self.record(Event(t, Kind.OFFSETS_FETCHED, offsets=offsets))
        return True

    # --- members -----------------------------------------------------------------------------------------
    def start_member(self, m: Member) -> None:
        m.incarnation += 1
        m.stopped = False
        proc = subprocess.Popen(
            [sys.executable, "-m", "groupcoord.faults.worker", "--target", m.proxy.address, "--group", self.group,
             "--topic", self.topic, "--interval-ms", str(self.timing.commit_interval_ms),
             "--rpc-timeout-ms", str(self.timing.rpc_timeout_ms)],
            stdout=subprocess.PIPE, stderr=self._log_file)
        m.proc = proc
        threading.Thread(target=self._read_member, args=(m, m.name, proc), daemon=True,
                         name=f"faults-reader-{m.name}").start()

    def _read_member(self, m: Member, name: str, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            event = _member_event(name, msg)
            if event is not None:
                self.record(event)
            elif msg.get("ev") == "fatal":
                m.fatal += 1

    def kill_member(self, m: Member) -> None:
        assert m.proc is not None
        m.proc.kill()
        t = time.monotonic()
        m.proc.wait()
        m.stopped = False
        self.record(Event(t, Kind.DIED, m.name))

    def stop_member(self, m: Member) -> None:
        assert m.proc is not None
        m.proc.send_signal(signal.SIGSTOP)
        m.stopped = True
        self.record(Event(time.monotonic(), Kind.STOPPED, m.name))

    def resume_member(self, m: Member) -> None:
        assert m.proc is not None
        self.record(Event(time.monotonic(), Kind.RESUMED, m.name))
        m.proc.send_signal(signal.SIGCONT)
        m.stopped = False

    # --- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> None:
        self.start_coordinator()
        for m in self.members:
            self.start_member(m)

    def close(self) -> None:
        for m in self.members:
            if m.proc is not None and m.proc.poll() is None:
                m.proc.send_signal(signal.SIGCONT)
                self.kill_member(m)
            m.proxy.close()
        if self.coordinator is not None:
            _stop_process(self.coordinator)
        self._channel.close()
        with self._lock:
            self._history_file.close()
        self._log_file.close()


def _member_event(name: str, msg: dict[str, object]) -> Event | None:
    ev = msg.get("ev")
    t = float(msg.get("t", 0.0))  # type: ignore[arg-type]
    if ev in ("assigned", "revoked", "lost"):
        ps = tuple(int(p) for p in msg.get("p", ()))  # type: ignore[attr-defined]
        return Event(t, Kind(str(ev)), name, ps)
    if ev == "commit":
        tried = tuple(int(p) for p in msg.get("try", ()))  # type: ignore[attr-defined]
        ok = msg.get("ok", {})
        offsets = tuple(sorted((int(p), int(o)) for p, o in ok.items()))  # type: ignore[attr-defined]
        return Event(t, Kind.COMMIT, name, tried, offsets, float(msg.get("ts", t)))  # type: ignore[arg-type]
    return None

