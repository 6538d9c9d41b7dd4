"""The reference streams member (word count with a repartition, exactly-once) as separate processes on a real
Kafka 4.4 broker: one is killed with SIGKILL while lines keep arriving; once its session expires its tasks
move to the others, and every word is counted exactly once (no task's state lost or duplicated).

The checker is independent of the member's code: it reads the changelog with read_committed (what any new
owner of a task would restore) and compares the latest count per word with the words of every line produced.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from confluent_kafka import Producer

from groupcoord.clients.streams_member import PARTITIONS, changelog_topic, committed_changelog, split_words
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.kafka_metadata import KafkaMetadataSource
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.topic_creation import KafkaTopicCreator
from groupcoord.kafka_broker import KafkaBroker
from groupcoord.wire.v1 import streams_pb2 as spb
from groupcoord.wire.v1 import streams_pb2_grpc as spb_grpc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SESSION_MS = 8000
VOCAB = [f"w{i}" for i in range(30)]
ROOT = Path(__file__).resolve().parents[2]


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def coordinator(kafka_broker: KafkaBroker) -> Iterator[ServerThread]:
    source = KafkaMetadataSource(kafka_broker.bootstrap_servers, refresh_interval_s=0.3, request_timeout_s=10)
    assert source.refresh_now()
    source.start()
    config = BrokerConfig.from_mapping({"group.streams.min.heartbeat.interval.ms": 100,
                                        "group.streams.min.session.timeout.ms": 1000,
                                        "group.streams.heartbeat.interval.ms": 200,
                                        "group.streams.session.timeout.ms": SESSION_MS,
                                        # all three processes join before the first assignment (else stateful
                                        # tasks reach the later ones only through warm-ups, which is slower)
                                        "group.streams.initial.rebalance.delay.ms": 6000,
                                        "group.streams.assignment.interval.ms": 100})
    options = ServerOptions(listen="127.0.0.1:0", config=config, metadata_source=source, metadata_poll_s=0.2,
                            topic_creator=KafkaTopicCreator(kafka_broker.bootstrap_servers,
                                                            on_created=source.refresh_now))
    srv = ServerThread(options).start()
    try:
        yield srv
    finally:
        srv.stop()
        source.stop()


def start_member(srv: ServerThread, bootstrap: str, app: str, name: str, logs: Path,
                 exactly_once: bool = True) -> subprocess.Popen[bytes]:
    """A member process; work is committed every 300 ms, so a kill always leaves some produced, uncommitted."""
    out = (logs / f"{name}.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "groupcoord.clients.streams_member", "--coordinator", srv.address, "--bootstrap-servers",
         bootstrap, "--app", app, "--member-id", name, "--process-id", f"process-{name}", "--source",
         f"{app}-lines", "--commit-interval-ms", "300", *(["--exactly-once"] if exactly_once else [])],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=out, stderr=subprocess.STDOUT)


def describe(srv: ServerThread, app: str) -> spb.StreamsDescribedGroup:
    with grpc.insecure_channel(srv.address) as channel:
        stub = spb_grpc.StreamsGroupCoordinatorStub(channel)
        return stub.StreamsGroupDescribe(spb.StreamsGroupDescribeRequest(group_ids=[app]), timeout=10).groups[0]


def active_tasks(group: spb.StreamsDescribedGroup) -> dict[str, set[tuple[str, int]]]:
    return {m.member_id: {(t.subtopology_id, p) for t in m.active_tasks for p in t.partitions}
            for m in group.members}


def counted(bootstrap: str, app: str) -> Counter[str]:
    total: Counter[str] = Counter()
    for p in range(PARTITIONS):
        total.update(committed_changelog(bootstrap, changelog_topic(app), p))
    return total


def test_a_member_killed_mid_stream_loses_and_duplicates_no_task_state(
        kafka_broker: KafkaBroker, unique: str, coordinator: ServerThread, tmp_path: Path) -> None:
    app, bootstrap = unique, kafka_broker.bootstrap_servers
    kafka_broker.create_topic(f"{app}-lines", PARTITIONS)
    rng = random.Random(11)
    lines = [" ".join(rng.choice(VOCAB) for _ in range(4)) for _ in range(1200)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})

    def produce(batch: list[str], pace_s: float = 0.0) -> None:
        for i, line in enumerate(batch):
            producer.produce(f"{app}-lines", value=line.encode(), partition=i % PARTITIONS)
            if pace_s and i % 20 == 0:
                producer.flush(10)
                time.sleep(pace_s)
        assert producer.flush(30) == 0

    produce(lines[:400])
    members = {name: start_member(coordinator, bootstrap, app, name, tmp_path) for name in ("a", "b", "c")}
    try:
        def all_three_run_tasks() -> bool:
            owned = active_tasks(describe(coordinator, app))
            return set(owned) == {"a", "b", "c"} and all(owned.values()) \
                and sum(len(t) for t in owned.values()) == 2 * PARTITIONS

        wait_until(all_three_run_tasks, 120, "three members running all eight tasks")
        print("before the kill:", active_tasks(describe(coordinator, app)))
        wait_until(lambda: sum(counted(bootstrap, app).values()) > 0, 60, "the first counts in the changelog")
        victim_tasks = active_tasks(describe(coordinator, app))["b"]

        feeder = threading.Thread(target=produce, args=(lines[400:], 0.05))
        feeder.start()
        time.sleep(0.5)  # mid-stream: b has read, written and committed while lines keep arriving
        members["b"].send_signal(signal.SIGKILL)
        members["b"].wait(10)
        feeder.join(120)
        assert not feeder.is_alive()

        def moved() -> bool:
            owned = active_tasks(describe(coordinator, app))
            return "b" not in owned and victim_tasks <= owned.get("a", set()) | owned.get("c", set())

        wait_until(moved, 60, "b's session to expire and its tasks to move to a and c")
        expected = split_words(lines)
        wait_until(lambda: sum(counted(bootstrap, app).values()) >= sum(expected.values()), 120,
                   "every word of every line to be counted")
        time.sleep(1.0)  # anything counted twice would show up now
        assert counted(bootstrap, app) == expected, "a word was lost or counted twice"
        assert all(p.poll() is None for n, p in members.items() if n != "b"), "the survivors kept running"
    finally:
        for p in members.values():
            if p.poll() is None:
                p.terminate()
        for p in members.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        for log in sorted(tmp_path.glob("*.log")):
            print(f"--- {log.name}\n{log.read_text()[-3000:]}")
