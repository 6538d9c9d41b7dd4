"""Fixtures for tests against the embedded Kafka (librdkafka's mock cluster on 127.0.0.1).

One 3-broker cluster (racks r1, r2, r3) is shared by the whole session for tests that only add topics;
tests that inject faults (brokers down, request errors, delays) get their own cluster so a fault cannot
leak into another test. Clusters start in milliseconds, and every one is closed.

Tests that need only what every Kafka does take `any_kafka` and run twice: on the mock and on the session's
real Apache Kafka broker (tests/realkafka/fixtures.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from groupcoord.embedded_kafka import EmbeddedKafka
from groupcoord.kafka_broker import KafkaBroker

AnyKafka = EmbeddedKafka | KafkaBroker

# Short client timeouts keep failure paths fast: a refresh against a down broker gives up in 0.5 s.
FAST_CLIENT_CONFIG = {"socket.timeout.ms": 500}
REQUEST_TIMEOUT_S = 0.5


@pytest.fixture(scope="session")
def embedded_kafka() -> Iterator[EmbeddedKafka]:
    with EmbeddedKafka(brokers=3) as kafka:
        for broker_id in (1, 2, 3):
            kafka.set_broker_rack(broker_id, f"r{broker_id}")
        yield kafka


@pytest.fixture(params=["mock", "real"])
def any_kafka(request: pytest.FixtureRequest) -> AnyKafka:
    """The shared mock cluster, then the real broker: for behaviour both must show."""
    name = "embedded_kafka" if request.param == "mock" else "kafka_broker"
    kafka: AnyKafka = request.getfixturevalue(name)
    return kafka


@pytest.fixture(params=["mock", "real"])
def any_kafka_with_racks(request: pytest.FixtureRequest) -> AnyKafka:
    """Three brokers with racks r1..r3: the shared mock cluster, then a real 3-node Kafka."""
    name = "embedded_kafka" if request.param == "mock" else "kafka_cluster3"
    kafka: AnyKafka = request.getfixturevalue(name)
    return kafka


@pytest.fixture
def fresh_kafka() -> Iterator[EmbeddedKafka]:
    """A private one-broker cluster, for tests that break it."""
    with EmbeddedKafka(brokers=1) as kafka:
        yield kafka


@pytest.fixture
def topic_name() -> str:
    """A topic name no other test uses (the session cluster is shared)."""
    return f"t-{uuid.uuid4().hex[:12]}"
