"""Markers by folder, a guard that keeps the fast set in-process, and the fixtures every folder may use.

`make test-fast` runs `pytest -m "not integration and not kafka and not spark and not browser"`: the in-process
tests (core, assignors, conformance, clients and tools without servers). Which tests are heavy is decided here,
by folder (or by file where a folder is mixed), in `HEAVY`, never by remembering to decorate a test. A test
that no entry marks and that nevertheless starts a process, a JVM, Spark, a gRPC server or a listening socket
fails with a message naming this file: nothing heavy hides in the fast set.

The real Kafka broker is one per session, shared by tests/kafka, tests/sharding and tests/realkafka (see
tests/realkafka/fixtures.py). Tools come from `make test`'s set-up step, never from a test: a missing one
fails with the command that installs it (GROUPCOORD_NO_INSTALL, read by groupcoord.kafka_broker.install).
"""

from __future__ import annotations

import multiprocessing.process
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

pytest_plugins = ["tests.realkafka.fixtures"]

os.environ.setdefault("GROUPCOORD_NO_INSTALL", "1")
# Spark's JVMs started by tests (each driver's, an in-process session's) run with the C1 compiler only and the
# serial collector, as the Kafka broker's and the Spark cluster's daemons already do: a JVM that lives for one
# test spends most of its CPU in C2's compiler threads and G1's, and on 2 cores every other process waits for
# that. What the JVM runs is unchanged. (spark-submit puts SPARK_SUBMIT_OPTS on the driver JVM's command line.)
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")

TESTS = Path(__file__).resolve().parent

# Path below tests/ (a folder, or one file of a mixed folder) -> the markers of every test in it.
#   integration: starts a coordinator, a CLI process, a worker process or a socket server on loopback
#   kafka:       starts the real Apache Kafka broker or another JVM (tests/realkafka, the differential suite)
#   spark:       starts Spark (local mode, a JVM per session)
#   browser:     drives headless chromium
# The longest matching entry wins, so a file entry overrides its folder's.
HEAVY: dict[str, tuple[str, ...]] = {
    "spark": ("spark", "integration"),
    "realkafka": ("kafka", "integration"),
    "differential": ("kafka", "integration"),
    "conformance/test_kafka_jar_assignors.py": ("kafka",),
    "kafka": ("kafka", "integration"),
    "sharding": ("kafka", "integration"),
    "web/test_web_view_browser.py": ("browser", "integration"),
    "web": ("integration",),
    "integration": ("integration",),
    "auth": ("integration",),
    "deploy": ("integration",),
    "durability": ("integration",),
    "faults": ("integration",),
    "streams": ("integration",),
    "limits": ("integration",),
    "clients": ("integration",),
    "classic/test_grpc_classic.py": ("integration",),
    "docs/test_runnable_commands.py": ("integration",),
    "docs/test_runnable_blocks.py": ("integration",),
    "test_packaging.py": ("integration",),
    "test_architecture.py": ("integration",),
    "test_go_proto_drift.py": ("integration",),
    "test_plots.py": ("integration",),
    # In-process files of heavy folders (an empty entry: the fast set takes them).
    "auth/test_compose_tls.py": (),
    "deploy/test_commands_and_ports.py": (),
    "durability/test_file_log.py": (),
    "durability/test_snapshot_offsets.py": (),
    "faults/test_checker.py": (),
    "faults/test_checker_modern.py": (),
    "faults/test_nemesis.py": (),
    "web/test_rebalance_timeline.py": (),
}
HEAVY_MARKERS = frozenset(m for markers in HEAVY.values() for m in markers)


def markers_for(path: Path) -> tuple[str, ...]:
    """The markers `HEAVY` gives a test file: its own entry, else its nearest folder's."""
    rel = path.resolve().relative_to(TESTS).as_posix()
    for key in sorted(HEAVY, key=len, reverse=True):
        if rel == key or rel.startswith(key + "/"):
            return HEAVY[key]
    return ()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for marker in markers_for(item.path):
            item.add_marker(marker)


class HeavyInFastSet(AssertionError):
    pass


@pytest.fixture(autouse=True)
def _fast_tests_stay_in_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test without a heavy marker may not start processes or servers (it would slow `make test-fast`)."""
    if any(request.node.get_closest_marker(m) for m in HEAVY_MARKERS):
        yield
        return
    rel = request.node.path.resolve().relative_to(TESTS).as_posix()

    def refuse(what: str) -> Any:
        def guard(*args: Any, **kwargs: Any) -> Any:
            raise HeavyInFastSet(f"{request.node.nodeid} {what}, but no entry of HEAVY in tests/conftest.py marks "
                                 f"tests/{rel}: add its folder (or the file) there, so that `make test-fast` "
                                 "leaves it out")
        return guard

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("starts a process (subprocess)"))
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse("starts a process (multiprocessing)"))
    monkeypatch.setattr(grpc, "server", refuse("starts a gRPC server"))
    monkeypatch.setattr(grpc.aio, "server", refuse("starts a gRPC server"))
    monkeypatch.setattr(socket.socket, "listen", refuse("listens on a socket"))
    yield
