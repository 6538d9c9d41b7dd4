"""Exactly-once publication, counted on real Spark drivers in local mode (the scenario: counting.py).

It runs twice: on the embedded Kafka (librdkafka's mock) and on the real Kafka 4.4 broker. The same scenario
on a Spark standalone cluster is in test_standalone_cluster.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from groupcoord.embedded_kafka import EmbeddedKafka
from groupcoord.kafka_broker import KafkaBroker

from .conftest import LaunchDriver
from .counting import count_through_a_clean_leave_and_a_crash

pytestmark = [pytest.mark.spark, pytest.mark.timeout(420)]


@pytest.fixture(scope="module", params=["embedded", "real-broker"])
def kafka(request: pytest.FixtureRequest) -> Iterator[EmbeddedKafka | KafkaBroker]:
    """The coordinator and the drivers (tests/spark/conftest.py) on the mock, then on the real broker."""
    if request.param == "embedded":
        with EmbeddedKafka(brokers=1) as cluster:
            yield cluster
    else:
        yield request.getfixturevalue("kafka_broker")


def test_every_record_is_published_once_through_a_clean_leave_and_a_crash_between_write_and_commit(
        kafka: EmbeddedKafka | KafkaBroker, launch_driver: LaunchDriver) -> None:
    count_through_a_clean_leave_and_a_crash(kafka, launch_driver)
