"""A streams group's configs come from the same definitions as consumer and share groups' (Kafka's GroupConfig):
`streams.session.timeout.ms`, `streams.heartbeat.interval.ms`, `streams.num.standby.replicas` and
`streams.initial.rebalance.delay.ms` override the broker's `group.streams.*` within its bounds, are refused
with INVALID_CONFIG outside them, are described, and the group's next heartbeat uses them."""

from __future__ import annotations

import pytest

from groupcoord.coordinator.core.config import BrokerConfig, ConfigError
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.core.streams import handlers as streams_shard
from groupcoord.coordinator.core.streams.group import StreamsHeartbeatRequest, StreamsHeartbeatResponse
from groupcoord.coordinator.core.streams.records import NO_TASKS, Tasks
from tests.core.streams_context import GROUP, READY, image, word_count
from tests.purity import applied

BROKER = {"group.streams.initial.rebalance.delay.ms": 0, "group.streams.assignor.offload.enable": False,
          "group.streams.assignment.interval.ms": 0}


def _shard(**extra: object) -> GroupCoordinatorShard:
    return GroupCoordinatorShard(BrokerConfig.from_mapping({**BROKER, **extra}), lambda: "unused", image(**READY))


def _alter(shard: GroupCoordinatorShard, **configs: str | None) -> int:
    updates = {k.replace("_", "."): v for k, v in configs.items()}
    return int(applied(shard, shard.alter_group_configs(GROUP, updates, False, 0)).response.error_code)


def _beat(shard: GroupCoordinatorShard, member: str, epoch: int, now: int,
          active: Tasks = NO_TASKS) -> tuple[StreamsHeartbeatResponse, dict[tuple[str, ...], int]]:
    extra = dict(topology=word_count(), process_id=member, rebalance_timeout_ms=1000) if epoch == 0 else {}
    req = StreamsHeartbeatRequest(GROUP, member, epoch, active_tasks=active, standby_tasks=NO_TASKS,
                                  warmup_tasks=NO_TASKS, **extra)  # type: ignore[arg-type]
    res = streams_shard.heartbeat(shard, req, now)
    shard.apply(res)
    assert res.response.error_code == 0, res.response.error_message
    return res.response, {t.key: t.deadline_ms for t in res.timers if hasattr(t, "deadline_ms")}


def test_the_group_heartbeat_interval_override_is_what_the_next_heartbeat_answers() -> None:
    shard = _shard()
    joined, _ = _beat(shard, "a", 0, 0)
    assert joined.heartbeat_interval_ms == 5000
    assert _alter(shard, streams_heartbeat_interval_ms="7000") == 0
    again, _ = _beat(shard, "a", joined.member_epoch, 10, joined.active_tasks or NO_TASKS)
    assert again.heartbeat_interval_ms == 7000
    assert _alter(shard, streams_heartbeat_interval_ms=None) == 0  # deleting the override: the broker's again
    assert _beat(shard, "a", again.member_epoch, 20, joined.active_tasks or NO_TASKS)[0].heartbeat_interval_ms == 5000


def test_the_group_session_timeout_override_arms_the_members_session() -> None:
    shard = _shard()
    joined, timers = _beat(shard, "a", 0, 0)
    assert timers[("streams-session", GROUP, "a")] == 45_000
    assert _alter(shard, streams_session_timeout_ms="50000") == 0
    _, timers = _beat(shard, "a", joined.member_epoch, 100, joined.active_tasks or NO_TASKS)
    assert timers[("streams-session", GROUP, "a")] == 100 + 50_000
    assert shard.streams.session_timeout_ms(GROUP) == 50_000


def test_the_group_initial_rebalance_delay_override_holds_the_first_assignment() -> None:
    shard = _shard()
    assert _alter(shard, streams_initial_rebalance_delay_ms="2000") == 0
    joined, timers = _beat(shard, "a", 0, 0)
    assert not joined.active_tasks, "no assignment before the group's own initial delay"
    assert timers[("streams-assign", GROUP)] == 2000


def _standbys(shard: GroupCoordinatorShard) -> int:
    _beat(shard, "a", 0, 0)
    _beat(shard, "b", 0, 10)  # a new target for two processes
    return sum(len(m.standby) for m in shard.streams.groups[GROUP].target.values())


