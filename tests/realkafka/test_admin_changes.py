"""What only a real broker can do to a topic, seen by the metadata and lag sources: CreatePartitions grows a
topic in place (same topic id), DeleteRecords moves a partition's log start offset above 0."""

from __future__ import annotations

import queue
import time

import pytest
from confluent_kafka import Producer

from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.runtime.kafka_lag import KafkaLagSource, build_lag_snapshot
from groupcoord.coordinator.runtime.kafka_metadata import KafkaMetadataSource
from groupcoord.kafka_broker import KafkaBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def _produce(kafka: KafkaBroker, topic: str, partition: int, n: int) -> None:
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for i in range(n):
        producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(10) == 0


def test_partitions_added_by_create_partitions_are_seen_under_the_same_topic_id(kafka_broker: KafkaBroker,
                                                                                unique: str) -> None:
    kafka_broker.create_topic(unique, 3)
    source = KafkaMetadataSource(kafka_broker.bootstrap_servers, refresh_interval_s=0.05, request_timeout_s=5)
    changes: queue.Queue[MetadataImage] = queue.Queue()
    source.on_change(changes.put)
    assert source.refresh_now()
    before = source.snapshot().by_name[unique]
    assert before.partition_count == 3

    kafka_broker.create_partitions(unique, 5)
    source.start()
    try:
        deadline = time.monotonic() + 20
        while (after := source.snapshot().by_name[unique]).partition_count != 5:
            assert time.monotonic() < deadline, "the metadata source never saw the 5 partitions"
            time.sleep(0.05)
    finally:
        source.stop()
    assert after.topic_id == before.topic_id, "CreatePartitions keeps the topic id (unlike delete + re-create)"
    assert changes.qsize() >= 2, "the change was announced"


def test_delete_records_moves_the_log_start_offset_and_lag_counts_from_it(kafka_broker: KafkaBroker,
                                                                         unique: str) -> None:
    kafka_broker.create_topic(unique, 2)
    _produce(kafka_broker, unique, 0, 20)
    _produce(kafka_broker, unique, 1, 4)
    assert kafka_broker.delete_records(unique, 0, 15) == 15
    wanted = [(unique, 0), (unique, 1)]
    source = KafkaLagSource(kafka_broker.bootstrap_servers, partitions=lambda: wanted, refresh_interval_s=5,
                            request_timeout_s=5)
    assert source.refresh_now()
    offsets = source.offsets(wanted)
    assert offsets == {(unique, 0): (15, 20), (unique, 1): (0, 4)}

    committed = {(unique, 0): 3, (unique, 1): 1}
    snapshot = build_lag_snapshot(offsets, committed, {unique: "tid"}, "earliest")
    assert snapshot.lag("tid", 0) == 5, "a commit below the log start counts only the 5 records still retained"
    assert snapshot.lag("tid", 1) == 3
    no_commit = build_lag_snapshot(offsets, {}, {unique: "tid"}, "earliest")
    assert no_commit.lag("tid", 0) == 5, "earliest means the log start, not offset 0"
