"""A stray loopback connection must not fail a Spark query.

Seen in CI: a driver's query died at start with "Python worker failed to connect back ... Authentication
failed". Spark started its Python worker and accepted the first connection on a fresh loopback port; a client
elsewhere on the machine that was still retrying a port the kernel had since reused (a Kafka client of a stopped
cluster) connected first, and Spark failed the query. The fault injected here is that stray client, made certain:
a thread connects to every loopback port that starts listening while the driver runs and sends a wrong secret.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from groupcoord.clients.spark_driver import process_tree
from groupcoord.embedded_kafka import EmbeddedKafka

from .conftest import LaunchDriver, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

TOPIC = "stray-connections"
RECORDS = 300
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp
# 127.0.0.1, 0.0.0.0, ::1, ::, and ::ffff:127.0.0.1 (how a JVM's dual-stack socket bound to 127.0.0.1 shows)
_LOOPBACK = {"0100007F", "00000000", "00000000000000000000000001000000", "00000000000000000000000000000000",
             "0000000000000000FFFF00000100007F"}


def _loopback_listeners() -> dict[int, str]:
    """Listening loopback (or wildcard) TCP ports and their socket inodes."""
    ports: dict[int, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, port = fields[1].split(":")
            if fields[3] == _LISTEN and address in _LOOPBACK:
                ports[int(port, 16)] = fields[9]
    return ports


def _socket_inodes(pids: list[int]) -> set[str]:
    inodes: set[str] = set()
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        try:
            for fd in fd_dir.iterdir():
                target = str(fd.readlink()) if fd.is_symlink() else ""
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:["):-1])
        except OSError:
            continue
    return inodes


class StrayConnector(threading.Thread):
    """Connects once to each loopback port that starts listening after it starts, and sends a wrong secret
    (a well-formed length-prefixed string, as Spark's handshake expects) before closing."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="stray-connector")
        self._before = set(_loopback_listeners())
        self._stopping = threading.Event()
        self.hit: dict[int, str] = {}  # port -> inode of the listener

    def run(self) -> None:
        while not self._stopping.is_set():
            for port, inode in _loopback_listeners().items():
                if port in self._before or port in self.hit:
                    continue
                self.hit[port] = inode
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                        s.sendall(b"\x00\x00\x00\x0cstray-client")
                        time.sleep(0.05)
                except OSError:
                    pass
            time.sleep(0.002)

    def stop(self) -> None:
        self._stopping.set()
        self.join(5)


def test_a_query_survives_a_stray_client_connecting_to_every_new_loopback_port(
        kafka: EmbeddedKafka, launch_driver: LaunchDriver) -> None:
    kafka.create_topic(TOPIC, 2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"x", partition=i % 2)
    producer.flush(30)

    stray = StrayConnector()
    stray.start()
    try:
        driver = launch_driver("stray", "stray-group", TOPIC, "--sink", "rows", "--starting-offsets", "earliest",
                               "--trigger-ms", "200", "--max-records", str(RECORDS))
        driver_sockets: set[str] = set()

        def finished() -> bool:
            if driver.alive():
                driver_sockets.update(_socket_inodes(process_tree(driver.pid)))
                return False
            return True

        wait_until(finished, 240, "the driver to read every record and stop", (driver,))
    finally:
        stray.stop()
    assert driver.proc is not None and driver.proc.returncode == 0, driver.progress()
    assert driver.progress()["records"] == RECORDS
    hit_in_driver = [port for port, inode in stray.hit.items() if inode in driver_sockets]
    print(f"\nstray connections: {len(stray.hit)} ports, {len(hit_in_driver)} of them the driver's")
    assert hit_in_driver, "the stray client never reached a port of the driver: the fault was not injected"
