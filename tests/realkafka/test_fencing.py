"""Transactional producers sharing a `transactional.id`: the real broker fences the older one; the mock does not.

This is what the coordinators' zombie protection will rest on (issue 11): an instance that gains a state
partition calls `init_transactions` with the partition's stable id, and the previous owner's next commit fails.
"""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from groupcoord.embedded_kafka import EmbeddedKafka
from groupcoord.kafka_broker import KafkaBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def _producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 10_000})
    producer.init_transactions(15)
    return producer


def _committed_values(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        position = 0
        while position < high:
            msg = consumer.poll(1.0)
            if msg is None:
                position = consumer.position([TopicPartition(topic, 0)])[0].offset
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value())
            position = msg.offset() + 1
        return values
    finally:
        consumer.close()


def _open_transaction(producer: Producer, topic: str, value: bytes) -> None:
    producer.begin_transaction()
    producer.produce(topic, value=value, partition=0)
    producer.flush(10)


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(kafka_broker: KafkaBroker,
                                                                          unique: str) -> None:
    kafka_broker.create_topic(unique, 1)
    first = _producer(kafka_broker.bootstrap_servers, unique)
    _open_transaction(first, unique, b"zombie")
    second = _producer(kafka_broker.bootstrap_servers, unique)  # aborts first's open transaction, bumps the epoch

    with pytest.raises(KafkaException) as failed:
        first.commit_transaction(10)
    error: KafkaError = failed.value.args[0]
    assert error.fatal(), error
    assert error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), error

    _open_transaction(second, unique, b"owner")
    second.commit_transaction(10)
    assert _committed_values(kafka_broker.bootstrap_servers, unique) == [b"owner"]


def test_the_mock_cluster_does_not_fence_so_fencing_tests_need_the_real_broker(unique: str) -> None:
    """Pins the gap that makes tests/realkafka necessary: if librdkafka's mock ever fences, this fails."""
    with EmbeddedKafka(1, topics={unique: 1}) as mock:
        first = _producer(mock.bootstrap_servers, unique)
        _open_transaction(first, unique, b"zombie")
        second = _producer(mock.bootstrap_servers, unique)
        first.commit_transaction(10)
        _open_transaction(second, unique, b"owner")
        second.commit_transaction(10)
        assert _committed_values(mock.bootstrap_servers, unique) == [b"zombie", b"owner"]

