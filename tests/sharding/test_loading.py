"""While an instance replays a partition it was just given, that partition's groups get
COORDINATOR_LOAD_IN_PROGRESS (14); afterwards they are served."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.coordinator.runtime.kafka_log import KafkaRecordLog, PartitionLoad
from groupcoord.coordinator.runtime.sharding import PartitionState

from .conftest import (
    PARTITIONS,
    STATE_TOPIC,
    AnyKafka,
    find_coordinator,
    free_port,
    join,
    owned,
    start_instance,
    stub,
    wait_for,
)


class GatedKafkaLog(KafkaRecordLog):
    """A real Kafka record log whose partition loads wait for the test to open the gate."""

    def __init__(self, kafka: AnyKafka, gate: threading.Event) -> None:
        super().__init__(kafka.bootstrap_servers, STATE_TOPIC, PARTITIONS, create_topic=False)
        self.gate = gate

    def load_partition(self, partition: int, apply: Callable[[Any], None], timeout_s: float = 60.0) -> PartitionLoad:
        self.gate.wait(30)
        return super().load_partition(partition, apply, timeout_s)


def test_requests_for_a_partition_still_loading_get_coordinator_load_in_progress_then_are_served(
        kafka: AnyKafka) -> None:
    gate = threading.Event()
    port = free_port()
    instance = start_instance(kafka, sink=GatedKafkaLog(kafka, gate), listen=f"127.0.0.1:{port}",
                              advertised_listener=f"localhost:{port}")
    channel, coordinator = stub(instance.address)
    try:
        wait_for(lambda: len(owned(instance)) == PARTITIONS, "Kafka assigns the instance every partition")
        assert set(owned(instance).values()) == {PartitionState.LOADING}
        refused = join(coordinator, "g")
        assert refused.error_code == 14, refused.error_message
        assert f"Partition {state_partition('g', PARTITIONS)} of {STATE_TOPIC}" in refused.error_message
        found = find_coordinator(coordinator, "g")  # a loading partition's coordinator is its loader
        assert (found.error_code, found.host, found.port) == (0, "localhost", port)  # as advertised

        gate.set()
        wait_for(lambda: set(owned(instance).values()) == {PartitionState.OWNED}, "the partitions load")
        served = join(coordinator, "g")
        assert served.error_code == 0 and served.member_epoch >= 1
    finally:
        gate.set()
        channel.close()
        instance.stop()
