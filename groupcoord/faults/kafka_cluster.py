"""The Kafka-backed cluster under test: 3 Kafka brokers, 3 groupcoord instances sharing a state topic, members.

Why this shape: the mode meant for scale (`serve --bootstrap-servers ... --state-topic ...`) keeps every group's
records in a replicated Kafka topic (replication factor 3, `min.insync.replicas=2`) and lets Kafka's group
protocol decide which instance serves which state partition. Its promises (one owner per partition, nothing
acknowledged lost) can fail between the instances, between an instance and Kafka, or inside Kafka, so each of
those paths is real here and can be cut:

- each instance reaches the brokers only through proxies of its own, one per broker: every broker has a
  listener per instance slot that advertises the proxy's port, so Metadata sends all of that instance's
  Kafka connections (producers, the coordinators' group member, loaders) through them (`KafkaBroker`'s
  `extra_listeners`); silencing or delaying them cuts or slows one instance off Kafka while it keeps
  answering its clients;
- members are the single-node suite's (`Cluster`), each behind its own proxy, which `GroupRouter` points at
  the instance FindCoordinator names for the member's group (see `router.py`);
- each group kind's group lives on a state partition of its own, so the groups spread over the instances.

An instance slot keeps its gRPC port and its Kafka proxies across restarts; slot 3 is the fourth instance the
nemesis adds and removes, and the fresh instance that reads everything back at the end.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from groupcoord.child_processes import free_ports
from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.faults.cluster import Cluster, Timing
from groupcoord.faults.history import Event, Kind
from groupcoord.faults.router import GroupRouter
from groupcoord.faults.tcp_proxy import TcpProxy
from groupcoord.faults.views import RoutedViews
from groupcoord.kafka_broker import KafkaBroker, PortInUse
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

SLOTS = 4  # three instances, plus the one added and removed (and the fresh one reading back at the end)
STATE_TOPIC = "groupcoord-state"
_LOADED = re.compile(r"state partition (\d+) loaded: (\d+) records up to offset (-?\d+) in ([0-9.]+) s")


@dataclass(frozen=True, slots=True)
class KafkaTiming:
    """The Kafka-backed mode's own settings (the members' are `Timing`).

    `broker_session_timeout_ms` is how long Kafka's controller waits for a killed broker's heartbeat before it
    fences it and moves its leaderships (Kafka's `broker.session.timeout.ms`, 9 s by default). Until then the
    partitions it led have no leader, among them the coordinators' group's coordinator, so no instance can renew
    its lease: the floor of every `broker-kill-9` step. The short run in the test suite shortens it."""

    brokers: int = 3
    instances: int = 3
    state_partitions: int = 6
    state_session_timeout_ms: int = 3000
    broker_heap: str = "512m"
    broker_session_timeout_ms: int = 9000

    def broker_config(self) -> dict[str, int]:
        """Kafka's failure detection scaled to `broker_session_timeout_ms`, in Kafka's default ratios: a broker
        heartbeats the controller every 2/9 of the session, voters wait 2/9 of it (at least 1 s, under load) for
        the active controller before electing another, and an election times out after half of that."""
        session = self.broker_session_timeout_ms
        fetch = max(1000, session * 2 // 9)
        return {"broker.session.timeout.ms": session, "broker.heartbeat.interval.ms": max(250, session * 2 // 9),
                "controller.quorum.fetch.timeout.ms": fetch, "controller.quorum.election.timeout.ms": fetch // 2}

    def broker_failover_s(self) -> float:
        """The longest Kafka takes to move leaderships off a killed node: the active controller itself killed
        (the voters' fetch timeout, then an election), then the new controller's session for the dead broker."""
        c = self.broker_config()
        return (c["controller.quorum.fetch.timeout.ms"] + c["controller.quorum.election.timeout.ms"]
                + c["broker.session.timeout.ms"]) / 1000

    def converge_bound_s(self, member_session_ms: int) -> float:
        """How long a step may take to converge after its fault healed: the chain of timeouts it can wait out in
        a row (Kafka moving leaderships, the coordinators' session moving state partitions, the members' session
        moving their partitions), six times over for a loaded machine (replays, rejoins and restarts on 2 cores
        shared with other suites; at a load average of 80 the short run's broker kill took 3.3 chains, with sessions
        of 2 s lapsing for want of CPU), and never under 30 s."""
        chain = self.broker_failover_s() + (self.state_session_timeout_ms + member_session_ms) / 1000
        return max(30.0, 6 * chain)


@dataclass(slots=True)
class Instance:
    slot: int
    port: int
    kafka_proxies: list[TcpProxy]  # one per broker: every Kafka connection of this instance
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    stopped: bool = False
    log_offset: int = 0  # where the log of the current process starts
    starts: list[float] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def serve_command(address: str, bootstrap: str, state_topic: str, partitions: int, session_ms: int,
                  extra: list[str]) -> list[str]:
    """`groupcoord serve` in the Kafka-backed mode (INFO: its loads and hand-offs are logged, with times)."""
    return [sys.executable, "-m", "groupcoord", "--log-level", "INFO", "serve", "--listen", address,
            "--bootstrap-servers", bootstrap, "--state-topic", state_topic, "--state-partitions", str(partitions),
            "--state-session-timeout-ms", str(session_ms), "--metadata-refresh-ms", "1000", *extra]


def spread_group_name(partitions: int, base: str = "faults") -> str:
    """A group name whose four derived group ids (see `Cluster.groups`) land on four distinct state partitions."""
    for n in range(10_000):
        name = base if n == 0 else f"{base}{n}"
        ids = [name, f"{name}-share", f"{name}-streams", f"{name}-classic"]
        if len({state_partition(g, partitions) for g in ids}) == min(len(ids), partitions):
            return name
    return base


class KafkaModeCluster(Cluster):
    def __init__(self, workdir: Path, members: int, partitions: int, timing: Timing, kafka: KafkaTiming,
                 share_members: int = 0, streams_members: int = 0, classic_members: int = 0,
                 share_partitions: int = 1) -> None:
        ports = free_ports(SLOTS)
        super().__init__(workdir, members, partitions, timing, group=spread_group_name(kafka.state_partitions),
                         share_members=share_members, streams_members=streams_members,
                         classic_members=classic_members, share_partitions=share_partitions, port=ports[0])
        self.kafka_timing = kafka
        self.pin_target = True
        bound = free_ports(SLOTS * kafka.brokers)
        self.instances = [
            Instance(slot, ports[slot], [TcpProxy(f"127.0.0.1:{bound[slot * kafka.brokers + b]}").start()
                                         for b in range(kafka.brokers)], workdir / f"instance{slot}.log")
            for slot in range(SLOTS)]
        self.broker: KafkaBroker | None = None
        self.start_phases: list[tuple[str, float]] = []  # (what was ready, seconds since the start)
        self.router = GroupRouter(self.groups, self.instance_addresses, self._route, self.record)
        self.views.close()
        self.views = RoutedViews(self.router.owner, self.groups, self.topic, self.share_topic)

    # --- routing ------------------------------------------------------------------------------------------
    def instance_addresses(self) -> list[str]:
        """The instances a client can ask now (running and not stopped)."""
        return [i.address for i in self.instances if i.running() and not i.stopped]

    def _route(self, kind: str, address: str) -> None:
        for m in self.of_role(kind):
            m.proxy.retarget(address)

    def instance_at(self, address: str | None) -> Instance | None:
        return next((i for i in self.instances if i.address == address), None)

    def target_instance(self, target: int) -> Instance:
        """The instance serving the group of kind `target mod 4` (so faults hit instances that serve
        groups), else a running one."""
        kinds = list(self.groups)
        found = self.instance_at(self.router.owner(kinds[target % len(kinds)]))
        if found is not None and found.running():
            return found
        running = [i for i in self.instances if i.running()]
        return running[target % len(running)]

    def converged(self, healed: float) -> bool:
        """The members' convergence, and every group answering from an instance."""
        return self.router.all_served() and super().converged(healed)

    # --- brokers and instances ------------------------------------------------------------------------------
    def start_brokers(self) -> None:
        k = self.kafka_timing
        listeners = {f"INST{i.slot}": [(int(p.upstream.rsplit(":", 1)[1]), p.port) for p in i.kafka_proxies]
                     for i in self.instances}
        config = {"transaction.state.log.min.isr": 2, "min.insync.replicas": 1, **k.broker_config()}
        for attempt in range(3):
            try:
                broker = KafkaBroker(k.brokers, heap=k.broker_heap, extra_listeners=listeners, config=config)
                break
            except PortInUse as e:  # a proxy's upstream port taken before the broker bound it: pick new ones
                if attempt == 2:
                    raise
                listeners = self._new_listener_ports(set(e.ports))
        self.broker = broker
        rf = min(3, k.brokers)
        broker.create_topic(STATE_TOPIC, k.state_partitions, rf,
                            config={"cleanup.policy": "compact", "min.insync.replicas": str(min(2, rf))})
        broker.create_topic(self.topic, self.partitions, rf)
        broker.create_topic(self.share_topic, self.share_partitions, rf)

    def _new_listener_ports(self, taken: set[int]) -> dict[str, list[tuple[int, int]]]:
        """New upstream ports for the Kafka proxies whose port was `taken` (every proxy keeps its own port)."""
        for inst in self.instances:
            for proxy in inst.kafka_proxies:
                if int(proxy.upstream.rsplit(":", 1)[1]) in taken:
                    proxy.retarget(f"127.0.0.1:{free_ports(1)[0]}")
        return {f"INST{i.slot}": [(int(p.upstream.rsplit(":", 1)[1]), p.port) for p in i.kafka_proxies]
                for i in self.instances}

    def start_instance(self, inst: Instance, wait: bool = True) -> None:
        k = self.kafka_timing
        bootstrap = ",".join(p.address for p in inst.kafka_proxies)
        command = serve_command(inst.address, bootstrap, STATE_TOPIC, k.state_partitions,
                                k.state_session_timeout_ms, self.timing.server_flags())
        inst.log_offset = inst.log.stat().st_size if inst.log.exists() else 0
        with inst.log.open("ab") as out:
            inst.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        inst.stopped = False
        inst.starts.append(time.monotonic())
        if wait:
            self.wait_instance(inst)

    def wait_instance(self, inst: Instance, timeout_s: float = 90.0) -> None:
        """Until the instance answers. An instance whose port was taken while it was down (another suite's pick
        or outgoing connection) starts again on a new port, at most twice: clients find it through the router."""
        for attempt in range(3):
            if self._wait_answering(inst, timeout_s):
                return
            assert inst.proc is not None
            with inst.log.open("rb") as f:
                f.seek(inst.log_offset)
                said = f.read().decode(errors="replace")
            if "cannot listen on" not in said or attempt == 2:
                raise RuntimeError(f"instance {inst.slot} exited with {inst.proc.returncode}; see {inst.log}")
            inst.port = free_ports(1)[0]
            self.start_instance(inst, wait=False)

    def _wait_answering(self, inst: Instance, timeout_s: float) -> bool:
        """True once it answers ListGroups; False if it exited; RuntimeError after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with grpc.insecure_channel(inst.address) as channel:
            stub = pb_grpc.GroupCoordinatorStub(channel)
            while time.monotonic() < deadline:
                if inst.proc is not None and inst.proc.poll() is not None:
                    return False
                with contextlib.suppress(grpc.RpcError):
                    if stub.ListGroups(pb.ListGroupsRequest(), timeout=1).error_code == 0:
                        return True
                time.sleep(0.1)
        raise RuntimeError(f"instance {inst.slot} did not come up; see {inst.log}")

    def kill_instance(self, inst: Instance) -> float:
        assert inst.proc is not None
        inst.proc.kill()
        t = time.monotonic()
        self.record(Event(t, Kind.NEMESIS, detail=f"instance-kill-9 {inst.address}", role="nemesis"))
        inst.proc.wait()
        return t

    def stop_instance(self, inst: Instance, timeout_s: float = 60.0) -> None:
        """SIGTERM: a clean leave of the coordinators' group (its partitions move at once)."""
        self.stop_instances([inst], timeout_s)

    def stop_instances(self, instances: list[Instance], timeout_s: float = 60.0) -> None:
        """SIGTERM to every one of `instances` at once, then wait for each (kill -9 past `timeout_s`)."""
        running = [i for i in instances if i.proc is not None and i.proc.poll() is None]
        for inst in running:
            assert inst.proc is not None
            self.record(Event(time.monotonic(), Kind.NEMESIS, detail=f"instance-sigterm {inst.address}",
                              role="nemesis"))
            inst.proc.send_signal(signal.SIGCONT)
            inst.proc.terminate()
        deadline = time.monotonic() + timeout_s
        for inst in running:
            assert inst.proc is not None
            try:
                inst.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                inst.proc.kill()
                inst.proc.wait()

    def signal_instance(self, inst: Instance, sig: signal.Signals) -> None:
        assert inst.proc is not None
        inst.stopped = sig == signal.SIGSTOP
        inst.proc.send_signal(sig)

    def wait_for(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition():
                return True
            time.sleep(0.1)
        return False

    def replay_times(self) -> list[tuple[int, int, float]]:
        """(state partition, records replayed, seconds) for every load the instances logged."""
        out = []
        for inst in self.instances:
            if inst.log.exists():
                for m in _LOADED.finditer(inst.log.read_text(errors="replace")):
                    out.append((int(m.group(1)), int(m.group(2)), float(m.group(4))))
        return out

    # --- lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> None:
        t = time.monotonic()
        self.start_brokers()
        self.start_phases.append(("brokers up, topics created", time.monotonic() - t))
        for inst in self.instances[:self.kafka_timing.instances]:
            self.start_instance(inst, wait=False)
        for inst in self.instances[:self.kafka_timing.instances]:
            self.wait_instance(inst)
        self.start_phases.append(("instances answering", time.monotonic() - t))
        self.router.start()
        if not self.wait_for(self.router.all_served, 120):
            raise RuntimeError(f"not every group is served: {self.router.owners()}")
        self.start_phases.append(("every group served", time.monotonic() - t))
        for m in self.members:
            m.proxy.retarget(self.router.owner(m.role) or self.instances[0].address)
            self.start_member(m)

    def read_back_fresh(self, timeout_s: float = 120.0) -> bool:
        """Stop every member, start a fresh instance, stop every other instance, and read back from the fresh one
        alone what it replayed. The fresh instance starts before the others leave (it is up by the time they
        hand over; what it is handed at its join it replays from the topic like the rest), and they all leave at
        once: the read-back waits for one process start and one hand-over, not one per instance."""
        for m in self.members:
            if m.proc is not None and m.proc.poll() is None:
                m.proc.send_signal(signal.SIGCONT)
                self.kill_member(m)
        fresh = self.instances[-1]
        self.stop_instance(fresh)
        self.start_instance(fresh)
        self.stop_instances([i for i in self.instances if i is not fresh])
        served = self.wait_for(lambda: all(self.router.owner(k) == fresh.address for k in self.groups), timeout_s)
        return served and self.wait_for(self.fetch_offsets, 30)

    def close(self) -> None:
        self.router.close()
        for inst in self.instances:
            if inst.proc is not None and inst.proc.poll() is None:
                inst.proc.send_signal(signal.SIGCONT)
                inst.proc.kill()
                inst.proc.wait()
        super().close()
        for inst in self.instances:
            for proxy in inst.kafka_proxies:
                proxy.close()
        if self.broker is not None:
            self.broker.close()
