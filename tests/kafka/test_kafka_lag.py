"""KafkaLagSource against the embedded Kafka: real offsets, batched fetches, stale-but-available snapshots."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

import pytest
from confluent_kafka import KafkaError, Producer

from groupcoord.assignors.api import PartitionOffsets
from groupcoord.coordinator.runtime.kafka_lag import (
    KafkaLagSource,
    TopicPartitionKey,
    build_lag_snapshot,
    partitions_of,
)
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.embedded_kafka import ApiKey, EmbeddedKafka

from .conftest import FAST_CLIENT_CONFIG, REQUEST_TIMEOUT_S, AnyKafka

# 90 s: the first test on the real broker starts it (about 3 s; far longer on a loaded machine).
pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def _source(
    kafka: AnyKafka,
    partitions: Callable[[], Iterable[TopicPartitionKey]] | None = None,
    refresh_interval_s: float = 5.0,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
) -> KafkaLagSource:
    return KafkaLagSource(
        kafka.bootstrap_servers,
        partitions=partitions,
        refresh_interval_s=refresh_interval_s,
        request_timeout_s=request_timeout_s,
        client_config=FAST_CLIENT_CONFIG,
    )


def _produce(kafka: AnyKafka, topic: str, counts: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, **FAST_CLIENT_CONFIG})
    for partition, n in counts.items():
        for i in range(n):
            producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(10) == 0


def _wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def test_end_offsets_count_produced_messages_and_log_start_is_zero(any_kafka: AnyKafka,
                                                                   topic_name: str) -> None:
    any_kafka.create_topic(topic_name, 3, replication_factor=min(2, any_kafka.brokers))
    _produce(any_kafka, topic_name, {0: 5, 1: 0, 2: 17})
    partitions = [(topic_name, p) for p in range(3)]
    source = _source(any_kafka, partitions=lambda: partitions)
    assert source.refresh_now()
    assert source.offsets(partitions) == {
        (topic_name, 0): (0, 5),
        (topic_name, 1): (0, 0),
        (topic_name, 2): (0, 17),
    }


def test_offsets_of_unfetched_partitions_are_missing_and_fetched_in_the_background(
    any_kafka: AnyKafka, topic_name: str
) -> None:
    any_kafka.create_topic(topic_name, 2)
    _produce(any_kafka, topic_name, {1: 3})
    source = _source(any_kafka, refresh_interval_s=60.0)  # only a wake-up can explain a quick fetch
    source.start()
    try:
        wanted = [(topic_name, 0), (topic_name, 1)]
        assert source.offsets(wanted) == {}
        _wait_for(lambda: len(source.offsets(wanted)) == 2)
        assert source.offsets(wanted)[(topic_name, 1)] == (0, 3)
    finally:
        source.stop()


def test_offsets_never_wait_on_the_network(fresh_kafka: EmbeddedKafka) -> None:
    fresh_kafka.create_topic("slow", 4)
    partitions = [("slow", p) for p in range(4)]
    source = _source(fresh_kafka, partitions=lambda: partitions, refresh_interval_s=0.01, request_timeout_s=5.0)
    assert source.refresh_now()
    fresh_kafka.set_broker_rtt(1, 400)
    started = time.monotonic()
    assert source.refresh_now()
    assert time.monotonic() - started >= 0.35, "the broker delay applies to offset requests"
    source.start()
    try:
        time.sleep(0.1)  # a refresh is in flight
        started = time.monotonic()
        for _ in range(100):
            assert len(source.offsets(partitions)) == 4
        assert time.monotonic() - started < 0.1
    finally:
        fresh_kafka.set_broker_rtt(1, 0)
        source.stop()


def test_partitions_come_from_the_metadata_image(any_kafka: AnyKafka, topic_name: str) -> None:
    any_kafka.create_topic(topic_name, 2)
    _produce(any_kafka, topic_name, {0: 2})
    metadata = StaticMetadataSource({topic_name: 2})
    source = _source(any_kafka, partitions=lambda: partitions_of(metadata.snapshot()))
    assert source.refresh_now()
    assert source.offsets([(topic_name, 0), (topic_name, 1)]) == {(topic_name, 0): (0, 2), (topic_name, 1): (0, 0)}


def test_partitions_of_a_deleted_topic_are_dropped(fresh_kafka: EmbeddedKafka) -> None:
    fresh_kafka.create_topic("doomed", 2)
    fresh_kafka.create_topic("stays", 1)
    source = _source(fresh_kafka)
    wanted = [("doomed", 0), ("doomed", 1), ("stays", 0)]
    source.offsets(wanted)
    assert source.refresh_now()
    assert len(source.offsets(wanted)) == 3
    fresh_kafka.delete_topic("doomed")
    _wait_for(lambda: source.refresh_now() and len(source.offsets([("stays", 0)])) == 1)
    assert ("doomed", 0) not in source.offsets([("doomed", 0)])


def test_list_offsets_error_fails_one_refresh_and_the_next_recovers(fresh_kafka: EmbeddedKafka,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    fresh_kafka.create_topic("flaky", 2)
    partitions = [("flaky", 0), ("flaky", 1)]
    source = _source(fresh_kafka, partitions=lambda: partitions)
    _produce(fresh_kafka, "flaky", {0: 4})
    assert source.refresh_now()
    age_after_ok = source.snapshot_age_seconds()
    _produce(fresh_kafka, "flaky", {0: 6})

    fresh_kafka.push_request_errors(ApiKey.LIST_OFFSETS, KafkaError.NOT_LEADER_FOR_PARTITION)
    with caplog.at_level(logging.WARNING, logger="groupcoord.coordinator.runtime.kafka_lag"):
        assert not source.refresh_now()
    assert "Not leader" in caplog.text
    assert source.offsets(partitions)[("flaky", 0)] == (0, 4), "the failed refresh kept the last snapshot"
    assert source.snapshot_age_seconds() >= age_after_ok

    assert source.refresh_now()
    assert source.offsets(partitions)[("flaky", 0)] == (0, 10)
    assert source.snapshot_age_seconds() < 0.5


def test_broker_down_keeps_the_last_snapshot_and_the_age_grows(fresh_kafka: EmbeddedKafka) -> None:
    fresh_kafka.create_topic("outage", 3)
    _produce(fresh_kafka, "outage", {0: 1, 1: 2, 2: 3})
    partitions = [("outage", p) for p in range(3)]
    source = _source(fresh_kafka, partitions=lambda: partitions, refresh_interval_s=0.05)
    assert source.refresh_now()
    before = source.offsets(partitions)
    source.start()
    try:
        fresh_kafka.set_broker_down(-1)
        time.sleep(0.3)
        age_1 = source.snapshot_age_seconds()
        time.sleep(0.3)
        age_2 = source.snapshot_age_seconds()
        assert 0.2 < age_1 < age_2
        assert source.offsets(partitions) == before
        fresh_kafka.set_broker_up(-1)
        _wait_for(lambda: source.snapshot_age_seconds() < 0.2)
        assert source.offsets(partitions) == before
    finally:
        source.stop()


def test_lag_snapshot_combines_kafka_and_committed_offsets() -> None:
    offsets = {("orders", 0): (10, 100), ("orders", 1): (0, 50), ("orders", 2): (0, 7), ("gone", 0): (0, 9)}
    committed = {("orders", 0): 5, ("orders", 1): 45, ("orders", 2): -1}
    snapshot = build_lag_snapshot(offsets, committed, {"orders": "id-o"}, "earliest")
    assert snapshot.offsets == {
        ("id-o", 0): PartitionOffsets(end_offset=100, committed_offset=5, log_start_offset=10),
        ("id-o", 1): PartitionOffsets(end_offset=50, committed_offset=45, log_start_offset=0),
        ("id-o", 2): PartitionOffsets(end_offset=7, committed_offset=None, log_start_offset=0),
    }
    assert snapshot.lag("id-o", 0) == 90  # committed before log start: lag counts from log start
    assert snapshot.lag("id-o", 1) == 5
    assert snapshot.lag("id-o", 2) == 7  # nothing committed, earliest: the whole retained log
    latest = build_lag_snapshot(offsets, committed, {"orders": "id-o"}, "latest")
    assert latest.lag("id-o", 2) == 0


def test_lag_snapshot_rejects_an_unknown_auto_offset_reset() -> None:
    with pytest.raises(ValueError, match="auto_offset_reset must be one of earliest, latest, none"):
        build_lag_snapshot({}, {}, {}, "smallest")
    assert build_lag_snapshot({}, {}, {}, "by_duration:PT1H").auto_offset_reset == "by_duration:PT1H"


def test_lag_from_real_offsets(any_kafka: AnyKafka, topic_name: str) -> None:
    any_kafka.create_topic(topic_name, 2)
    _produce(any_kafka, topic_name, {0: 8, 1: 3})
    source = _source(any_kafka, partitions=lambda: [(topic_name, 0), (topic_name, 1)])
    assert source.refresh_now()
    offsets = source.offsets([(topic_name, 0), (topic_name, 1)])
    snapshot = build_lag_snapshot(offsets, {(topic_name, 0): 6}, {topic_name: "tid"}, "earliest")
    assert (snapshot.lag("tid", 0), snapshot.lag("tid", 1)) == (2, 3)