def test_the_group_standby_replicas_override_gives_stateful_tasks_standbys() -> None:
    assert _standbys(_shard()) == 0
    shard = _shard()
    assert _alter(shard, streams_num_standby_replicas="1") == 0
    assert _standbys(shard) > 0, "standbys for subtopology 1's stateful tasks"


@pytest.mark.parametrize(("name", "value"), [
    ("streams.session.timeout.ms", "44999"),  # below group.streams.min.session.timeout.ms
    ("streams.session.timeout.ms", "60001"),  # above group.streams.max.session.timeout.ms
    ("streams.heartbeat.interval.ms", "4999"),
    ("streams.heartbeat.interval.ms", "15001"),
    ("streams.num.standby.replicas", "3"),  # above group.streams.max.standby.replicas
    ("streams.num.standby.replicas", "-1"),
    ("streams.initial.rebalance.delay.ms", "-1"),
    ("streams.session.timeout.ms", "ten"),
])
def test_an_out_of_bound_streams_override_is_refused_with_invalid_config(name: str, value: str) -> None:
    shard = _shard()
    res = shard.alter_group_configs(GROUP, {name: value}, False, 0)
    assert res.response.error_code == Errors.INVALID_CONFIG, res.response.error_message
    assert name in res.response.error_message
    assert not res.records and GROUP not in shard.group_configs


def test_the_bounds_are_the_brokers() -> None:
    shard = _shard(**{"group.streams.min.session.timeout.ms": 1000, "group.streams.max.standby.replicas": 3})
    assert _alter(shard, streams_session_timeout_ms="6000", streams_num_standby_replicas="3") == 0


def test_a_session_timeout_not_above_the_heartbeat_interval_is_refused() -> None:
    shard = _shard(**{"group.streams.min.session.timeout.ms": 1000})
    res = shard.alter_group_configs(GROUP, {"streams.session.timeout.ms": "5000"}, False, 0)
    assert res.response.error_code == Errors.INVALID_CONFIG
    assert "streams.session.timeout.ms must be greater than streams.heartbeat.interval.ms" in res.response.error_message


def test_describe_group_configs_shows_the_streams_settings_and_overrides() -> None:
    shard = _shard()
    assert _alter(shard, streams_num_standby_replicas="1") == 0
    entries = {e.name: e for e in shard.describe_group_configs([GROUP], 0).response[0].configs}
    for name in ("streams.session.timeout.ms", "streams.heartbeat.interval.ms", "streams.num.standby.replicas",
                 "streams.initial.rebalance.delay.ms"):
        assert name in entries
    assert (entries["streams.num.standby.replicas"].value, entries["streams.num.standby.replicas"].is_default) == (
        "1", False)
    assert entries["streams.session.timeout.ms"].is_default


@pytest.mark.parametrize("raw", [
    {"group.streams.session.timeout.ms": 1000},  # below group.streams.min.session.timeout.ms (45,000)
    {"group.streams.heartbeat.interval.ms": 20_000},  # above group.streams.max.heartbeat.interval.ms
    {"group.streams.num.standby.replicas": 3},  # above group.streams.max.standby.replicas (2)
    {"group.streams.min.session.timeout.ms": 1, "group.streams.session.timeout.ms": 5000},  # not above heartbeat
])
def test_the_broker_streams_configs_are_checked_at_start_up(raw: dict[str, int]) -> None:
    with pytest.raises(ConfigError):
        BrokerConfig.from_mapping(raw)


def test_altering_the_standby_replicas_of_a_running_group_bumps_its_epoch_on_the_next_heartbeat() -> None:
    """Kafka's StreamsGroupMetadata.LastAssignmentConfigs: a heartbeat that finds the group's assignment configs
    changed since its last epoch bump bumps it, so the new standbys are assigned without a membership change."""
    shard = _shard()
    assert _standbys(shard) == 0
    g = shard.streams.groups[GROUP]
    epoch = g.group_epoch
    assert g.last_assignment_configs == (("num.standby.replicas", "0"),)
    assert _alter(shard, streams_num_standby_replicas="1") == 0
    a = g.current["a"]
    _beat(shard, "a", a.member_epoch, 20, a.active)
    assert g.group_epoch == epoch + 1 and g.target_assignment_epoch == epoch + 1
    assert sum(len(m.standby) for m in g.target.values()) > 0
    _beat(shard, "a", g.current["a"].member_epoch, 30, g.current["a"].active)
    assert g.group_epoch == epoch + 1, "unchanged configs bump nothing"
