"""KafkaMetadataSource against the embedded Kafka: what the coordinator sees of topics, and how it copes
when Kafka is unreachable."""

from __future__ import annotations

import base64
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.runtime.kafka_metadata import KafkaMetadataSource, kafka_uuid_to_str
from groupcoord.embedded_kafka import EmbeddedKafka

from .conftest import FAST_CLIENT_CONFIG, REQUEST_TIMEOUT_S, AnyKafka

# 90 s: the first test on the real broker starts it (about 3 s; far longer on a loaded machine).
pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def _source(kafka: AnyKafka, refresh_interval_s: float = 0.05) -> KafkaMetadataSource:
    return KafkaMetadataSource(
        kafka.bootstrap_servers,
        refresh_interval_s=refresh_interval_s,
        request_timeout_s=REQUEST_TIMEOUT_S,
        client_config=FAST_CLIENT_CONFIG,
    )


@pytest.fixture
def running_source(any_kafka: AnyKafka) -> Iterator[KafkaMetadataSource]:
    source = _source(any_kafka)
    source.start()
    try:
        yield source
    finally:
        source.stop()


def _wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def _changes(source: KafkaMetadataSource) -> queue.Queue[MetadataImage]:
    q: queue.Queue[MetadataImage] = queue.Queue()
    source.on_change(q.put)
    return q


def _next_matching(q: queue.Queue[MetadataImage], pred: Callable[[MetadataImage], bool]) -> MetadataImage:
    deadline = time.monotonic() + 5
    while True:
        image = q.get(timeout=max(0.01, deadline - time.monotonic()))
        if pred(image):
            return image


def test_snapshot_is_empty_before_the_first_refresh(any_kafka: AnyKafka) -> None:
    source = _source(any_kafka)
    assert source.snapshot().by_name == {}
    assert source.age_seconds() == float("inf")
    assert source.last_refresh_ok_ms is None


def test_new_topic_appears_and_on_change_fires(running_source: KafkaMetadataSource,
                                                any_kafka: AnyKafka, topic_name: str) -> None:
    changes = _changes(running_source)
    any_kafka.create_topic(topic_name, 6)
    image = _next_matching(changes, lambda im: topic_name in im.by_name)
    topic = image.by_name[topic_name]
    assert topic.partition_count == 6
    assert image.by_id[topic.topic_id] is topic
    assert running_source.snapshot().by_name[topic_name].partition_count == 6


def test_partition_count_change_is_seen_with_a_new_topic_id(embedded_kafka: EmbeddedKafka, topic_name: str) -> None:
    # The mock cannot add partitions to a topic (no CreatePartitions), so the change is made as Kafka
    # would show a delete + re-create: same name, more partitions, a new topic id. The real broker's
    # CreatePartitions is tests/realkafka/test_admin_changes.py.
    running_source = _source(embedded_kafka)
    running_source.start()
    try:
        _count_change_after_recreate(running_source, embedded_kafka, topic_name)
    finally:
        running_source.stop()


def _count_change_after_recreate(running_source: KafkaMetadataSource, embedded_kafka: EmbeddedKafka,
                                 topic_name: str) -> None:
    changes = _changes(running_source)
    embedded_kafka.create_topic(topic_name, 2)
    before = _next_matching(changes, lambda im: topic_name in im.by_name).by_name[topic_name]
    embedded_kafka.delete_topic(topic_name)
    embedded_kafka.create_topic(topic_name, 4)
    after = _next_matching(
        changes, lambda im: topic_name in im.by_name and im.by_name[topic_name].partition_count == 4
    ).by_name[topic_name]
    assert before.partition_count == 2
    assert after.topic_id != before.topic_id


def test_deleted_topic_disappears(running_source: KafkaMetadataSource, any_kafka: AnyKafka,
                                  topic_name: str) -> None:
    changes = _changes(running_source)
    any_kafka.create_topic(topic_name, 1)
    _next_matching(changes, lambda im: topic_name in im.by_name)
    any_kafka.delete_topic(topic_name)
    _next_matching(changes, lambda im: topic_name not in im.by_name)


def test_on_change_is_not_called_when_nothing_changed(any_kafka: AnyKafka, topic_name: str) -> None:
    any_kafka.create_topic(topic_name, 1)
    source = _source(any_kafka)
    changes = _changes(source)
    assert source.refresh_now()
    assert changes.qsize() == 1
    assert source.refresh_now()
    assert source.refresh_now()
    assert changes.qsize() == 1


