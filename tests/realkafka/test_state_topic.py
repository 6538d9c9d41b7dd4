"""The state topic on a real broker: groupcoord creates it compacted with the configured partition count, refuses
one with another count, and several instances divide its partitions through Kafka's own group coordinator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import ConfigResource

from groupcoord.coordinator.runtime.kafka_log import KafkaRecordLog, StateTopicError
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.kafka_broker import KafkaBroker
from tests.sharding.conftest import (
    PARTITIONS,
    delete_group,
    find_coordinator,
    group_ids_covering_every_partition,
    join,
    owned,
    owner_of,
    partitions_served,
    start_instance,
    stub,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@pytest.fixture
def state_topic(kafka_broker: KafkaBroker, unique: str) -> Iterator[str]:
    """A state topic name nobody has used; the topic and the coordinators' group are deleted afterwards."""
    yield unique
    if unique in kafka_broker.admin.list_topics(timeout=5).topics:
        kafka_broker.delete_topic(unique)
    delete_group(kafka_broker, f"groupcoord-coordinators.{unique}")


def test_instances_create_the_compacted_state_topic_and_share_its_partitions(kafka_broker: KafkaBroker,
                                                                            state_topic: str) -> None:
    instances: list[ServerThread] = []
    try:
        for _ in range(3):
            instances.append(start_instance(kafka_broker, topic=state_topic, create_topic=True))
        wait_for(lambda: partitions_served(instances) and all(owned(i) for i in instances),
                 "the three instances share the partitions", timeout_s=60)

        metadata = kafka_broker.admin.list_topics(state_topic, timeout=5).topics[state_topic]
        assert len(metadata.partitions) == PARTITIONS
        resource = ConfigResource(ConfigResource.Type.TOPIC, state_topic)
        configs = kafka_broker.admin.describe_configs([resource])[resource].result(10)
        assert configs["cleanup.policy"].value == "compact"

        for group_id in group_ids_covering_every_partition():
            owner = owner_of(instances, group_id)
            channel, coordinator = stub(instances[0].address)
            try:
                found = find_coordinator(coordinator, group_id)
                assert (found.error_code, found.port) == (0, owner.server.port)
            finally:
                channel.close()
            channel, coordinator = stub(owner.address)
            try:
                assert join(coordinator, group_id).error_code == 0
            finally:
                channel.close()
    finally:
        for instance in instances:
            instance.stop()


def test_an_existing_state_topic_with_another_partition_count_is_refused(kafka_broker: KafkaBroker,
                                                                        state_topic: str) -> None:
    kafka_broker.create_topic(state_topic, PARTITIONS, config={"cleanup.policy": "compact"})
    log = KafkaRecordLog(kafka_broker.bootstrap_servers, state_topic, PARTITIONS + 1, create_topic=True)
    with pytest.raises(StateTopicError, match=f"has {PARTITIONS} partitions but {PARTITIONS + 1} are configured"):
        log.start()
