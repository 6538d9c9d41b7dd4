"""A real Apache Kafka broker for tests: KRaft, formatted fresh, on free loopback ports.

Why: librdkafka's mock cluster (groupcoord.embedded_kafka) stays the fast default, but it does not fence
transactional producers, compact, create partitions or delete records. Claims that rest on those need the
real broker. Its jars come from Maven Central (kafka-broker/pom.xml, installed once into
.cache/kafka-<version>/libs by scripts/kafka-broker.sh); this module only does what Kafka's own
kafka-storage.sh and kafka-server-start.sh do: `kafka.tools.StorageTool format`, then `kafka.Kafka`.

Every node is a combined broker+controller with a static quorum (`controller.quorum.voters`), so formatting
needs no `--standalone`. The configs shorten what tests would otherwise wait for: one partition for the
internal topics, no initial rebalance delay, group session minimums low enough for 0.5-3 s test sessions,
and a log cleaner that wakes every 100 ms.

Command line, for a broker to poke at by hand::

    python -m groupcoord.kafka_broker --brokers 1 --topic orders:12

prints the bootstrap servers and serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from groupcoord.child_processes import die_with_parent, free_ports, ports_in_use

__all__ = ["KAFKA_VERSION", "PRODUCTION_JVM_OPTIONS", "KafkaBroker", "KafkaBrokerError", "PortInUse", "install", "main"]

KAFKA_VERSION = "4.4.0"
_CHECKOUT = Path(__file__).resolve().parents[1]
_INSTALL_SCRIPT = _CHECKOUT / "scripts" / "kafka-broker.sh"
_START_TIMEOUT_S = 90.0
_START_ATTEMPTS = 3  # a port taken between the pick and the bind (another suite on the machine): new ports
_ADMIN_TIMEOUT_S = 30.0

# Broker settings every test broker gets (Kafka's names); callers may override any of them.
TEST_BROKER_CONFIG: Mapping[str, str] = {
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "group.consumer.min.session.timeout.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "50",
    "log.cleaner.backoff.ms": "100",
    # KIP-1263 made synchronous, so a heartbeat's answer depends only on the requests before it: the
    # differential suite (tests/differential) compares Kafka's coordinator with groupcoord step by step.
    "group.consumer.assignor.offload.enable": "false",
    "group.consumer.assignment.interval.ms": "0",
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
}


# What Kafka's own kafka-server-start.sh and kafka-run-class.sh give a broker (KAFKA_HEAP_OPTS and
# KAFKA_JVM_PERFORMANCE_OPTS): for benchmarks that compare with Kafka as it runs in production.
PRODUCTION_JVM_OPTIONS = ("-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                          "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent")


class KafkaBrokerError(RuntimeError):
    """The broker could not be installed or started; the message carries Kafka's own output."""


class PortInUse(KafkaBrokerError):
    """A node exited at start-up while another process held one of its ports (`ports`): picked free, taken
    before the JVM bound it. Kafka says nothing itself (no SLF4J binding), so the ports are probed."""

    def __init__(self, message: str, ports: list[int]) -> None:
        super().__init__(message)
        self.ports = ports


