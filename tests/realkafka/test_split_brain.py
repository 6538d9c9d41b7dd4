"""Split brain on the real broker: a paused coordinator instance comes back as a zombie and is fenced.

Two `groupcoord serve` processes share a state topic in sharded Kafka mode while client threads commit offsets
through them, each following FindCoordinator, recording every acknowledged commit. One instance is paused with
SIGSTOP past the coordinators' session timeout; the other takes over its partitions (`init_transactions` fences
the paused one's transactional writers); then SIGCONT. Afterwards: every acknowledged commit is in the new
owner's OffsetFetch, and in the state topic (read_committed) no record written by a writer tenure follows a
record of a newer tenure of that partition, i.e. nothing the zombie appended after the takeover is visible.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.coordinator.runtime.kafka_txn import WRITER_HEADER
from groupcoord.kafka_broker import KafkaBroker
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PARTITIONS = 4
SESSION_MS = 3000
RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(bootstrap: str, topic: str, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "groupcoord", "--log-level", "INFO", "serve", "--listen", f"127.0.0.1:{port}",
             "--bootstrap-servers", bootstrap, "--state-topic", topic, "--state-partitions", str(PARTITIONS),
             "--state-session-timeout-ms", str(SESSION_MS), "--metadata-refresh-ms", "500"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)


class Committer(threading.Thread):
    """Commits increasing offsets for one group through whichever instance FindCoordinator names."""

    def __init__(self, group_id: str, addresses: list[str], stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.group_id = group_id
        self.addresses = addresses
        self.stop_event = stop
        self.acked: list[tuple[int, int]] = []  # (offset, port that acknowledged it)
        self.refused = 0
        self.next_offset = 1

    def _owner(self) -> str | None:
        for address in self.addresses:
            try:
                with grpc.insecure_channel(address) as channel:
                    resp = pb_grpc.GroupCoordinatorStub(channel).FindCoordinator(
                        pb.FindCoordinatorRequest(keys=[self.group_id]), timeout=2)
            except grpc.RpcError:
                continue
            (found,) = resp.coordinators
            if found.error_code == 0:
                return f"{found.host}:{found.port}"
        return None

    def run(self) -> None:
        owner: str | None = None
        while not self.stop_event.is_set():
            owner = owner or self._owner()
            if owner is None:
                time.sleep(0.05)
                continue
            offset = self.next_offset
            self.next_offset += 1
            request = pb.OffsetCommitRequest(group_id=self.group_id, generation_id_or_member_epoch=-1, topics=[
                pb.OffsetCommitRequestTopic(name="orders", partitions=[
                    pb.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                    committed_leader_epoch=-1)])])
            try:
                with grpc.insecure_channel(owner) as channel:
                    resp = pb_grpc.GroupCoordinatorStub(channel).OffsetCommit(request, timeout=2)
            except grpc.RpcError:
                self.refused += 1
                owner = None
                continue
            code = resp.error_code or resp.topics[0].partitions[0].error_code
            if code == 0:
                self.acked.append((offset, int(owner.rsplit(":", 1)[1])))
            else:
                assert code in RETRIABLE, (code, resp.error_message)
                self.refused += 1
                owner = None
            time.sleep(0.005)


def fetch(address: str, group_id: str) -> pb.OffsetFetchResponse:
    with grpc.insecure_channel(address) as channel:
        return pb_grpc.GroupCoordinatorStub(channel).OffsetFetch(
            pb.OffsetFetchRequest(group_id=group_id, member_epoch=-1), timeout=5)


def committed_offset(resp: pb.OffsetFetchResponse) -> int:
    for topic in resp.topics:
        for partition in topic.partitions:
            if topic.name == "orders" and partition.partition_index == 0:
                return int(partition.committed_offset)
    return -1


def writer_runs(bootstrap: str, topic: str, partition: int) -> list[str]:
    """The writer tags of `partition`'s committed records, consecutive repeats collapsed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "split-brain-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    runs: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return runs
                continue
            tag = dict(msg.headers() or []).get(WRITER_HEADER, b"").decode()
            if not runs or runs[-1] != tag:
                runs.append(tag)
        raise AssertionError(f"reading {topic}-{partition} did not reach its end")
    finally:
        consumer.close()


@pytest.fixture
def two_instances(kafka_broker: KafkaBroker, unique: str, tmp_path: Path) -> Iterator[tuple[list[Any], str]]:
    kafka_broker.create_topic(unique, PARTITIONS, config={"cleanup.policy": "compact"})
    kafka_broker.create_topic("orders", 1) if "orders" not in kafka_broker.admin.list_topics(timeout=10).topics \
        else None
    procs = []
    for i in range(2):
        port = free_port()
        procs.append((serve(kafka_broker.bootstrap_servers, unique, port, tmp_path / f"instance{i}.log"), port,
                      tmp_path / f"instance{i}.log"))
    try:
        yield procs, unique
    finally:
        for proc, _, _ in procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
                proc.wait(10)


