"""Warm-up tasks of the reference streams member, exactly-once, on a real Kafka 4.4 broker: a second process
joins a group whose one member runs every task; the stateful tasks it should get stay active on the live
owner while it restores them from the changelog (read_committed, no processing), and move to it once its
reported lag is within acceptable.recovery.lag. The checker reads the changelog with read_committed."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer

from groupcoord.clients.streams_member import (
    PARTITIONS,
    WordCountMember,
    changelog_topic,
    committed_changelog,
    split_words,
)
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.kafka_metadata import KafkaMetadataSource
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.topic_creation import KafkaTopicCreator
from groupcoord.kafka_broker import KafkaBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

VOCAB = [f"w{i}" for i in range(30)]


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def coordinator(kafka_broker: KafkaBroker) -> Iterator[ServerThread]:
    source = KafkaMetadataSource(kafka_broker.bootstrap_servers, refresh_interval_s=0.3, request_timeout_s=10)
    assert source.refresh_now()
    source.start()
    config = BrokerConfig.from_mapping({"group.streams.min.heartbeat.interval.ms": 100,
                                        "group.streams.min.session.timeout.ms": 1000,
                                        "group.streams.heartbeat.interval.ms": 200,
                                        "group.streams.session.timeout.ms": 10_000,
                                        "group.streams.initial.rebalance.delay.ms": 0,
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


def test_exactly_once_a_stateful_task_moves_off_a_live_owner_after_a_read_committed_warm_up(
        kafka_broker: KafkaBroker, unique: str, coordinator: ServerThread) -> None:
    app, bootstrap = unique, kafka_broker.bootstrap_servers
    kafka_broker.create_topic(f"{app}-lines", PARTITIONS)
    rng = random.Random(5)
    lines = [" ".join(rng.choice(VOCAB) for _ in range(4)) for _ in range(400)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})

    def produce(batch: list[str]) -> None:
        for i, line in enumerate(batch):
            producer.produce(f"{app}-lines", value=line.encode(), partition=i % PARTITIONS)
        assert producer.flush(30) == 0

    produce(lines[:200])
    a = WordCountMember(coordinator.address, app, "a", "pa", bootstrap, source=f"{app}-lines", exactly_once=True)
    b = WordCountMember(coordinator.address, app, "b", "pb", bootstrap, source=f"{app}-lines", exactly_once=True)
    warmed: set[int] = set()
    try:
        def step(members: list[WordCountMember]) -> None:
            for m in members:
                m.heartbeat()
                m.step()
            warmed.update(b.warmups)

        def total(members: list[WordCountMember]) -> int:
            return sum(sum(m.counts().values()) for m in members)

        first = sum(split_words(lines[:200]).values())
        wait_until(lambda: step([a]) is None and total([a]) == first and len(a.active) == 2 * PARTITIONS, 120,
                   "a running every task and counting the first lines")
        wait_until(lambda: step([a, b]) is None and bool(b.stores) and total([a, b]) == first, 120,
                   "a stateful task moving to b after its warm-up")
        assert warmed and set(b.stores) <= warmed and a.stores and not set(a.stores) & set(b.stores)
        produce(lines[200:])
        expected = split_words(lines)
        wait_until(lambda: step([a, b]) is None and total([a, b]) == sum(expected.values()), 120,
                   "both counting the rest")
        assert a.counts() + b.counts() == expected
        in_changelog: Counter[str] = Counter()
        for p in range(PARTITIONS):
            in_changelog.update(committed_changelog(bootstrap, changelog_topic(app), p))
        assert in_changelog == expected, "a word was lost or counted twice"
    finally:
        a.close()
        b.close()