def install(version: str = KAFKA_VERSION) -> Path:
    """The folder of the broker's jars, downloaded from Maven Central on first use (seconds)."""
    home = os.environ.get("GROUPCOORD_KAFKA_HOME")
    libs = Path(home) / "libs" if home else _CHECKOUT / ".cache" / f"kafka-{version}" / "libs"
    if (libs.parent / "installed").is_file():
        return libs
    if os.environ.get("GROUPCOORD_NO_INSTALL"):  # the test suite: installing is `make test`'s visible step
        raise KafkaBrokerError(f"Kafka {version} is not installed in {libs}: run `make kafka-broker` (Java 17 and "
                               "Maven fetch it from Maven Central), or `make test`, which runs it first")
    if not _INSTALL_SCRIPT.is_file():
        raise KafkaBrokerError(f"Kafka {version} is not installed in {libs} and {_INSTALL_SCRIPT} is missing")
    done = subprocess.run(["bash", str(_INSTALL_SCRIPT)], env={**os.environ, "KAFKA_VERSION": version},
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise KafkaBrokerError(f"installing Kafka {version} failed:\n{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def new_cluster_id() -> str:
    """A KRaft cluster id: a random UUID in URL-safe base64, never starting with "-" (Kafka's Uuid.randomUuid
    rule: the storage tool's argument parser would take such an id for an option and refuse to format)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaBroker:
    """A running Kafka cluster of `brokers` nodes; use as a context manager or call `close()`.

    Node ids are 1..brokers. `config` applies to every node, `node_config` to one (e.g. `broker.rack`). The
    data lives in a fresh temporary folder removed on close. `jvm_options` replaces the test flags (heap, C1
    only, serial GC) of the broker JVMs, e.g. with `PRODUCTION_JVM_OPTIONS` for a benchmark.

    `extra_listeners` adds plaintext listeners: name -> per node (port bound, port advertised). A client that
    bootstraps on a listener gets that listener's advertised addresses in Metadata, so advertising a proxy's
    port puts every connection of that client through the proxy (the fault suite cuts one client off Kafka).
    `kill_node` and `restart_node` take one node down (kill -9) and bring it back on the same data.
    """

    def __init__(self, brokers: int = 1, *, config: Mapping[str, str | int] | None = None,
                 node_config: Mapping[int, Mapping[str, str | int]] | None = None,
                 topics: Mapping[str, int] | None = None, heap: str = "384m",
                 jvm_options: Sequence[str] | None = None,
                 extra_listeners: Mapping[str, Sequence[tuple[int, int]]] | None = None) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be >= 1, got {brokers}")
        self.brokers = brokers
        self.libs = install()
        self._dir = Path(tempfile.mkdtemp(prefix="kafka-"))
        self._procs: list[subprocess.Popen[bytes]] = []
        self._jvm_options = list(jvm_options) if jvm_options is not None else None
        self._heap = heap
        self._extra_listeners = {k: list(v) for k, v in (extra_listeners or {}).items()}
        self._lock = threading.Lock()
        self._broker_ports: list[int] = []
        self._controller_ports: list[int] = []
        overrides = {k: str(v) for k, v in (config or {}).items()}
        started = time.monotonic()
        try:
            for attempt in range(_START_ATTEMPTS):
                try:
                    self._format_and_start(overrides, node_config or {})
                    break
                except PortInUse as e:  # taken between the pick and the JVM's bind: again on new ports, if ours
                    if attempt == _START_ATTEMPTS - 1 or not set(e.ports) <= self._own_ports():
                        raise
                    self._kill_all()
                    shutil.rmtree(self._dir, ignore_errors=True)
                    self._dir = Path(tempfile.mkdtemp(prefix="kafka-"))
            self.start_seconds = time.monotonic() - started
            self.admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
            for name, partitions in (topics or {}).items():
                self.create_topic(name, partitions)
        except BaseException:
            self.close()
            raise

    # --- start ----------------------------------------------------------------------------------------
    def _format_and_start(self, overrides: Mapping[str, str],
                          node_config: Mapping[int, Mapping[str, str | int]]) -> None:
        ports = free_ports(2 * self.brokers)
        self._broker_ports, self._controller_ports = ports[:self.brokers], ports[self.brokers:]
        voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(self._controller_ports))
        internal_rf = str(min(self.brokers, 3))
        cluster_id = new_cluster_id()
        formats = []
        for node in range(1, self.brokers + 1):
            mine = {**overrides, **{k: str(v) for k, v in node_config.get(node, {}).items()}}
            props = self._write_properties(node, voters, internal_rf, mine)
            formats.append(("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)))
        # Side by side: each format is a JVM start of seconds on a loaded machine.
        with ThreadPoolExecutor(len(formats)) as pool:
            for done in [pool.submit(self._run_java, *args) for args in formats]:
                done.result()
        for node in range(1, self.brokers + 1):
            self._procs.append(self._start_node(node, self._heap))
        self._wait_ready(time.monotonic() + _START_TIMEOUT_S)

    def _own_ports(self) -> set[int]:
        return {*self._broker_ports, *self._controller_ports}

    def node_ports(self, node: int) -> list[int]:
        """Every port node `node` listens on: its broker and controller listeners and its extra listeners."""
        return [self._broker_ports[node - 1], self._controller_ports[node - 1],
                *(ports[node - 1][0] for ports in self._extra_listeners.values())]

    def _write_properties(self, node: int, voters: str, internal_rf: str, overrides: Mapping[str, str]) -> Path:
        broker_port, controller_port = self._broker_ports[node - 1], self._controller_ports[node - 1]
        log_dir = self._dir / f"node-{node}" / "data"
        log_dir.mkdir(parents=True)
        props: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": str(node),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(log_dir),
            "offsets.topic.replication.factor": internal_rf,
            "transaction.state.log.replication.factor": internal_rf,
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": internal_rf,
            "share.coordinator.state.topic.min.isr": "1",
            **TEST_BROKER_CONFIG,
            **overrides,
        }
        for name, ports in self._extra_listeners.items():
            bound, advertised = ports[node - 1]
            props["listeners"] += f",{name}://127.0.0.1:{bound}"
            props["advertised.listeners"] += f",{name}://127.0.0.1:{advertised}"
            props["listener.security.protocol.map"] += f",{name}:PLAINTEXT"
        path = self._dir / f"node-{node}" / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def _java(self, main_class: str, *args: str, heap: str = "256m", jvm: Sequence[str] | None = None) -> list[str]:
        # C1 only and serial GC: a test broker starts faster and shares 2 cores with everything else.
        flags = [f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"] if jvm is None else list(jvm)
        return ["java", *flags, "-Djava.awt.headless=true", "-cp", f"{self.libs}/*", main_class, *args]

    def _run_java(self, main_class: str, *args: str) -> None:
        done = subprocess.run(self._java(main_class, *args), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise KafkaBrokerError(f"{main_class} {' '.join(args[:1])} failed ({done.returncode}):\n"
                                   f"{(done.stdout + done.stderr)[-4000:]}")

    def _start_node(self, node: int, heap: str) -> subprocess.Popen[bytes]:
        log = open(self._dir / f"node-{node}" / "stdout.log", "ab")  # noqa: SIM115 - the child owns it
        try:
            props = str(self._dir / f"node-{node}" / "server.properties")
            command = self._java("kafka.Kafka", props, heap=heap, jvm=self._jvm_options)
            return subprocess.Popen(die_with_parent(command), stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()

    def _wait_ready(self, deadline: float) -> None:
        """Ready when Metadata lists every broker (a node answers only once the quorum has a leader)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": "0"})
        while True:
            for node, proc in enumerate(self._procs, start=1):
                if proc.poll() is not None:
                    taken = ports_in_use(self.node_ports(node))
                    message = (f"Kafka node {node} exited with {proc.returncode}"
                               + (f"; its ports {taken} are in use by another process" if taken else "")
                               + f":\n{self.node_output(node)[-4000:]}")
                    raise PortInUse(message, taken) if taken else KafkaBrokerError(message)
            try:
                if len(admin.list_topics(timeout=1).brokers) == self.brokers:
                    return
            except Exception:  # noqa: BLE001 - not up yet: KafkaException(_TRANSPORT) and friends
                pass
            if time.monotonic() > deadline:
                raise KafkaBrokerError(f"Kafka did not become ready in {_START_TIMEOUT_S:.0f} s:\n"
                                       f"{self.node_output(1)[-4000:]}")
            time.sleep(0.1)

    def node_output(self, node: int) -> str:
        """What node `node`'s JVM printed (Kafka logs nothing without an SLF4J binding; errors still show)."""
        path = self._dir / f"node-{node}" / "stdout.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # --- lifecycle ------------------------------------------------------------------------------------
    def __enter__(self) -> KafkaBroker:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Kill every node and remove the data. Safe to call twice.

        SIGKILL, not a controlled shutdown: the data is thrown away, and three nodes moving leaderships
        among themselves on SIGTERM take seconds a test session should not wait.
        """
        self._kill_all()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _kill_all(self) -> None:
        with self._lock:
            procs, self._procs = self._procs, []
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        for proc in procs:
            proc.wait()

    def kill_node(self, node: int) -> None:
        """kill -9 node `node` (1-based) and wait for it to exit; its data stays for `restart_node`."""
        with self._lock:
            proc = self._procs[node - 1]
        if proc.poll() is None:
            proc.kill()
        proc.wait()

    def restart_node(self, node: int, timeout_s: float = _START_TIMEOUT_S) -> None:
        """Start node `node` again on its data and wait until Metadata lists every node. Its ports are fixed (the
        quorum's voters name them): while another process holds one (it was free while the node was down), start
        it again every second until `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                if self._procs[node - 1].poll() is None:
                    raise KafkaBrokerError(f"node {node} is still running")
                self._procs[node - 1] = self._start_node(node, self._heap)
            try:
                self._wait_ready(deadline)
                return
            except PortInUse:
                if time.monotonic() + 1 > deadline:
                    raise
                time.sleep(1)

    @property
    def pids(self) -> list[int]:
        """The nodes' JVM process ids (`setpriv` execs the JVM, so the child is the JVM)."""
        return [p.pid for p in self._procs]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self._broker_ports)

    # --- admin (Kafka's own APIs, unlike the mock) -----------------------------------------------------
    def create_topic(self, name: str, partitions: int, replication_factor: int = 1,
                     config: Mapping[str, str] | None = None) -> None:
        """CreateTopics, waiting until every broker's metadata has the topic's leaders."""
        new = NewTopic(name, partitions, replication_factor, config=dict(config or {}))
        self.admin.create_topics([new], operation_timeout=_ADMIN_TIMEOUT_S)[name].result(_ADMIN_TIMEOUT_S)
        self._wait_partitions(name, partitions)

    def delete_topic(self, name: str) -> None:
        self.admin.delete_topics([name], operation_timeout=_ADMIN_TIMEOUT_S)[name].result(_ADMIN_TIMEOUT_S)
        deadline = time.monotonic() + _ADMIN_TIMEOUT_S
        while name in self.admin.list_topics(timeout=5).topics:
            if time.monotonic() > deadline:
                raise KafkaBrokerError(f"topic {name!r} still listed {_ADMIN_TIMEOUT_S:.0f} s after deletion")
            time.sleep(0.05)

    def create_partitions(self, name: str, total: int) -> None:
        """CreatePartitions: grow `name` to `total` partitions, keeping its topic id."""
        futures = self.admin.create_partitions([NewPartitions(name, total)], operation_timeout=_ADMIN_TIMEOUT_S)
        futures[name].result(_ADMIN_TIMEOUT_S)
        self._wait_partitions(name, total)

    def delete_records(self, name: str, partition: int, before_offset: int) -> int:
        """DeleteRecords: move the partition's log start offset up to `before_offset`; returns the new one."""
        futures = self.admin.delete_records([TopicPartition(name, partition, before_offset)],
                                            operation_timeout=_ADMIN_TIMEOUT_S)
        (future,) = futures.values()
        return int(future.result(_ADMIN_TIMEOUT_S).low_watermark)

    def _wait_partitions(self, name: str, partitions: int) -> None:
        deadline = time.monotonic() + _ADMIN_TIMEOUT_S
        while True:
            topic = self.admin.list_topics(name, timeout=5).topics.get(name)
            parts = topic.partitions if topic is not None and topic.error is None else {}
            if len(parts) == partitions and all(p.leader >= 0 for p in parts.values()):
                return
            if time.monotonic() > deadline:
                raise KafkaBrokerError(f"topic {name!r} has no leader for all {partitions} partitions in time")
            time.sleep(0.05)

    def __repr__(self) -> str:
        return f"KafkaBroker(brokers={self.brokers}, bootstrap_servers={self.bootstrap_servers!r})"


def _parse_topic(value: str) -> tuple[str, int]:
    name, _, partitions = value.rpartition(":")
    if not name or not partitions.isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME:PARTITIONS, got {value!r}")
    return name, int(partitions)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m groupcoord.kafka_broker", description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--topic", type=_parse_topic, action="append", default=[], metavar="NAME:PARTITIONS")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with KafkaBroker(args.brokers, topics=dict(args.topic)) as broker:
        print(broker.bootstrap_servers, flush=True)
        print(f"Kafka {KAFKA_VERSION}: {args.brokers} node(s) ready in {broker.start_seconds:.1f} s",
              file=sys.stderr, flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":  # last: it uses every definition above
    raise SystemExit(main())