def wait_for(condition: Any, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.1)


def test_a_paused_instance_is_fenced_and_no_acknowledged_commit_is_lost(
        kafka_broker: KafkaBroker, two_instances: tuple[list[Any], str]) -> None:
    procs, topic = two_instances
    addresses = [f"127.0.0.1:{port}" for _, port, _ in procs]
    groups: dict[int, str] = {}
    i = 0
    while len(groups) < PARTITIONS:
        groups.setdefault(state_partition(f"split-{i}", PARTITIONS), f"split-{i}")
        i += 1
    # Wait until both serve: each owns some partitions.
    wait_for(lambda: all(any(owner_port(addresses, g) == port for g in groups.values()) for _, port, _ in procs),
             "both instances own partitions")

    stop = threading.Event()
    committers = [Committer(g, addresses, stop) for g in groups.values()]
    for c in committers:
        c.start()
    wait_for(lambda: all(len(c.acked) >= 20 for c in committers), "every group has commits acknowledged")

    victim, victim_port, victim_log = procs[0]
    survivor_port = procs[1][1]
    victims_groups = [g for g in groups.values() if owner_port(addresses, g) == victim_port]
    assert victims_groups, "the paused instance owns some groups"
    os.kill(victim.pid, signal.SIGSTOP)
    try:
        # The survivor takes over every partition once the victim's session lapsed.
        wait_for(lambda: all(owner_port([addresses[1]], g) == survivor_port for g in groups.values()),
                 "the survivor serves every group", timeout_s=90)
        wait_for(lambda: all(any(port == survivor_port and o > 0 for o, port in c.acked[-5:]) for c in committers),
                 "commits are acknowledged by the survivor", timeout_s=60)
    finally:
        os.kill(victim.pid, signal.SIGCONT)
    # The zombie wakes up: it must stop serving the groups it lost; clients follow FindCoordinator.
    def zombie_refuses() -> bool:
        try:
            return all(fetch(f"127.0.0.1:{victim_port}", g).error_code in RETRIABLE for g in victims_groups)
        except grpc.RpcError:
            return False

    wait_for(zombie_refuses, "the resumed instance refuses the groups it lost")
    time.sleep(2)  # let the clients run through the resumed instance's rebalance
    stop.set()
    for c in committers:
        c.join(10)

    acknowledged = sum(len(c.acked) for c in committers)
    lost = 0
    for c in committers:
        wait_for(lambda c=c: owner_port(addresses, c.group_id) is not None, f"{c.group_id} has an owner")
        port = owner_port(addresses, c.group_id)
        resp = fetch(f"127.0.0.1:{port}", c.group_id)
        assert resp.error_code == 0, resp.error_message
        highest_acked = max(o for o, _ in c.acked)
        if committed_offset(resp) < highest_acked:
            lost += 1
    # Each tenure of a partition's writer is one run in the committed log: a zombie's record after a newer
    # tenure's record would make a tag appear twice.
    zombie_visible = 0
    for p in range(PARTITIONS):
        runs = writer_runs(kafka_broker.bootstrap_servers, topic, p)
        zombie_visible += len(runs) - len(set(runs))
    fenced_lines = [line for line in victim_log.read_text(errors="replace").splitlines() if "fenced" in line]
    print("\n".join(fenced_lines))
    print(f"split brain: {acknowledged} commits acknowledged, {lost} groups lost an acknowledged commit, "
          f"{zombie_visible} zombie runs visible, {sum(c.refused for c in committers)} refused/redirected, "
          f"{len(fenced_lines)} fenced log lines on the paused instance")
    assert lost == 0
    assert zombie_visible == 0
    assert "Traceback" not in victim_log.read_text(errors="replace"), "the fenced instance handled it cleanly"


def owner_port(addresses: list[str], group_id: str) -> int | None:
    """The port every listed instance names for `group_id` when they agree and it serves the group, else None."""
    answers = set()
    for address in addresses:
        try:
            with grpc.insecure_channel(address) as channel:
                resp = pb_grpc.GroupCoordinatorStub(channel).FindCoordinator(
                    pb.FindCoordinatorRequest(keys=[group_id]), timeout=2)
        except grpc.RpcError:
            answers.add(None)
            continue
        (found,) = resp.coordinators
        answers.add(found.port if found.error_code == 0 else None)
    if len(answers) != 1 or None in answers:
        return None
    (port,) = answers
    try:
        if fetch(f"127.0.0.1:{port}", group_id).error_code != 0:
            return None
    except grpc.RpcError:
        return None
    return port
