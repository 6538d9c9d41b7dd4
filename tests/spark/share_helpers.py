"""A coordinator for share-group tests with real drivers: short share heartbeats, sessions and record locks, so
a killed driver's locks expire within seconds. Built as `groupcoord serve --bootstrap-servers` builds it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.kafka_lag import KafkaLagSource, partitions_of
from groupcoord.coordinator.runtime.kafka_metadata import KafkaMetadataSource
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.embedded_kafka import EmbeddedKafka
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

from .conftest import COORDINATOR_CONFIG

SHARE_CONFIG: dict[str, Any] = {
    **COORDINATOR_CONFIG,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 250,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.session.timeout.ms": 5000,
    "group.share.assignment.interval.ms": 200,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.record.lock.duration.ms": 3000,
}


@contextmanager
def share_coordinator(kafka: EmbeddedKafka, **overrides: Any) -> Iterator[ServerThread]:
    metadata = KafkaMetadataSource(kafka.bootstrap_servers, refresh_interval_s=0.5)
    metadata.start()
    lag = KafkaLagSource(kafka.bootstrap_servers, partitions=lambda: partitions_of(metadata.snapshot()),
                         refresh_interval_s=0.5)
    lag.start()
    config = {**SHARE_CONFIG, **{k.replace("_", "."): v for k, v in overrides.items()}}
    options = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping(config),
                            metadata_source=metadata, lag_provider=lag, metadata_poll_s=0.2)
    server = ServerThread(options).start()
    try:
        yield server
    finally:
        server.stop()
        lag.stop()
        metadata.stop()


def set_group_configs(address: str, group: str, **configs: str) -> None:
    """AlterGroupConfigs, as `groupcoord groups alter-config` sends it (e.g. share.auto.offset.reset)."""
    with grpc.insecure_channel(address) as channel:
        req = pb.AlterGroupConfigsRequest(group_id=group)
        for name, value in configs.items():
            req.configs.add(name=name.replace("_", "."), value=value)
        resp = pb_grpc.GroupCoordinatorStub(channel).AlterGroupConfigs(req, timeout=10)
        assert not resp.error_code, resp
