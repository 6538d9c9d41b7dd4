"""The embedded Kafka serves the real wire protocol: confluent_kafka clients work against it unchanged."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from groupcoord.embedded_kafka import ApiKey, EmbeddedKafka, EmbeddedKafkaError, find_librdkafka

from .conftest import FAST_CLIENT_CONFIG

pytestmark = [pytest.mark.integration, pytest.mark.timeout(30)]

REPO_ROOT = Path(__file__).resolve().parents[2]


def _partition_counts(bootstrap: str) -> dict[str, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap, **FAST_CLIENT_CONFIG})
    md = admin.list_topics(timeout=5)
    return {name: len(t.partitions) for name, t in md.topics.items()}


def _produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **FAST_CLIENT_CONFIG})
    for i in range(count):
        producer.produce(topic, value=f"m{i}".encode(), key=str(i).encode(), partition=partition)
    assert producer.flush(10) == 0, "messages left undelivered"


def test_library_is_the_one_bundled_with_confluent_kafka() -> None:
    path = find_librdkafka()
    assert "librdkafka" in path.name
    assert path.is_file()


def test_cluster_starts_with_one_bootstrap_address_per_broker(embedded_kafka: EmbeddedKafka) -> None:
    addresses = embedded_kafka.bootstrap_servers.split(",")
    assert len(addresses) == 3
    assert all(a.startswith("127.0.0.1:") for a in addresses)


def test_created_topics_have_the_given_partition_counts(embedded_kafka: EmbeddedKafka, topic_name: str) -> None:
    embedded_kafka.create_topic(topic_name + "-a", 1)
    embedded_kafka.create_topic(topic_name + "-b", 7, replication_factor=3)
    counts = _partition_counts(embedded_kafka.bootstrap_servers)
    assert counts[topic_name + "-a"] == 1
    assert counts[topic_name + "-b"] == 7


def test_topics_passed_to_the_constructor_exist() -> None:
    with EmbeddedKafka(topics={"orders": 4, "events": 2}) as kafka:
        counts = _partition_counts(kafka.bootstrap_servers)
    assert counts["orders"] == 4
    assert counts["events"] == 2


def test_creating_an_existing_topic_fails_with_the_kafka_error(fresh_kafka: EmbeddedKafka) -> None:
    fresh_kafka.create_topic("dup", 2)
    with pytest.raises(EmbeddedKafkaError, match="TOPIC_ALREADY_EXISTS"):
        fresh_kafka.create_topic("dup", 2)


def test_invalid_arguments_are_rejected_before_reaching_librdkafka(fresh_kafka: EmbeddedKafka) -> None:
    with pytest.raises(ValueError, match="partitions must be >= 1"):
        fresh_kafka.create_topic("x", 0)
    with pytest.raises(ValueError, match="replication_factor"):
        fresh_kafka.create_topic("x", 1, replication_factor=2)
    with pytest.raises(ValueError, match="at least one error code"):
        fresh_kafka.push_request_errors(ApiKey.PRODUCE)
    with pytest.raises(ValueError, match="brokers must be >= 1"):
        EmbeddedKafka(brokers=0)


def test_produced_messages_can_be_consumed(embedded_kafka: EmbeddedKafka, topic_name: str) -> None:
    embedded_kafka.create_topic(topic_name, 2)
    _produce(embedded_kafka.bootstrap_servers, topic_name, 10, partition=1)
    consumer = Consumer(
        {
            "bootstrap.servers": embedded_kafka.bootstrap_servers,
            "group.id": f"g-{topic_name}",
            "enable.auto.commit": False,
            **FAST_CLIENT_CONFIG,
        }
    )
    try:
        consumer.assign([TopicPartition(topic_name, 1, OFFSET_BEGINNING)])
        values: list[bytes] = []
        deadline = time.monotonic() + 10
        while len(values) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            value = msg.value()
            assert value is not None
            values.append(value)
    finally:
        consumer.close()
    assert values == [f"m{i}".encode() for i in range(10)]


def test_deleted_topic_disappears_and_can_be_recreated_with_more_partitions(fresh_kafka: EmbeddedKafka) -> None:
    fresh_kafka.create_topic("grow", 2)
    fresh_kafka.delete_topic("grow")
    assert "grow" not in _partition_counts(fresh_kafka.bootstrap_servers)
    fresh_kafka.create_topic("grow", 5)
    assert _partition_counts(fresh_kafka.bootstrap_servers)["grow"] == 5
    with pytest.raises(EmbeddedKafkaError, match="UNKNOWN_TOPIC_OR_PART"):
        fresh_kafka.delete_topic("never-existed")


def test_partition_leader_can_be_moved_and_unknown_brokers_are_refused(embedded_kafka: EmbeddedKafka,
                                                                      topic_name: str) -> None:
    embedded_kafka.create_topic(topic_name, 2, replication_factor=3)
    embedded_kafka.set_partition_leader(topic_name, 1, 3)
    admin = AdminClient({"bootstrap.servers": embedded_kafka.bootstrap_servers, **FAST_CLIENT_CONFIG})
    assert admin.list_topics(topic_name, timeout=5).topics[topic_name].partitions[1].leader == 3
    with pytest.raises(EmbeddedKafkaError, match="BROKER_NOT_AVAILABLE"):
        embedded_kafka.set_partition_leader(topic_name, 0, 9)
    with pytest.raises(EmbeddedKafkaError, match="BROKER_NOT_AVAILABLE"):
        embedded_kafka.set_broker_down(9)


def test_pushed_request_error_fails_the_next_request_only(fresh_kafka: EmbeddedKafka) -> None:
    fresh_kafka.create_topic("p", 1)
    producer = Producer({"bootstrap.servers": fresh_kafka.bootstrap_servers, "retries": 0, "acks": "all"})
    errors: list[KafkaError | None] = []
    fresh_kafka.push_request_errors(ApiKey.PRODUCE, KafkaError.INVALID_RECORD)
    producer.produce("p", b"first", partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(5)
    producer.produce("p", b"second", partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(5)
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    assert errors[1] is None


def test_close_is_idempotent_and_later_calls_fail_clearly() -> None:
    kafka = EmbeddedKafka()
    kafka.close()
    kafka.close()
    assert kafka.closed
    with pytest.raises(EmbeddedKafkaError, match="closed"):
        kafka.create_topic("late", 1)


def _start_cli(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "groupcoord.embedded_kafka", *args],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _first_line(proc: subprocess.Popen[bytes], timeout_s: float = 15) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            raise AssertionError("the embedded_kafka process printed nothing")
    line = proc.stdout.readline().decode().strip()
    if not line:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise AssertionError(f"the embedded_kafka process exited: {err}")
    return line


def test_cluster_served_by_another_process_is_usable_here() -> None:
    proc = _start_cli("--brokers", "2", "--topic", "remote:5", "--topic", "other:1")
    try:
        bootstrap = _first_line(proc)
        counts = _partition_counts(bootstrap)
        assert counts["remote"] == 5 and counts["other"] == 1
        _produce(bootstrap, "remote", 3, partition=4)
        assert proc.stdin is not None
        proc.stdin.close()  # EOF on stdin: a parent that goes away takes the cluster with it
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cli_stops_on_sigterm() -> None:
    proc = _start_cli("--topic", "x:1")
    try:
        _first_line(proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cli_rejects_a_bad_topic_flag_with_the_reason() -> None:
    proc = _start_cli("--topic", "orders")
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 2
    assert b"NAME:PARTITIONS" in err
