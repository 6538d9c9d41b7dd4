"""Coordinator instances sharing a state topic (real gRPC, real consumer group).

The `kafka` fixture runs each test twice: on the embedded Kafka (librdkafka's mock, a fresh cluster per test)
and on the session's real Apache Kafka broker (tests/realkafka/fixtures.py), where the test's topics and the
coordinators' consumer group are deleted afterwards so the next test starts clean under the same names.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from confluent_kafka import KafkaError, KafkaException

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.coordinator.runtime.kafka_log import KafkaRecordLog
from groupcoord.coordinator.runtime.kafka_state_options import KafkaStateOptions
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.sharding import PartitionState
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.embedded_kafka import EmbeddedKafka
from groupcoord.kafka_broker import KafkaBroker
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

STATE_TOPIC = "groupcoord-state"
PARTITIONS = 6
TOPICS = {"orders": 12}
FAST: dict[str, Any] = {
    "group.consumer.min.heartbeat.interval.ms": 20,
    "group.consumer.heartbeat.interval.ms": 100,
    "group.consumer.min.session.timeout.ms": 300,
    "group.consumer.session.timeout.ms": 10_000,
    "group.consumer.assignment.interval.ms": 0,
}


AnyKafka = EmbeddedKafka | KafkaBroker


@pytest.fixture(params=["mock", "real"])
def kafka(request: pytest.FixtureRequest) -> Iterator[AnyKafka]:
    if request.param == "mock":
        with EmbeddedKafka(1, topics={STATE_TOPIC: PARTITIONS, **TOPICS}) as cluster:
            yield cluster
        return
    broker: KafkaBroker = request.getfixturevalue("kafka_broker")
    topics = {STATE_TOPIC: PARTITIONS, **TOPICS}
    existing = broker.admin.list_topics(timeout=10).topics  # left by another test on the session's broker
    for name, partitions in topics.items():
        if name in existing:
            broker.delete_topic(name)
        broker.create_topic(name, partitions, config={"cleanup.policy": "compact"} if name == STATE_TOPIC else None)
    try:
        yield broker
    finally:
        for name in topics:
            broker.delete_topic(name)
        delete_group(broker, f"groupcoord-coordinators.{STATE_TOPIC}")


def delete_group(broker: KafkaBroker, group_id: str, timeout_s: float = 30.0) -> None:
    """Delete a Kafka consumer group once it is empty (a killed member leaves at its session timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            broker.admin.delete_consumer_groups([group_id], request_timeout=5)[group_id].result(10)
            return
        except KafkaException as e:
            code = e.args[0].code()
            if code == KafkaError.GROUP_ID_NOT_FOUND:
                return
            if code != KafkaError.NON_EMPTY_GROUP or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def state_options(kafka: AnyKafka, **overrides: Any) -> KafkaStateOptions:
    # 3 s: with shorter sessions librdkafka's mock group coordinator sometimes leaves a joining member waiting.
    values: dict[str, Any] = {"topic": STATE_TOPIC, "partitions": PARTITIONS, "session_timeout_ms": 3000,
                              "heartbeat_interval_ms": 300, "directory_refresh_ms": 200, "create_topic": False}
    values.update(overrides)
    return KafkaStateOptions(kafka.bootstrap_servers, **values)


def start_instance(kafka: AnyKafka, sink: KafkaRecordLog | None = None, listen: str = "127.0.0.1:0",
                   advertised_listener: str | None = None, **overrides: Any) -> ServerThread:
    options = ServerOptions(listen=listen, config=BrokerConfig.from_mapping(FAST),
                            metadata_source=StaticMetadataSource(TOPICS), metadata_poll_s=0.2,
                            kafka_state=state_options(kafka, **overrides), sink=sink,
                            advertised_listener=advertised_listener)
    return ServerThread(options).start()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def owned(instance: ServerThread) -> dict[int, PartitionState]:
    ownership = instance.server.ownership
    assert ownership is not None
    return ownership.owned()


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def partitions_served(instances: list[ServerThread]) -> bool:
    """Every partition is OWNED by exactly one instance, and every directory says so."""
    owners: dict[int, str] = {}
    for instance in instances:
        for p, state in owned(instance).items():
            if state is not PartitionState.OWNED or p in owners:
                return False
            owners[p] = instance.address
    if len(owners) != PARTITIONS:
        return False
    for instance in instances:
        ownership = instance.server.ownership
        assert ownership is not None
        directory = {p: f"{host}:{port}" for p, (host, port) in ownership.directory().items()}
        if directory != owners:
            return False
    return True


def owner_of(instances: list[ServerThread], group_id: str) -> ServerThread:
    p = state_partition(group_id, PARTITIONS)
    (owner,) = [i for i in instances if owned(i).get(p) is PartitionState.OWNED]
    return owner


def group_ids_covering_every_partition() -> list[str]:
    """One group id per state partition."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < PARTITIONS:
        found.setdefault(state_partition(f"group-{i}", PARTITIONS), f"group-{i}")
        i += 1
    return [found[p] for p in range(PARTITIONS)]


def stub(address: str) -> tuple[grpc.Channel, Any]:
    channel = grpc.insecure_channel(address)
    return channel, pb_grpc.GroupCoordinatorStub(channel)


def join(stub: Any, group_id: str, member_id: str = "m1") -> pb.ConsumerGroupHeartbeatResponse:
    return stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
        group_id=group_id, member_id=member_id, member_epoch=0, rebalance_timeout_ms=5000,
        subscribed_topic_names=pb.StringList(values=["orders"]), topic_partitions=pb.TopicPartitionsList()),
        timeout=5)


def find_coordinator(stub: Any, group_id: str) -> pb.Coordinator:
    resp = stub.FindCoordinator(pb.FindCoordinatorRequest(keys=[group_id]), timeout=5)
    (coordinator,) = resp.coordinators
    return coordinator
