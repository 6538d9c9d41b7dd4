"""Streams group configuration: Kafka's `group.streams.*` broker configs and the `streams.*` group overrides.

KIP-1263 adds `group.streams.assignment.interval.ms` (default 1,000 ms, bounded by
`group.streams.min.assignment.interval.ms` 0 and `group.streams.max.assignment.interval.ms` 15,000) and
`group.streams.assignor.offload.enable` (default true); a group may override both with
`streams.assignment.interval.ms` (-1: use the broker's) and `streams.assignor.offload.enable`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from groupcoord.assignors.sticky_task import StreamsAssignmentConfig
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.limits import shorten

INT32_MAX = 2_147_483_647


@dataclass(frozen=True, slots=True)
class StreamsGroupConfig:
    session_timeout_ms: int = 45_000  # group.streams.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.streams.heartbeat.interval.ms
    max_size: int = INT32_MAX  # group.streams.max.size
    num_standby_replicas: int = 0  # group.streams.num.standby.replicas
    max_standby_replicas: int = 2  # group.streams.max.standby.replicas
    initial_rebalance_delay_ms: int = 3_000  # group.streams.initial.rebalance.delay.ms
    assignment_interval_ms: int = 1_000  # group.streams.assignment.interval.ms (KIP-1263)
    min_assignment_interval_ms: int = 0  # group.streams.min.assignment.interval.ms
    max_assignment_interval_ms: int = 15_000  # group.streams.max.assignment.interval.ms
    assignor_offload_enable: bool = True  # group.streams.assignor.offload.enable
    max_warmup_replicas: int = 2  # Kafka Streams' max.warmup.replicas
    acceptable_recovery_lag: int = 10_000  # Kafka Streams' acceptable.recovery.lag
    task_offset_interval_ms: int = 60_000  # Kafka Streams' task.offset.interval.ms
    rack_aware_assignment_tags: tuple[str, ...] = ()  # group.streams.rack.aware.assignment.tags

    def __post_init__(self) -> None:
        if not self.min_assignment_interval_ms <= self.assignment_interval_ms <= self.max_assignment_interval_ms:
            raise ValueError(
                f"group.streams.assignment.interval.ms={self.assignment_interval_ms} is outside "
                f"[{self.min_assignment_interval_ms}, {self.max_assignment_interval_ms}]")
        if isinstance(self.rack_aware_assignment_tags, list | str):  # from a broker config list / a string
            object.__setattr__(self, "rack_aware_assignment_tags", _tags(self.rack_aware_assignment_tags))
        if len(set(self.rack_aware_assignment_tags)) != len(self.rack_aware_assignment_tags):
            raise ValueError("group.streams.rack.aware.assignment.tags names a key twice")
        if not 0 <= self.num_standby_replicas <= self.max_standby_replicas:
            raise ValueError(f"group.streams.num.standby.replicas={self.num_standby_replicas} is outside "
                             f"[0, {self.max_standby_replicas}]")

    @staticmethod
    def broker_keys() -> list[str]:
        return ["group.streams." + n.replace("_", ".") for n in StreamsGroupConfig.__dataclass_fields__]

    @staticmethod
    def from_broker(configs: Mapping[str, object]) -> StreamsGroupConfig:
        """From Kafka's `group.streams.*` names (unknown keys ignored: other modules own them)."""
        kw: dict[str, object] = {}
        for name in StreamsGroupConfig.__dataclass_fields__:
            key = "group.streams." + name.replace("_", ".")
            if key in configs:
                kw[name] = configs[key]
        return StreamsGroupConfig(**kw)  # type: ignore[arg-type]

    def validate_group_overrides(self, configs: Mapping[str, object]) -> None:
        """INVALID_CONFIG for an override outside the broker's bounds (the message names key and range)."""
        self.with_overrides(configs)

    def with_overrides(self, configs: Mapping[str, object]) -> StreamsGroupConfig:
        """Apply the `streams.*` group configs (strings from a request, or typed values from a GroupConfig
        record; other group types' keys are ignored)."""
        kw: dict[str, object] = {}
        for key, value in configs.items():
            if not key.startswith("streams.") or value is None:
                continue
            raw = str(value).lower() if isinstance(value, bool) else str(value)
            if key == "streams.assignment.interval.ms":
                v = _int(key, raw)
                if v == -1:
                    continue
                if not self.min_assignment_interval_ms <= v <= self.max_assignment_interval_ms:
                    raise CoordinatorError(Errors.INVALID_CONFIG, f"{key}={v} is outside "
                                           f"[{self.min_assignment_interval_ms}, {self.max_assignment_interval_ms}]")
                kw["assignment_interval_ms"] = v
            elif key == "streams.assignor.offload.enable":
                if raw.lower() not in ("true", "false"):
                    raise CoordinatorError(Errors.INVALID_CONFIG, f"{key}={shorten(raw)} is not a boolean")
                kw["assignor_offload_enable"] = raw.lower() == "true"
            elif key == "streams.num.standby.replicas":
                v = _int(key, raw)
                if not 0 <= v <= self.max_standby_replicas:
                    raise CoordinatorError(Errors.INVALID_CONFIG,
                                           f"{key}={v} is outside [0, {self.max_standby_replicas}]")
                kw["num_standby_replicas"] = v
            elif key == "streams.rack.aware.assignment.tags":
                tags = _tags(value if isinstance(value, list | tuple) else raw)
                if len(set(tags)) != len(tags):
                    raise CoordinatorError(Errors.INVALID_CONFIG, f"{key} names a key twice")
                kw["rack_aware_assignment_tags"] = tags
            elif key in ("streams.session.timeout.ms", "streams.heartbeat.interval.ms",
                         "streams.initial.rebalance.delay.ms"):
                v = _int(key, raw)
                if v < 0:
                    raise CoordinatorError(Errors.INVALID_CONFIG, f"{key}={v} is negative")
                kw[key.removeprefix("streams.").replace(".", "_")] = v
            else:
                raise CoordinatorError(Errors.INVALID_CONFIG, f"unknown streams group config {shorten(key)}")
        return replace(self, **kw) if kw else self  # type: ignore[arg-type]

    def assignment_config(self) -> StreamsAssignmentConfig:
        return StreamsAssignmentConfig(self.num_standby_replicas, self.max_warmup_replicas,
                                       self.acceptable_recovery_lag, self.rack_aware_assignment_tags)


def _tags(value: object) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    return tuple(str(t).strip() for t in items if str(t).strip())


def _int(key: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise CoordinatorError(Errors.INVALID_CONFIG, f"{key}={shorten(raw)} is not an integer") from None
