"""Fixtures for end-to-end tests with real Spark drivers (local mode, separate processes), the embedded Kafka
and an in-process coordinator reading topic metadata and lag from that Kafka.

Module-scoped: a Kafka cluster and a coordinator are shared by the tests of a module (each test uses its own
topic and group). Teardown order is drivers, then the coordinator, then the embedded Kafka: every Spark reader
must be gone before the process hosting Kafka closes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from groupcoord.clients.spark_driver import DriverProcess
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.kafka_lag import KafkaLagSource, partitions_of
from groupcoord.coordinator.runtime.kafka_metadata import KafkaMetadataSource
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.embedded_kafka import EmbeddedKafka

# Short heartbeats and session timeout: a crashed driver is fenced 3 s after its last heartbeat.
COORDINATOR_CONFIG: dict[str, Any] = {
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.heartbeat.interval.ms": 250,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.session.timeout.ms": 3000,
    "group.consumer.assignment.interval.ms": 200,
    "group.consumer.assignors": ["uniform", "lag-sticky", "range"],
}


@pytest.fixture(scope="module")
def kafka() -> Iterator[EmbeddedKafka]:
    with EmbeddedKafka(brokers=1) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def coordinator(kafka: EmbeddedKafka) -> Iterator[ServerThread]:
    """The coordinator as `groupcoord serve --bootstrap-servers` builds it, on a free loopback port."""
    metadata = KafkaMetadataSource(kafka.bootstrap_servers, refresh_interval_s=0.5)
    metadata.start()
    lag = KafkaLagSource(kafka.bootstrap_servers, partitions=lambda: partitions_of(metadata.snapshot()),
                         refresh_interval_s=0.5)
    lag.start()
    options = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping(COORDINATOR_CONFIG),
                            metadata_source=metadata, lag_provider=lag, metadata_poll_s=0.2)
    server = ServerThread(options).start()
    try:
        yield server
    finally:
        server.stop()
        lag.stop()
        metadata.stop()


LaunchDriver = Callable[..., DriverProcess]


@pytest.fixture
def launch_driver(tmp_path: Path, kafka: EmbeddedKafka, coordinator: ServerThread) -> Iterator[LaunchDriver]:
    """Start `python -m groupcoord.clients.spark_driver` processes; every one still running at the end is killed."""
    started: list[DriverProcess] = []

    def launch(name: str, group: str, topic: str, *extra: str) -> DriverProcess:
        driver = DriverProcess(name, tmp_path / name, [
            "--coordinator", coordinator.address, "--group", group, *(["--topic", topic] if topic else []),
            "--bootstrap-servers", kafka.bootstrap_servers, "--master", "local[1]", "--driver-memory", "512m",
            *extra]).start()
        started.append(driver)
        return driver

    try:
        yield launch
    finally:
        for driver in started:
            driver.kill()


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str,
               drivers: tuple[DriverProcess, ...] = ()) -> None:
    """Poll `condition`; on timeout fail with the tail of each driver's log."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        for d in drivers:
            if not d.alive() and d.progress().get("state") not in ("stopped",):
                pytest.fail(f"driver {d.name} exited (code {d.proc.returncode if d.proc else None}) while waiting "
                            f"for {what}:\n{_tail(d.output / 'driver.log')}")
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {d.name}\n{_tail(d.output / 'driver.log')}" for d in drivers)
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}\n{logs}")
        time.sleep(0.25)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
