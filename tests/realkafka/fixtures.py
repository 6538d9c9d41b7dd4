"""The real Apache Kafka broker (groupcoord.kafka_broker) as session fixtures.

One single-node broker serves the whole session (about 3 s to format and start), so tests share it and
keep apart by unique topic and group names (`unique`). The 3-node cluster starts only when a module asks.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from groupcoord.kafka_broker import KafkaBroker


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """A single-node Kafka 4.4 broker, KRaft, formatted fresh, for the whole session."""
    with KafkaBroker(1) as broker:
        yield broker


@pytest.fixture(scope="module")
def kafka_cluster3() -> Iterator[KafkaBroker]:
    """Three broker+controller nodes with racks r1..r3, for tests about replicas and racks. Per module: three
    JVMs should not idle through the rest of the session on a small machine."""
    with KafkaBroker(3, node_config={n: {"broker.rack": f"r{n}"} for n in (1, 2, 3)}) as cluster:
        yield cluster


@pytest.fixture
def unique() -> str:
    """A name no other test uses on the shared broker (topics, groups, transactional ids)."""
    return f"t-{uuid.uuid4().hex[:12]}"
