"""The lease: an instance that cannot confirm its membership in the coordinators' group stops serving its
groups before its Kafka session can lapse (after which Kafka may give its partitions to another instance).

librdkafka's mock cluster is enough here: the lease is kept on the instance's side. Taking the only broker down
cuts the instance off; its consumer calls `on_lost` one session timeout after its last heartbeat, which is the
earliest Kafka could hand the partitions on. The router must refuse while the partitions are still OWNED.
"""

from __future__ import annotations

from typing import Any

import pytest

from groupcoord.coordinator.runtime.sharding import PartitionState
from groupcoord.embedded_kafka import EmbeddedKafka
from groupcoord.wire.v1 import coordinator_pb2 as pb

from .conftest import PARTITIONS, STATE_TOPIC, TOPICS, owned, partitions_served, start_instance, stub, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def fetch_code(coordinator: Any, group_id: str) -> int:
    return int(coordinator.OffsetFetch(pb.OffsetFetchRequest(group_id=group_id, member_epoch=-1), timeout=5).error_code)


def test_an_instance_cut_off_from_kafka_stops_serving_before_its_session_lapses() -> None:
    with EmbeddedKafka(1, topics={STATE_TOPIC: PARTITIONS, **TOPICS}) as kafka:
        # A wide margin (1.5 s of a 3 s session) keeps the order observable on a loaded machine.
        instance = start_instance(kafka, session_timeout_ms=3000, heartbeat_interval_ms=300, lease_margin_ms=1500)
        channel, coordinator = stub(instance.address)
        try:
            wait_for(lambda: partitions_served([instance]), "the instance owns every partition")
            wait_for(lambda: fetch_code(coordinator, "g") == 0, "the instance serves group g")

            kafka.set_broker_down(1)
            states_when_refused: list[set[PartitionState]] = []

            def refused() -> bool:
                if fetch_code(coordinator, "g") != 16:  # NOT_COORDINATOR
                    return False
                states_when_refused.append(set(owned(instance).values()))
                return True

            wait_for(refused, "the instance refuses once its lease lapsed", timeout_s=30)
            assert states_when_refused == [{PartitionState.OWNED}], (
                "it served until its consumer lost the partitions: no lease kept it from serving past its session")
            found = coordinator.FindCoordinator(pb.FindCoordinatorRequest(keys=["g"]), timeout=5).coordinators[0]
            assert (found.error_code, found.port) != (0, instance.server.port), "FindCoordinator no longer names it"

            kafka.set_broker_up(1)
            wait_for(lambda: fetch_code(coordinator, "g") == 0, "it serves again once it confirms its membership",
                     timeout_s=60)
        finally:
            channel.close()
            instance.stop()
