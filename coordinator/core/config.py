"""Broker-level and group-level configuration, with Kafka's names, defaults and bounds.

Broker configs are validated once at start-up (`BrokerConfig.from_mapping`); group configs are dynamic and
go through the same validator (`validate_group_configs`) when altered over the RPC. Every rejection names
the key, the value and the allowed range, so the message alone tells the operator what to fix.

`group.share.*` keys configure share groups (KIP-932) and `group.streams.*` keys streams groups (KIP-1071),
with Kafka 4.x names, defaults and bounds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from groupcoord.assignors.registry import server_assignor_names
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.limits import shorten

INT32_MAX = 2_147_483_647
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")  # Kafka's ConsumerGroupMigrationPolicy
MODERN_TYPES = ("consumer", "share", "streams")


class ConfigError(ValueError):
    """An invalid configuration value; the message is meant for the operator."""


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: type  # int, bool, str or list
    default: Any
    doc: str
    min: int | None = None
    max: int | None = None
    choices: tuple[str, ...] | None = None

    def parse(self, raw: Any) -> Any:
        """Parse a TOML value or a `--set` string into the declared type, enforcing bounds and choices."""
        try:
            value = _coerce(self.type, raw)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{self.name}: cannot parse {shorten(raw)} as {self.type.__name__} ({e})") from None
        if self.type is int:
            if self.min is not None and value < self.min:
                raise ConfigError(f"{self.name}={value} is below the minimum {self.min}")
            if self.max is not None and value > self.max:
                raise ConfigError(f"{self.name}={value} is above the maximum {self.max}")
        if self.choices is not None:
            items = value if isinstance(value, list) else [value]
            for item in items:
                if item not in self.choices:
                    raise ConfigError(f"{self.name}={shorten(raw)}: {shorten(item)} is not one of "
                                      f"{', '.join(self.choices)}")
        return value


def _coerce(kind: type, raw: Any) -> Any:
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        raise ValueError("expected true or false")
    if kind is int:
        if isinstance(raw, bool):
            raise ValueError("expected an integer")
        if isinstance(raw, int):
            return raw
        if isinstance(raw, str):
            return int(raw.strip().replace("_", ""))
        raise ValueError("expected an integer")
    if kind is list:
        if isinstance(raw, str):
            return [s.strip() for s in raw.split(",") if s.strip()]
        if isinstance(raw, list | tuple):
            return [str(s) for s in raw]
        raise ValueError("expected a comma-separated list")
    if kind is str:
        if isinstance(raw, str):
            return raw
        raise ValueError("expected a string")
    raise TypeError(f"unsupported config type {kind}")


def _member_defs(kind: str) -> list[ConfigDef]:
    """Kafka's session timeout and heartbeat interval of a consumer, share or streams group's members, with their
    bounds (the same defaults for the three types)."""
    return [
        ConfigDef(f"group.{kind}.session.timeout.ms", int, 45000, f"Timeout to detect a failed {kind}-group member.",
                  1),
        ConfigDef(f"group.{kind}.min.session.timeout.ms", int, 45000,
                  f"Lower bound for {kind}-group session timeouts.", 1),
        ConfigDef(f"group.{kind}.max.session.timeout.ms", int, 60000,
                  f"Upper bound for {kind}-group session timeouts.", 1),
        ConfigDef(f"group.{kind}.heartbeat.interval.ms", int, 5000,
                  f"Interval at which {kind}-group members heartbeat.", 1),
        ConfigDef(f"group.{kind}.min.heartbeat.interval.ms", int, 5000,
                  f"Lower bound for {kind}-group heartbeat intervals.", 1),
        ConfigDef(f"group.{kind}.max.heartbeat.interval.ms", int, 15000,
                  f"Upper bound for {kind}-group heartbeat intervals.", 1),
    ]


def _interval_defs(kind: str, doc_suffix: str) -> list[ConfigDef]:
    return [
        ConfigDef(f"group.{kind}.assignment.interval.ms", int, 1000,
                  f"The interval between assignment updates for a {kind} group (KIP-1263).{doc_suffix}", 0),
        ConfigDef(f"group.{kind}.min.assignment.interval.ms", int, 0,
                  f"The minimum interval between assignment updates for a {kind} group.{doc_suffix}", 0),
        ConfigDef(f"group.{kind}.max.assignment.interval.ms", int, 15000,
                  f"The maximum interval between assignment updates for a {kind} group.{doc_suffix}", 0),
        ConfigDef(f"group.{kind}.assignor.offload.enable", bool, True,
                  f"Whether to offload {kind} group assignment to a background thread.{doc_suffix}"),
    ]


BROKER_CONFIG_DEFS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        ConfigDef("group.coordinator.background.threads", int, 2,
                  "Workers of the background executor that runs offloaded assignor runs.", 1, 64),
        ConfigDef("group.coordinator.background.executor", str, "process",
                  "Where offloaded assignor runs execute: 'process' (a pool of worker processes, so an assignor "
                  "never holds the event loop's GIL) or 'thread' (threads of the coordinator process: no "
                  "start-up cost, for tests and small groups). groupcoord's own; Kafka has one JVM.",
                  choices=("process", "thread")),
        ConfigDef("group.coordinator.background.niceness", int, 10,
                  "How much lower the CPU priority of the 'process' executor's workers is than the coordinator's "
                  "(added to its nice value): on a busy machine an assignor run then takes only the CPU the "
                  "heartbeat path leaves, instead of time-slicing with it. 0 keeps them level. groupcoord's own.",
                  0, 19),
        ConfigDef("group.coordinator.background.idle.scheduling", bool, True,
                  "Whether the 'process' executor's workers run under Linux's SCHED_IDLE policy: they get only CPU "
                  "time nothing else on the machine wants, and a waking event loop preempts them at once (a task "
                  "that is only niced may first finish its time slice, a millisecond or more of every heartbeat "
                  "waiting). On a machine kept fully busy an assignor run then waits for idle time. Ignored where "
                  "the policy does not exist; false leaves only the niceness. groupcoord's own."),
        *_member_defs("consumer"),
        ConfigDef("group.consumer.max.size", int, INT32_MAX, "Maximum number of members of a consumer group.", 1),
        ConfigDef("group.consumer.assignors", list, ["uniform", "range"],
                  "Server-side assignors, by name; the first is the default."),
        *_interval_defs("consumer", ""),
        *_interval_defs("share", ""),
        # Share groups (KIP-932), Kafka 4.x names, defaults and bounds.
        *_member_defs("share"),
        ConfigDef("group.share.max.size", int, 200,
                  "The maximum number of members that a single share group can accommodate.", 1, 1000),
        ConfigDef("group.share.assignors", list, ["simple"],
                  "The server-side share-group assignor (a single entry).", choices=("simple",)),
        ConfigDef("group.share.record.lock.duration.ms", int, 30000,
                  "The record acquisition lock duration in milliseconds for share groups.", 1000, 3600000),
        ConfigDef("group.share.min.record.lock.duration.ms", int, 15000,
                  "The record acquisition lock minimum duration in milliseconds for share groups.", 1000, 30000),
        ConfigDef("group.share.max.record.lock.duration.ms", int, 60000,
                  "The record acquisition lock maximum duration in milliseconds for share groups.", 30000, 3600000),
        ConfigDef("group.share.delivery.count.limit", int, 5,
                  "The maximum number of delivery attempts for a record delivered to a share group.", 2, 10),
        ConfigDef("group.share.partition.max.record.locks", int, 2000,
                  "Share-group record lock limit per share-partition.", 100, 10000),
        # Streams groups (KIP-1071), Kafka 4.x names, defaults and bounds.
        *_interval_defs("streams", ""),
        *_member_defs("streams"),
        ConfigDef("group.streams.max.size", int, INT32_MAX, "Maximum number of members of a streams group.", 1),
        ConfigDef("group.streams.num.standby.replicas", int, 0, "Standby replicas per stateful task.", 0),
        ConfigDef("group.streams.max.standby.replicas", int, 2,
                  "Upper bound for streams-group standby replicas (the broker's and a group's).", 0),
        ConfigDef("group.streams.rack.aware.assignment.tags", list, [],
                  "Client tag keys, by priority, over which a streams task's standbys are spread (distinct values "
                  "first)."),
        ConfigDef("group.streams.initial.rebalance.delay.ms", int, 3000,
                  "How long a new streams group waits for more members before its first assignment; "
                  "group.streams.assignment.interval.ms starts after it.", 0),
        ConfigDef("group.consumer.regex.refresh.interval.ms", int, 600000,
                  "How often the topics matching a group's subscribed regexes are resolved again (they are also "
                  "resolved when topic metadata changes).", 10000),
        ConfigDef("offsets.retention.minutes", int, 10080,
                  "How long committed offsets are kept after the group became empty, or after the commit for a "
                  "group that never had members (KIP-211).", 1),
        ConfigDef("offsets.retention.check.interval.ms", int, 600000, "How often expired offsets are removed.", 1),
        ConfigDef("offset.metadata.max.bytes", int, 4096, "Maximum size of an offset commit's metadata.", 0),
        # Request and response sizes (README "Limits"). Kafka's names where Kafka has the concept.
        ConfigDef("message.max.bytes", int, 1048588,
                  "The most classic protocol metadata one group may hold (all members, all protocols; Kafka writes "
                  "it in one record) and the most assignment bytes one SyncGroup may carry.", 1024, INT32_MAX),
        ConfigDef("socket.request.max.bytes", int, 4 * 1024 * 1024,
                  "The largest gRPC request the server reads (Kafka's default is 100 MiB; gRPC's is 4 MiB).",
                  1024, INT32_MAX),
        ConfigDef("groupcoord.response.max.bytes", int, 4 * 1024 * 1024,
                  "The largest gRPC response the server sends.", 1024, INT32_MAX),
        # Bursts (a restart: every member rejoins at once) wait in gRPC's queue of calls not yet taken up.
        ConfigDef("queued.max.requests", int, 20_000,
                  "Calls gRPC may hold before the coordinator takes them up (gRPC's grpc.server.max_pending_requests "
                  "and its hard limit), beyond which they fail; size it for the members that may rejoin at once, "
                  "as after a restart. gRPC's default is 1,000 (refusing at random from there to 3,000); Kafka's "
                  "queued.max.requests, 500, bounds its own request queue.", 1, INT32_MAX),
        ConfigDef("groupcoord.max.concurrent.requests", int, 0,
                  "Load shedding: the most calls the coordinator works on at once (a stream counts for its life); "
                  "a call beyond it is refused at once with RESOURCE_EXHAUSTED, on which groupcoord's clients back "
                  "off (jittered, exponential). 0: no limit, calls wait in the queued.max.requests queue.",
                  0, INT32_MAX),
        ConfigDef("groupcoord.grpc.max.concurrent.streams", int, 0,
                  "HTTP/2 flow control: the most calls one client connection may have open at once; the client "
                  "queues the rest itself (gRPC's grpc.max_concurrent_streams). 0: no limit (gRPC's default). A "
                  "long-lived heartbeat stream holds one for its life.", 0, INT32_MAX),
        # The local state log (`serve --state-dir`); groupcoord's own names.
        ConfigDef("groupcoord.log.fsync", str, "always",
                  "When an append is acknowledged: always (after fsync, group-committed), interval (after write; "
                  "fsync every groupcoord.log.fsync.interval.ms), never (after write).",
                  choices=("always", "interval", "never")),
        ConfigDef("groupcoord.log.fsync.interval.ms", int, 1000, "fsync period under the interval policy.", 1),
        ConfigDef("groupcoord.log.snapshot.records", int, 200_000,
                  "Write a snapshot (and drop older log files) after this many records were appended.", 1),
        # Classic protocol (JoinGroup/SyncGroup).
        ConfigDef("group.min.session.timeout.ms", int, 6000, "Classic groups: minimum session timeout.", 1),
        ConfigDef("group.max.session.timeout.ms", int, 1800000, "Classic groups: maximum session timeout.", 1),
        ConfigDef("group.initial.rebalance.delay.ms", int, 3000,
                  "Classic groups: how long a new group waits for more members before the first rebalance.", 0),
        ConfigDef("group.max.size", int, INT32_MAX, "Classic groups: maximum number of members.", 1),
        ConfigDef("group.consumer.migration.policy", str, "bidirectional",
                  "Online migration between the classic and consumer protocols (KIP-848, case-insensitive): "
                  "bidirectional, upgrade (classic to consumer only), downgrade (consumer to classic only), "
                  "disabled."),
    ]
}


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Validated broker configuration. Access values with `config["kafka.name"]`."""

    values: Mapping[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @staticmethod
    def from_mapping(raw: Mapping[str, Any] | None = None) -> BrokerConfig:
        """Validate `raw` (TOML values or `--set` strings) on top of the defaults; raise ConfigError."""
        values = {name: d.default for name, d in BROKER_CONFIG_DEFS.items()}
        for name, value in (raw or {}).items():
            d = BROKER_CONFIG_DEFS.get(name)
            if d is None:
                raise ConfigError(f"unknown config {shorten(name)}; known: {', '.join(sorted(BROKER_CONFIG_DEFS))}")
            values[name] = d.parse(value)
        _check_bounds(values)
        return BrokerConfig(values)


def _check_bounds(v: Mapping[str, Any]) -> None:
    def between(name: str, lo: str, hi: str) -> None:
        if v[lo] > v[hi]:
            raise ConfigError(f"{lo}={v[lo]} must not exceed {hi}={v[hi]}")
        if not v[lo] <= v[name] <= v[hi]:
            raise ConfigError(f"{name}={v[name]} must be between {lo}={v[lo]} and {hi}={v[hi]}")

    def bounded(prefix: str, name: str) -> None:
        between(f"{prefix}.{name}", f"{prefix}.min.{name}", f"{prefix}.max.{name}")

    for kind in MODERN_TYPES:
        bounded(f"group.{kind}", "session.timeout.ms")
        bounded(f"group.{kind}", "heartbeat.interval.ms")
        bounded(f"group.{kind}", "assignment.interval.ms")
        if v[f"group.{kind}.heartbeat.interval.ms"] >= v[f"group.{kind}.session.timeout.ms"]:
            raise ConfigError(f"group.{kind}.heartbeat.interval.ms must be lower than group.{kind}.session.timeout.ms")
    bounded("group.share", "record.lock.duration.ms")
    if v["group.streams.num.standby.replicas"] > v["group.streams.max.standby.replicas"]:
        raise ConfigError(f"group.streams.num.standby.replicas={v['group.streams.num.standby.replicas']} must not "
                          f"exceed group.streams.max.standby.replicas={v['group.streams.max.standby.replicas']}")
    tags = v["group.streams.rack.aware.assignment.tags"]
    if len(set(tags)) != len(tags):
        raise ConfigError("group.streams.rack.aware.assignment.tags names a key twice")
    if v["group.min.session.timeout.ms"] > v["group.max.session.timeout.ms"]:
        raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
    if str(v["group.consumer.migration.policy"]).lower() not in MIGRATION_POLICIES:
        raise ConfigError(f"group.consumer.migration.policy={shorten(v['group.consumer.migration.policy'])} is not "
                          f"one of {', '.join(MIGRATION_POLICIES)} (case-insensitive)")
    if not v["group.consumer.assignors"]:
        raise ConfigError("group.consumer.assignors must name at least one assignor")
    known = server_assignor_names()
    unknown = [name for name in v["group.consumer.assignors"] if name not in known]
    if unknown:
        raise ConfigError(f"group.consumer.assignors: unknown assignor {shorten(unknown[0])}; "
                          f"known: {', '.join(known)}")


# --- group configs (dynamic, per group; KIP-848 / KIP-1263 names) ---------------------------------------

@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    type: type
    default: Any  # None = not set: the broker value applies
    doc: str
    bounds: Callable[[BrokerConfig], tuple[int, int]] | None = None
    allow_minus_one: bool = False
    choices: tuple[str, ...] | None = None


def _bounds(lo: str, hi: str) -> Callable[[BrokerConfig], tuple[int, int]]:
    return lambda b: (b[lo], b[hi])


GROUP_CONFIG_DEFS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in [
        *[
            GroupConfigDef(f"{kind}.{name}", int, None, f"{doc} for this {kind} group.",
                           _bounds(f"group.{kind}.min.{name}", f"group.{kind}.max.{name}"))
            for kind in MODERN_TYPES
            for name, doc in (("session.timeout.ms", "Session timeout"),
                              ("heartbeat.interval.ms", "Heartbeat interval"))
        ],
        *[
            d
            for kind in MODERN_TYPES
            for d in (
                GroupConfigDef(f"{kind}.assignment.interval.ms", int, -1,
                               f"Interval between assignment updates for this {kind} group; -1 uses the broker's "
                               f"group.{kind}.assignment.interval.ms.",
                               _bounds(f"group.{kind}.min.assignment.interval.ms",
                                       f"group.{kind}.max.assignment.interval.ms"), allow_minus_one=True),
                GroupConfigDef(f"{kind}.assignor.offload.enable", bool, None,
                               f"Whether to offload this {kind} group's assignor runs; not set uses the broker's."),
            )
        ],
        GroupConfigDef("streams.num.standby.replicas", int, None,
                       "Standby replicas per stateful task of this streams group.",
                       lambda b: (0, b["group.streams.max.standby.replicas"])),
        GroupConfigDef("streams.initial.rebalance.delay.ms", int, None,
                       "How long this new streams group waits for more members before its first assignment.",
                       lambda b: (0, INT32_MAX)),
        GroupConfigDef("streams.rack.aware.assignment.tags", list, None,
                       "Client tag keys for this streams group's standby placement; not set uses the broker's."),
        GroupConfigDef("share.record.lock.duration.ms", int, None,
                       "The record acquisition lock duration for this share group.",
                       _bounds("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms")),
        GroupConfigDef("share.delivery.count.limit", int, None,
                       "The maximum number of delivery attempts for a record of this share group (KIP-1240).",
                       lambda b: (2, 10)),
        GroupConfigDef("share.partition.max.record.locks", int, None,
                       "Record lock limit per share-partition of this share group (KIP-1240).",
                       lambda b: (100, 10000)),
        GroupConfigDef("share.auto.offset.reset", str, "latest",
                       "Where a new share-partition starts: latest (the log end) or earliest (the log start).",
                       choices=("latest", "earliest")),
        GroupConfigDef("consumer.auto.offset.reset", str, "latest",
                       "groupcoord extension: how lag-aware assignors count a partition with no committed offset "
                       "(latest: lag 0; earliest: the whole retained log).",
                       choices=("latest", "earliest", "none")),
    ]
}


