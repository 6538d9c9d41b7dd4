"""Streams internal topics created in the embedded Kafka (librdkafka's mock cluster has no CreateTopics API:
`FunctionTopicCreator` creates them in-process, as `serve --embedded-kafka` does), seen by the metadata
source with the partition counts asked for; an existing topic is left alone; a failure is not retried until
its back-off has passed."""

from __future__ import annotations

import time

from groupcoord.coordinator.core.streams.topology import TopicInfo
from groupcoord.coordinator.runtime.kafka_metadata import KafkaMetadataSource
from groupcoord.coordinator.runtime.topic_creation import FunctionTopicCreator
from groupcoord.embedded_kafka import EmbeddedKafka


def test_internal_topics_are_created_in_the_embedded_kafka_with_their_counts() -> None:
    with EmbeddedKafka(brokers=1) as kafka:
        kafka.create_topic("app-counts-changelog", 2)
        source = KafkaMetadataSource(kafka.bootstrap_servers, refresh_interval_s=0.2, request_timeout_s=5)
        assert source.refresh_now()
        calls: list[tuple[str, int]] = []

        def create(name: str, partitions: int) -> None:
            calls.append((name, partitions))
            kafka.create_topic(name, partitions)

        creator = FunctionTopicCreator(create, lambda n: n in source.snapshot().by_name)
        creator.create((TopicInfo("app-counts-changelog", 4), TopicInfo("app-words-repartition", 6)), 1000)
        assert calls == [("app-words-repartition", 6)], "an existing topic is not created again"
        deadline = time.monotonic() + 20
        while "app-words-repartition" not in source.snapshot().by_name:
            assert time.monotonic() < deadline
            source.refresh_now()
            time.sleep(0.1)
        assert source.snapshot().by_name["app-words-repartition"].partition_count == 6


def test_a_failed_creation_backs_off_for_its_time_to_live() -> None:
    now = [0.0]
    attempts: list[str] = []

    def fail(name: str, partitions: int) -> None:
        attempts.append(name)
        raise RuntimeError("no room")

    creator = FunctionTopicCreator(fail, lambda n: False, clock=lambda: now[0])
    creator.create((TopicInfo("t", 1),), 1000)
    assert creator.errors(["t"]) == {"t": "no room"}
    now[0] = 0.5
    creator.create((TopicInfo("t", 1),), 1000)
    assert attempts == ["t"], "within the back-off: not asked again"
    now[0] = 1.01
    assert creator.errors(["t"]) == {}
    creator.create((TopicInfo("t", 1),), 1000)
    assert attempts == ["t", "t"]
