"""Streams groups' settings: the group's `streams.*` override over the broker's `group.streams.*` (Kafka 4.x's
GroupConfig and GroupCoordinatorConfig), read through the one lookup every modern group type uses
(`config.ModernGroupConfigs`). Names, defaults, bounds and validation live in `config.py` with the consumer and
share groups' own; this adds only what is streams groups' alone.
"""

from __future__ import annotations

from groupcoord.assignors.sticky_task import StreamsAssignmentConfig
from groupcoord.coordinator.core.config import GroupConfigSource, ModernGroupConfigs


class StreamsConfigs(ModernGroupConfigs):
    """Streams groups' settings. A heartbeat reads them when it runs, so a group's altered override is what its
    next heartbeat uses, as in Kafka. `max_warmup_replicas`, `acceptable_recovery_lag` and
    `task_offset_interval_ms` are Kafka Streams' defaults, which groupcoord does not make configurable."""

    def __init__(self, source: GroupConfigSource, max_warmup_replicas: int = 2,
                 acceptable_recovery_lag: int = 10_000, task_offset_interval_ms: int = 60_000) -> None:
        super().__init__(source, "streams")
        self.max_warmup_replicas = max_warmup_replicas
        self.acceptable_recovery_lag = acceptable_recovery_lag
        self.task_offset_interval_ms = task_offset_interval_ms

    def max_size(self) -> int:
        return int(self.source.config["group.streams.max.size"])

    def num_standby_replicas(self, group_id: str) -> int:
        return int(self.value(group_id, "num.standby.replicas"))

    def initial_rebalance_delay_ms(self, group_id: str) -> int:
        return int(self.value(group_id, "initial.rebalance.delay.ms"))

    def rack_aware_assignment_tags(self, group_id: str) -> tuple[str, ...]:
        return tuple(self.value(group_id, "rack.aware.assignment.tags"))

    def assignment_configs(self, group_id: str) -> tuple[tuple[str, str], ...]:
        """Kafka's streamsGroupAssignmentConfigs: the group's configs whose change calls for a new assignment
        (recorded with each epoch bump as LastAssignmentConfigs, compared by every heartbeat)."""
        return (("num.standby.replicas", str(self.num_standby_replicas(group_id))),)

    def assignment_config(self, group_id: str) -> StreamsAssignmentConfig:
        return StreamsAssignmentConfig(self.num_standby_replicas(group_id), self.max_warmup_replicas,
                                       self.acceptable_recovery_lag, self.rack_aware_assignment_tags(group_id))
