"""How an instance of the Kafka-backed mode is configured: the state topic, the coordinators' group, the lease.

The options of `serve --bootstrap-servers ... --state-topic ...`, shared by the ownership of state partitions
(`sharding`), its lease (`ownership_lease`) and its directory (`ownership_directory`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from groupcoord.coordinator.runtime.kafka_log import KafkaRecordLog


def parse_host_port(value: str) -> tuple[str, int]:
    """`host:port` or `[v6]:port` -> (host, port); raises ValueError with the offending text."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)


def format_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class KafkaStateOptions:
    """Records in a Kafka topic; groups sharded over every instance configured with the same topic."""

    bootstrap_servers: str
    topic: str = "__groupcoord_state"
    partitions: int = 50  # Kafka's offsets.topic.num.partitions; must equal the topic's partition count
    group_id: str | None = None  # the coordinators' consumer group; default "groupcoord-coordinators.<topic>"
    session_timeout_ms: int = 10_000  # how long a dead instance keeps its partitions
    heartbeat_interval_ms: int | None = None  # default: a fifth of the session timeout
    lease_margin_ms: int | None = None  # serve until confirmed + session - margin; default: a fifth of the session
    directory_refresh_ms: int = 1_000
    load_timeout_s: float = 60.0
    linger_ms: int = 5
    create_topic: bool = True  # create it (compacted) when missing; the mock cluster cannot: tests create it
    client_config: Mapping[str, Any] = field(default_factory=dict)  # for every Kafka client (e.g. SASL/SSL)
    producer_config: Mapping[str, Any] = field(default_factory=dict)  # the record log's producer
    consumer_config: Mapping[str, Any] = field(default_factory=dict)  # the coordinators' group member

    @property
    def heartbeat_ms(self) -> int:
        return self.heartbeat_interval_ms or max(100, self.session_timeout_ms // 5)

    @property
    def lease_ms(self) -> int:
        """How long a confirmation of membership lets this instance serve: session timeout minus the margin."""
        margin = self.lease_margin_ms if self.lease_margin_ms is not None else self.session_timeout_ms // 5
        return self.session_timeout_ms - margin

    @property
    def coordinators_group(self) -> str:
        return self.group_id or f"groupcoord-coordinators.{self.topic}"

    def record_log(self, client_id: str = "groupcoord") -> KafkaRecordLog:
        return KafkaRecordLog(self.bootstrap_servers, self.topic, self.partitions, client_id=client_id,
                              linger_ms=self.linger_ms, create_topic=self.create_topic, transactional=True,
                              client_config=self.client_config, producer_config=self.producer_config)