def test_topic_ids_are_kafkas_own_in_canonical_uuid_form(any_kafka: AnyKafka, topic_name: str) -> None:
    any_kafka.create_topic(topic_name, 1)
    source = _source(any_kafka)
    assert source.refresh_now()
    admin = AdminClient({"bootstrap.servers": any_kafka.bootstrap_servers})
    kafka_id = admin.describe_topics(TopicCollection([topic_name]))[topic_name].result().topic_id
    expected = uuid.UUID(bytes=base64.urlsafe_b64decode(str(kafka_id) + "=="))
    assert source.snapshot().by_name[topic_name].topic_id == str(expected) == kafka_uuid_to_str(kafka_id)


@pytest.mark.timeout(180)  # the real variant starts a 3-node cluster
def test_partition_racks_are_the_racks_of_the_replicas_brokers(any_kafka_with_racks: AnyKafka,
                                                               topic_name: str) -> None:
    any_kafka_with_racks.create_topic(topic_name, 6, replication_factor=2)
    source = _source(any_kafka_with_racks)
    assert source.refresh_now()
    md = AdminClient({"bootstrap.servers": any_kafka_with_racks.bootstrap_servers}).list_topics(topic_name, timeout=5)
    replicas = {p.id: p.replicas for p in md.topics[topic_name].partitions.values()}
    topic = source.snapshot().by_name[topic_name]
    assert topic.partition_racks == tuple(frozenset(f"r{b}" for b in replicas[p]) for p in range(6))
    assert all(len(racks) == 2 for racks in topic.partition_racks)


def test_racks_are_unknown_when_no_broker_has_one(fresh_kafka: EmbeddedKafka) -> None:
    fresh_kafka.create_topic("norack", 3)
    source = _source(fresh_kafka)
    assert source.refresh_now()
    assert source.snapshot().by_name["norack"].partition_racks == ()


def test_internal_topics_are_excluded(fresh_kafka: EmbeddedKafka) -> None:
    fresh_kafka.create_topic("__consumer_offsets", 3)
    fresh_kafka.create_topic("visible", 1)
    source = _source(fresh_kafka)
    assert source.refresh_now()
    assert set(source.snapshot().by_name) == {"visible"}


def test_broker_down_keeps_the_last_image_and_the_age_grows(fresh_kafka: EmbeddedKafka,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    fresh_kafka.create_topic("kept", 3)
    source = _source(fresh_kafka)
    changes = _changes(source)
    assert source.refresh_now()
    image = source.snapshot()
    ok_ms = source.last_refresh_ok_ms
    age_before = source.age_seconds()

    fresh_kafka.set_broker_down(-1)
    with caplog.at_level(logging.WARNING, logger="groupcoord.coordinator.runtime.kafka_metadata"):
        results = [source.refresh_now() for _ in range(3)]
    assert results == [False, False, False]
    assert source.snapshot() is image
    assert source.last_refresh_ok_ms == ok_ms
    assert source.age_seconds() > age_before + 2 * REQUEST_TIMEOUT_S
    warnings = [r for r in caplog.records if r.name == "groupcoord.coordinator.runtime.kafka_metadata"]
    assert len(warnings) == 1, "one warning per failure streak, not one per attempt"
    assert changes.qsize() == 1  # the outage did not look like a change

    fresh_kafka.set_broker_up(-1)
    _wait_for(source.refresh_now)
    assert source.age_seconds() < 1.0
    assert source.snapshot() == image
    assert changes.qsize() == 1


def test_background_refresh_survives_an_outage_without_raising(fresh_kafka: EmbeddedKafka) -> None:
    fresh_kafka.create_topic("bg", 2)
    source = _source(fresh_kafka)
    crashed: list[BaseException] = []
    previous_hook = threading.excepthook
    threading.excepthook = lambda args: crashed.append(args.exc_value or RuntimeError("?"))
    try:
        source.start()
        _wait_for(lambda: "bg" in source.snapshot().by_name)
        fresh_kafka.set_broker_down(-1)
        time.sleep(3 * REQUEST_TIMEOUT_S)
        assert source.age_seconds() > REQUEST_TIMEOUT_S
        assert source.snapshot().by_name["bg"].partition_count == 2
        fresh_kafka.set_broker_up(-1)
        _wait_for(lambda: source.age_seconds() < 0.5)
    finally:
        source.stop()
        threading.excepthook = previous_hook
    assert crashed == []


def test_a_failing_callback_does_not_stop_other_callbacks(fresh_kafka: EmbeddedKafka) -> None:
    fresh_kafka.create_topic("cb", 1)
    source = _source(fresh_kafka)

    def boom(image: MetadataImage) -> None:
        raise RuntimeError("callback bug")

    source.on_change(boom)
    changes = _changes(source)
    assert source.refresh_now()
    assert changes.qsize() == 1