def validate_group_configs(updates: Mapping[str, str | None], broker: BrokerConfig,
                           current: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Parse dynamic group config updates (None deletes an override) over the group's `current` overrides.
    Raises CoordinatorError(INVALID_CONFIG)."""
    parsed: dict[str, Any] = {}
    for name, raw in updates.items():
        d = GROUP_CONFIG_DEFS.get(name)
        if d is None:
            raise CoordinatorError(Errors.INVALID_CONFIG,
                                   f"unknown group config {shorten(name)}; "
                                   f"known: {', '.join(sorted(GROUP_CONFIG_DEFS))}")
        if raw is None:
            parsed[name] = None
            continue
        try:
            value = _coerce(d.type, raw)
        except (TypeError, ValueError) as e:
            message = f"{name}: cannot parse {shorten(raw)} ({shorten(str(e))})"
            raise CoordinatorError(Errors.INVALID_CONFIG, message) from None
        if d.type is int and d.bounds is not None and not (d.allow_minus_one and value == -1):
            lo, hi = d.bounds(broker)
            if not lo <= value <= hi:
                extra = " or -1" if d.allow_minus_one else ""
                raise CoordinatorError(Errors.INVALID_CONFIG, f"{name}={value} must be between {lo} and {hi}{extra}")
        if d.choices is not None and value not in d.choices:
            raise CoordinatorError(Errors.INVALID_CONFIG,
                                   f"{name}={shorten(value)} must be one of {', '.join(d.choices)}")
        if d.type is list and len(set(value)) != len(value):
            raise CoordinatorError(Errors.INVALID_CONFIG, f"{name}={shorten(raw)} names a value twice")
        parsed[name] = value
    _check_session_above_heartbeat(parsed, broker, current or {})
    return parsed


def _check_session_above_heartbeat(parsed: Mapping[str, Any], broker: BrokerConfig, current: Mapping[str, Any]) -> None:
    """Kafka's GroupConfig.validateSessionExceedsHeartbeat: when a group sets either, its session timeout must
    exceed its heartbeat interval, each the group's (after this change) or else the broker's."""
    for kind in MODERN_TYPES:
        session, heartbeat = f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms"
        if session not in parsed and heartbeat not in parsed:
            continue

        def effective(name: str) -> int:
            value = parsed[name] if name in parsed else current.get(name)
            return int(broker[f"group.{name}"] if value is None else value)

        if effective(session) <= effective(heartbeat):
            raise CoordinatorError(Errors.INVALID_CONFIG, f"{session} must be greater than {heartbeat} "
                                                          f"({effective(session)} <= {effective(heartbeat)})")


def altered_group_configs(current: Mapping[str, Any], updates: Mapping[str, str | None],
                          broker: BrokerConfig) -> dict[str, Any]:
    """A group's overrides after an incremental alter (None deletes one); all-or-nothing: CoordinatorError."""
    merged = dict(current)
    for name, value in validate_group_configs(updates, broker, current).items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return merged


def render_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


class GroupConfigSource(Protocol):
    config: BrokerConfig

    def group_config(self, group_id: str, name: str) -> Any: ...


def group_override(overrides: Mapping[str, Mapping[str, Any]], group_id: str, name: str) -> Any:
    """The group's override of `name`, or its schema default (None = not set)."""
    mine = overrides.get(group_id)
    if mine is not None and name in mine:
        return mine[name]
    return GROUP_CONFIG_DEFS[name].default


class GroupConfigStore:
    """A broker config and group overrides outside a shard (a group type's core tests): a GroupConfigSource."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.group_configs: dict[str, dict[str, Any]] = {}

    def group_config(self, group_id: str, name: str) -> Any:
        return group_override(self.group_configs, group_id, name)

    def alter(self, group_id: str, updates: Mapping[str, str | None]) -> None:
        """AlterGroupConfigs without the log (CoordinatorError when invalid)."""
        self.group_configs[group_id] = altered_group_configs(self.group_configs.get(group_id, {}), updates,
                                                             self.config)


class ModernGroupConfigs:
    """One consumer, share or streams group's settings: its override (`<type>.<name>`, AlterGroupConfigs) over
    the broker's (`group.<type>.<name>`), -1 meaning unset, as Kafka's GroupConfigManager. One lookup for every
    modern group type; each type's subclass adds the settings only it has."""

    def __init__(self, source: GroupConfigSource, group_type: str) -> None:
        self.source = source
        self.group_type = group_type
        self._names_cache: dict[str, tuple[str, str]] = {}  # name -> (the group's config, the broker's): a memo

    def value(self, group_id: str, name: str) -> Any:
        names = self._names_cache.get(name)
        if names is None:
            names = self._names_cache[name] = (f"{self.group_type}.{name}", f"group.{self.group_type}.{name}")
        v = self.source.group_config(group_id, names[0])
        return self.source.config[names[1]] if v is None or v == -1 else v

    def session_timeout_ms(self, group_id: str) -> int:
        return int(self.value(group_id, "session.timeout.ms"))

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return int(self.value(group_id, "heartbeat.interval.ms"))

    def assignment_interval_ms(self, group_id: str) -> int:
        """KIP-1263: the group's assignment interval unless -1, else the broker's."""
        return int(self.value(group_id, "assignment.interval.ms"))

    def offload_enabled(self, group_id: str) -> bool:
        return bool(self.value(group_id, "assignor.offload.enable"))
