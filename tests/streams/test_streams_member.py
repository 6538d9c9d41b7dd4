"""The reference streams member (word count with one repartition) on the embedded Kafka: a member leaves,
its tasks move with their state, and no word is lost or counted twice."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer

from groupcoord.clients.streams_member import (
    PARTITIONS,
    WordCountMember,
    changelog_counts,
    changelog_topic,
    repartition_topic,
    split_words,
)
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.embedded_kafka import EmbeddedKafka
from tests.integration.conftest import start_server

APP = "wc"
VOCAB = [f"w{i}" for i in range(40)]


def wait_until(cond: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def kafka() -> Iterator[EmbeddedKafka]:
    with EmbeddedKafka(brokers=1) as k:
        for topic in ("lines", repartition_topic(APP), changelog_topic(APP)):
            k.create_topic(topic, PARTITIONS)
        yield k


@pytest.fixture
def coordinator() -> Iterator[ServerThread]:
    topics = {"lines": PARTITIONS, repartition_topic(APP): PARTITIONS, changelog_topic(APP): PARTITIONS}
    srv = start_server(topics, **{"group.streams.heartbeat.interval.ms": 100,
                                  "group.streams.session.timeout.ms": 5000,
                                  "group.streams.initial.rebalance.delay.ms": 300,
                                  "group.streams.assignment.interval.ms": 100})
    try:
        yield srv
    finally:
        srv.stop()


def produce_lines(bootstrap: str, lines: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, line in enumerate(lines):
        producer.produce("lines", value=line.encode(), partition=i % PARTITIONS)
    producer.flush(10)


def test_a_member_leaves_and_every_word_is_counted_exactly_once(kafka: EmbeddedKafka,
                                                                coordinator: ServerThread) -> None:
    rng = random.Random(7)
    first = [" ".join(rng.choice(VOCAB) for _ in range(5)) for _ in range(120)]
    second = [" ".join(rng.choice(VOCAB) for _ in range(5)) for _ in range(120)]
    bootstrap = kafka.bootstrap_servers
    produce_lines(bootstrap, first)
    a = WordCountMember(coordinator.address, APP, "a", "pa", bootstrap)
    b = WordCountMember(coordinator.address, APP, "b", "pb", bootstrap)
    try:
        def run(members: list[WordCountMember], expected_total: int) -> Callable[[], bool]:
            def done() -> bool:
                for m in members:
                    m.heartbeat()
                    m.step()
                return sum(sum(m.counts().values()) for m in members) == expected_total \
                    and all(m.active for m in members)
            return done

        wait_until(run([a, b], sum(split_words(first).values())), what="both members counted the first lines")
        assert a.stores and b.stores, "each member runs stateful tasks"
        assert not set(a.stores) & set(b.stores)
        moved = set(b.stores)
        b.leave()
        produce_lines(bootstrap, second)
        expected = split_words(first + second)
        wait_until(run([a], sum(expected.values())), what="a counted everything after b left")
        assert moved <= set(a.stores), "b's stateful tasks moved to a"
        assert len(a.active) == 2 * PARTITIONS
        assert a.counts() == expected, "a word was lost or counted twice"
        assert changelog_counts(bootstrap, APP) == expected
    finally:
        a.close()
        b.close()


def test_a_stateful_task_moves_off_a_live_owner_once_the_new_process_has_warmed_it_up(
        kafka: EmbeddedKafka, coordinator: ServerThread) -> None:
    """KIP-441 as the coordinator applies it: b joins a group where a runs every task; the stateful tasks b
    should get stay active on a while b restores them as warm-ups (no processing), b reports its changelog
    offsets, and once caught up the tasks move to b with their state; nothing is lost or counted twice."""
    rng = random.Random(11)
    first = [" ".join(rng.choice(VOCAB) for _ in range(5)) for _ in range(120)]
    second = [" ".join(rng.choice(VOCAB) for _ in range(5)) for _ in range(120)]
    bootstrap = kafka.bootstrap_servers
    produce_lines(bootstrap, first)
    a = WordCountMember(coordinator.address, APP, "a", "pa", bootstrap)
    b = WordCountMember(coordinator.address, APP, "b", "pb", bootstrap)
    warmed: set[int] = set()
    try:
        def step(members: list[WordCountMember]) -> None:
            for m in members:
                m.heartbeat()
                m.step()
            warmed.update(b.warmups)
            assert not set(a.stores) & set(b.stores), "a stateful task runs in one place only"

        def a_alone() -> bool:
            step([a])
            return sum(a.counts().values()) == sum(split_words(first).values()) and len(a.active) == 2 * PARTITIONS

        wait_until(a_alone, what="a running every task and counting the first lines")
        total = sum(split_words(first).values())

        def moved_to_b() -> bool:
            step([a, b])
            return bool(b.stores) and sum(a.counts().values()) + sum(b.counts().values()) == total

        wait_until(moved_to_b, what="a stateful task moving to b")
        assert warmed and set(b.stores) <= warmed, "b warmed up the stateful tasks it took over"
        assert a.stores, "a is alive and keeps its share of the stateful tasks"
        produce_lines(bootstrap, second)
        expected = split_words(first + second)

        def all_counted() -> bool:
            step([a, b])
            return sum(a.counts().values()) + sum(b.counts().values()) == sum(expected.values())

        wait_until(all_counted, what="both counting the second lines")
        assert a.counts() + b.counts() == expected, "a word was lost or counted twice"
        assert changelog_counts(bootstrap, APP) == expected
    finally:
        a.close()
        b.close()
