"""The cluster under test: one coordinator process with a state dir, N member processes, one proxy each.

Members are of four kinds (roles): consumer-group members (`worker.py`), classic-group members (`worker.py
--protocol classic`), share-group members (`share_worker.py`) and streams-group members (`streams_worker.py`),
each kind in a group of its own; consumer, classic and streams members read topic `t`, share members `t-queue`
(fewer partitions than members, so that they share them); the nemesis picks its targets among all of them.
`kafka_cluster.py` runs the same members against several instances over a real Kafka.

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
import math
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import grpc

from groupcoord.faults.checker import Event, Kind, OwnershipState
from groupcoord.faults.tcp_proxy import TcpProxy
from groupcoord.faults.views import CoordinatorViews, RoutedViews
from groupcoord.wire.v1 import coordinator_pb2 as pb

ROLES = ("consumer", "share", "streams", "classic")
OWNING_ROLES = ("consumer", "classic", "streams")  # members that own partitions (tasks) of topic `t`
_PREFIX = {"consumer": "m", "share": "s", "streams": "k", "classic": "c"}
_WORKER = {"consumer": "groupcoord.faults.worker", "share": "groupcoord.faults.share_worker",
           "streams": "groupcoord.faults.streams_worker", "classic": "groupcoord.faults.worker"}


@dataclass(frozen=True, slots=True)
class Timing:
    """Low timeouts so that a fault outlasts a session within seconds (min bounds lowered to allow them)."""

    session_timeout_ms: int = 3000
    heartbeat_interval_ms: int = 200
    commit_interval_ms: int = 50
    rpc_timeout_ms: int = 1000
    action_interval_ms: int = 100  # share and streams members: between acquisitions, between processing steps
    record_lock_duration_ms: int = 2000  # share groups: shorter than the session, as a fault outlasts both

    def server_flags(self) -> list[str]:
        sets = {
            "group.consumer.min.session.timeout.ms": 100,
            "group.min.session.timeout.ms": 100,  # classic groups
            "group.consumer.session.timeout.ms": self.session_timeout_ms,
            "group.consumer.min.heartbeat.interval.ms": 10,
            "group.consumer.heartbeat.interval.ms": self.heartbeat_interval_ms,
            "group.consumer.assignment.interval.ms": 0,
            "group.share.min.session.timeout.ms": 100,
            "group.share.session.timeout.ms": self.session_timeout_ms,
            "group.share.min.heartbeat.interval.ms": 10,
            "group.share.heartbeat.interval.ms": self.heartbeat_interval_ms,
            "group.share.assignment.interval.ms": 0,
            "group.share.min.record.lock.duration.ms": 1000,
            "group.share.record.lock.duration.ms": self.record_lock_duration_ms,
            "group.streams.min.session.timeout.ms": 100,
            "group.streams.session.timeout.ms": self.session_timeout_ms,
            "group.streams.min.heartbeat.interval.ms": 10,
            "group.streams.heartbeat.interval.ms": self.heartbeat_interval_ms,
            "group.streams.initial.rebalance.delay.ms": 0,
            "group.streams.assignment.interval.ms": 0,
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

    def __init__(self, slot: int, proxy: TcpProxy, role: str = "consumer") -> None:
        self.slot = slot
        self.role = role
        self.proxy = proxy
        self.incarnation = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopped = False
        self.fatal = 0

    @property
    def name(self) -> str:
        return f"{_PREFIX[self.role]}{self.slot}.{self.incarnation}"


class Cluster:
    def __init__(self, workdir: Path, members: int, partitions: int, timing: Timing,
                 group: str = "faults", topic: str = "t", share_members: int = 0, streams_members: int = 0,
                 share_partitions: int = 1, classic_members: int = 0, port: int | None = None) -> None:
        self.workdir = workdir
        self.state_dir = workdir / "state"
        self.partitions = partitions
        self.timing = timing
        self.group = group
        self.topic = topic
        # Share members read a topic of their own with fewer partitions than members, so that they share
        # partitions (a queue): records of one partition go to several members, one lock at a time.
        self.share_topic = f"{topic}-queue"
        self.share_partitions = share_partitions
        self.port = port or free_port()
        self.pin_target = False  # members reach every coordinator through their proxy (kafka_cluster.py)
        self.coordinator: subprocess.Popen[bytes] | None = None
        self.coordinator_stopped = False
        self._lock = threading.Lock()
        workdir.mkdir(parents=True, exist_ok=True)
        self.history: list[Event] = []
        self.owners = {role: OwnershipState() for role in OWNING_ROLES}  # partitions (streams: tasks) claimed
        self.state = self.owners["consumer"]
        self.tasks = self.owners["streams"]
        self.last_accept: dict[str, float] = {}  # share member -> when its last ACCEPT was acknowledged
        self._history_file: IO[str] = (workdir / "history.jsonl").open("w")
        self._log_file: IO[bytes] = (workdir / "processes.log").open("ab")
        roles = (["consumer"] * members + ["share"] * share_members + ["streams"] * streams_members
                 + ["classic"] * classic_members)
        self.members = [Member(i, TcpProxy(f"127.0.0.1:{self.port}").start(), role) for i, role in enumerate(roles)]
        self.groups = {"consumer": group, "share": f"{group}-share", "streams": f"{group}-streams",
                       "classic": f"{group}-classic"}
        views = CoordinatorViews(f"127.0.0.1:{self.port}", self.groups, topic, self.share_topic)
        self.views: CoordinatorViews | RoutedViews = views
        self._stub = views.stub

    # --- history -----------------------------------------------------------------------------------------
    def record(self, event: Event) -> None:
        with self._lock:
            self.history.append(event)
            if event.role in self.owners:
                self.owners[event.role].apply(event)
            elif event.kind is Kind.ACKED and event.detail == "accept":
                self.last_accept[event.member] = event.t
            self._history_file.write(json.dumps({
                "t": event.t, "kind": event.kind.value, "role": event.role, "member": event.member,
                "p": list(event.partitions), "offsets": list(event.offsets), "ranges": list(event.ranges),
                "ts": event.t_sent, "until": event.until, "detail": event.detail}) + "\n")
            self._history_file.flush()  # read while the run goes on, to see where it stands

    def snapshot(self) -> list[Event]:
        with self._lock:
            return list(self.history)

    def live_members(self, role: str | None = None) -> list[str]:
        return [m.name for m in self.members if m.proc is not None and m.proc.poll() is None and not m.stopped
                and role in (None, m.role)]

    def of_role(self, role: str) -> list[Member]:
        return [m for m in self.members if m.role == role]

    def converged(self, healed: float) -> bool:
        """Every member live; every partition claimed by exactly one consumer and every task by exactly one
        streams member, with the coordinator agreeing (its groups have one stable member per process with exactly
        what the processes claim: a member whose client stopped silently still claims what it no longer has);
        and every share member has had an ACCEPT acknowledged since `healed` (it makes progress again)."""
        if len(self.live_members()) != len(self.members):
            return False
        if not self.not_converged_kinds(healed, ask_coordinator=False):
            return all(self._coordinator_agrees(role) for role in OWNING_ROLES)
        return False

    def not_converged_kinds(self, healed: float, ask_coordinator: bool = True) -> list[str]:
        """The member kinds that have not converged yet (by the members' claims, and by the coordinator's view)."""
        out = []
        for role, state in self.owners.items():
            live = self.live_members(role)
            if not live:
                continue
            with self._lock:
                ok = state.converged(live, self.partitions)
            if not ok or (ask_coordinator and not self._coordinator_agrees(role)):
                out.append(role)
        with self._lock:
            if any(self.last_accept.get(m, -math.inf) < healed for m in self.live_members("share")):
                out.append("share")
        return out

    def _coordinator_agrees(self, role: str) -> bool:
        """Classic groups: the members' claims alone (the coordinator holds their assignment as opaque bytes)."""
        live = self.live_members(role)
        if not live or role == "classic":
            return True
        state = self.owners[role]
        with self._lock:
            claimed = sorted(sorted(state.owned.get(m, ())) for m in live)
        seen = self.views.consumer_assignment() if role == "consumer" else self.views.streams_assignment()
        return seen is not None and sorted(seen) == claimed

    def quiet_since(self) -> float:
        with self._lock:
            return max(s.last_change for s in self.owners.values())

    # --- the coordinator ---------------------------------------------------------------------------------
    def start_coordinator(self) -> None:
        self.coordinator = subprocess.Popen(
            [sys.executable, "-m", "groupcoord", "--log-level", "WARNING", "serve",
             "--listen", f"127.0.0.1:{self.port}", "--state-dir", str(self.state_dir),
             "--topic", f"{self.topic}:{self.partitions}", "--topic", f"{self.share_topic}:{self.share_partitions}",
             *self.timing.server_flags()],
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
        """The read-backs straight from the coordinator (no proxy), recorded for the checker: the consumer
        group's committed offsets, and the share group's offsets (when it has share members)."""
        for role in ("consumer", "classic"):
            if self.of_role(role):
                t = time.monotonic()
                offsets = self.views.committed_offsets(role)
                if offsets is None:
                    return False
                self.record(Event(t, Kind.OFFSETS_FETCHED, offsets=offsets, role=role))
        if self.of_role("share"):
            t = time.monotonic()
            share = self.views.share_offsets()
            if share is None:
                return False
            self.record(Event(t, Kind.SHARE_OFFSETS, role="share", ranges=share))
        return True

    # --- members -----------------------------------------------------------------------------------------
    def start_member(self, m: Member) -> None:
        m.incarnation += 1
        m.stopped = False
        interval_ms = self.timing.commit_interval_ms if m.role == "consumer" else self.timing.action_interval_ms
        topic = self.share_topic if m.role == "share" else self.topic
        args = ["--target", m.proxy.address, "--group", self.groups[m.role], "--topic", topic,
                "--interval-ms", str(interval_ms), "--rpc-timeout-ms", str(self.timing.rpc_timeout_ms)]
        if m.role != "consumer":
            args += ["--session-timeout-ms", str(self.timing.session_timeout_ms)]
        if m.role == "classic":
            args += ["--protocol", "classic", "--partitions", str(self.partitions)]
        if self.pin_target and m.role == "consumer":
            args.append("--pin-target")
        proc = subprocess.Popen([sys.executable, "-m", _WORKER[m.role], *args],
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
            event = member_event(name, m.role, msg)
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
        self.record(Event(t, Kind.DIED, m.name, role=m.role))

    def stop_member(self, m: Member) -> None:
        assert m.proc is not None
        m.proc.send_signal(signal.SIGSTOP)
        m.stopped = True
        self.record(Event(time.monotonic(), Kind.STOPPED, m.name, role=m.role))

    def resume_member(self, m: Member) -> None:
        assert m.proc is not None
        self.record(Event(time.monotonic(), Kind.RESUMED, m.name, role=m.role))
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
        self.views.close()
        with self._lock:
            self._history_file.close()
        self._log_file.close()


def member_event(name: str, role: str, msg: dict[str, Any]) -> Event | None:
    """The history event of one line a member process wrote (see the workers' docstrings), or None."""
    ev = msg.get("ev")
    t = float(msg.get("t", 0.0))
    if ev in ("assigned", "revoked", "lost"):
        return Event(t, Kind(str(ev)), name, tuple(int(p) for p in msg.get("p", ())), role=role)
    if ev == "commit":
        tried = tuple(int(p) for p in msg.get("try", ()))
        offsets = tuple(sorted((int(p), int(o)) for p, o in msg.get("ok", {}).items()))
        return Event(t, Kind.COMMIT, name, tried, offsets, float(msg.get("ts", t)), role=role)
    if ev == "process":  # a streams member acted on its tasks: an action, like an attempted commit
        return Event(t, Kind.COMMIT, name, tuple(int(p) for p in msg.get("p", ())), t_sent=t, role=role)
    if ev in ("acquired", "ack_sent", "acked"):
        ranges = tuple((int(p), int(a), int(b)) for p, a, b in msg.get("r", ()))
        return Event(t, Kind(str(ev)), name, t_sent=float(msg.get("ts", t)),
                     detail=str(msg.get("type", "")), role=role, ranges=ranges, until=float(msg.get("until", 0.0)))
    return None
