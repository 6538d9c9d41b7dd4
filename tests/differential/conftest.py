"""The two coordinators for the differential suite, once per session: the shared real Kafka 4.4 broker
(tests/realkafka/fixtures.py) and a groupcoord server on loopback configured like it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.kafka_metadata import KafkaMetadataSource
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.kafka_broker import KAFKA_VERSION, TEST_BROKER_CONFIG, KafkaBroker
from tests.differential.backends import GroupcoordBackend, KafkaBackend
from tests.differential.kafka_wire import KafkaConnection

# Topic aliases the scenarios use, with their partition counts (created alike on both sides).
TOPICS = {"a": 6, "b": 3, "c": 2}

# groupcoord configured as the test broker is (Kafka's defaults otherwise, which both share).
GROUPCOORD_CONFIG = {
    "group.consumer.assignor.offload.enable": TEST_BROKER_CONFIG["group.consumer.assignor.offload.enable"],
    "group.consumer.assignment.interval.ms": int(TEST_BROKER_CONFIG["group.consumer.assignment.interval.ms"]),
    "group.consumer.min.session.timeout.ms": int(TEST_BROKER_CONFIG["group.consumer.min.session.timeout.ms"]),
    "group.consumer.min.heartbeat.interval.ms": int(TEST_BROKER_CONFIG["group.consumer.min.heartbeat.interval.ms"]),
    "group.min.session.timeout.ms": int(TEST_BROKER_CONFIG["group.min.session.timeout.ms"]),
    "group.initial.rebalance.delay.ms": int(TEST_BROKER_CONFIG["group.initial.rebalance.delay.ms"]),
}


@dataclass
class DifferentialEnv:
    kafka: KafkaBackend
    groupcoord: GroupcoordBackend
    topics: dict[str, str]  # alias -> real name


@pytest.fixture(scope="session")
def differential_env(kafka_broker: KafkaBroker) -> Iterator[DifferentialEnv]:
    prefix = f"diff-{uuid.uuid4().hex[:6]}"
    topics = {alias: f"{prefix}-{alias}" for alias in TOPICS}
    for alias, name in topics.items():
        kafka_broker.create_topic(name, TOPICS[alias])
    jar = Path(kafka_broker.libs) / f"kafka-clients-{KAFKA_VERSION}.jar"
    host, _, port = kafka_broker.bootstrap_servers.split(",")[0].rpartition(":")
    conn = KafkaConnection(host, int(port), jar)
    try:
        md = conn.call("Metadata", {"topics": [{"name": n} for n in topics.values()],
                                    "allow_auto_topic_creation": False})
        ids = {t["name"]: t["topic_id"] for t in md["topics"]}
        # FindCoordinator creates __consumer_offsets; the coordinator answers once it is loaded.
        deadline = time.monotonic() + 60
        while conn.call("FindCoordinator", {"key_type": 0, "coordinator_keys": [prefix]})["coordinators"][0][
                "error_code"] != 0:
            assert time.monotonic() < deadline, "Kafka's group coordinator did not become available"
            time.sleep(0.1)
    finally:
        conn.close()
    # groupcoord reads the broker's topics (refreshed once, no background thread): the same names, partition
    # counts and topic ids, so assignors that order topics by id see the same order on both sides.
    source = KafkaMetadataSource(kafka_broker.bootstrap_servers, refresh_interval_s=60)
    assert source.refresh_now(), "groupcoord could not read the broker's metadata"
    assert all(n in source.snapshot().by_name for n in topics.values())
    options = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping(GROUPCOORD_CONFIG),
                            metadata_source=source, metadata_poll_s=0.2)
    server = ServerThread(options).start()
    ids_by_name = {name: ids[name] for name in topics.values()}
    kafka = KafkaBackend(kafka_broker.bootstrap_servers, jar, ids_by_name)
    ours = GroupcoordBackend(server.address, ids_by_name)
    try:
        yield DifferentialEnv(kafka, ours, topics)
    finally:
        kafka.close()
        ours.close()
        server.stop()
