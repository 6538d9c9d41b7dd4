"""A small context for streams group core tests (like Kafka's GroupMetadataManagerTestContext): members
heartbeat, the virtual clock advances, armed timers fire, offloaded assignor runs complete on demand."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from groupcoord.coordinator.core.config import BrokerConfig, GroupConfigStore
from groupcoord.coordinator.core.metadata import MetadataImage, TopicMetadata, topic_id_for_name
from groupcoord.coordinator.core.modern.group import run_effect_replayers
from groupcoord.coordinator.core.results import CancelTimer, Result, ScheduleTimer
from groupcoord.coordinator.core.streams.config import StreamsConfigs
from groupcoord.coordinator.core.streams.group import (
    StreamsAssignorRun,
    StreamsGroups,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResponse,
    apply_record,
)
from groupcoord.coordinator.core.streams.handlers import EFFECT_TYPES
from groupcoord.coordinator.core.streams.messages import CreateInternalTopics
from groupcoord.coordinator.core.streams.records import NO_TASKS, Tasks
from groupcoord.coordinator.core.streams.topology import StreamsTopology, Subtopology, TopicInfo
from tests.purity import state_of

GROUP = "app"


def image(**topics: int) -> MetadataImage:
    return MetadataImage.of(TopicMetadata(topic_id_for_name(n), n, p) for n, p in topics.items())


def word_count(epoch: int = 1) -> StreamsTopology:
    """Two subtopologies: split words and repartition by word; count words in a changelogged store."""
    return StreamsTopology(epoch, (
        Subtopology("0", source_topics=("lines",), repartition_sink_topics=("app-words-repartition",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("app-words-repartition", 4),),
                    state_changelog_topics=(TopicInfo("app-counts-changelog"),)),
    ))


READY = {"lines": 4, "app-words-repartition": 4, "app-counts-changelog": 4}


CLIENT_SIDE = ("max_warmup_replicas", "acceptable_recovery_lag", "task_offset_interval_ms")


@dataclass(frozen=True)
class StreamsSettings:
    """A test's broker settings for streams groups, by field (`group.streams.<field>`), with the session and
    heartbeat bounds opened so a test may pick short ones; Kafka Streams' client-side values beside them."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2_147_483_647
    num_standby_replicas: int = 0
    initial_rebalance_delay_ms: int = 3_000
    assignment_interval_ms: int = 1_000
    assignor_offload_enable: bool = True
    rack_aware_assignment_tags: tuple[str, ...] = ()
    max_warmup_replicas: int = 2
    acceptable_recovery_lag: int = 10_000
    task_offset_interval_ms: int = 60_000

    def configs(self) -> StreamsConfigs:
        broker = {"group.streams.min.session.timeout.ms": 1, "group.streams.min.heartbeat.interval.ms": 1}
        for name, value in asdict(self).items():
            if name not in CLIENT_SIDE:
                broker["group.streams." + name.replace("_", ".")] = list(value) if isinstance(value, tuple) else value
        return StreamsConfigs(GroupConfigStore(BrokerConfig.from_mapping(broker)),
                              **{n: getattr(self, n) for n in CLIENT_SIDE})


@dataclass
class Ctx:
    config: StreamsSettings = field(default_factory=StreamsSettings)
    topics: dict[str, int] = field(default_factory=lambda: dict(READY))
    now: int = 0
    log: list[Any] = field(default_factory=list)
    timers: dict[tuple[str, ...], int] = field(default_factory=dict)
    pending: list[StreamsAssignorRun] = field(default_factory=list)
    creates: list[CreateInternalTopics] = field(default_factory=list)  # topic creation tasks, in order

    def __post_init__(self) -> None:
        self.sg = StreamsGroups(self.config.configs(), image(**self.topics))
        self._effects: dict[type, Callable[[Any], None]] = dict(run_effect_replayers(self.sg.groups))
        self._effects.update(dict.fromkeys(EFFECT_TYPES, self.sg.apply_effect))
        self._state_after: Any = None  # the groups' state after the last result was applied

    def set_group_config(self, configs: dict[str, str | None]) -> None:
        """AlterGroupConfigs for GROUP (CoordinatorError when invalid); the next heartbeat reads it."""
        store = self.sg.configs.source
        assert isinstance(store, GroupConfigStore)
        store.alter(GROUP, configs)

    def _take(self, res: Result[Any]) -> None:
        """Apply a result as `GroupCoordinatorShard.apply` does (its records through the replay, then its volatile
        effects), checking first that the operation's handler changed nothing (tests/purity.py)."""
        if self._state_after is not None:
            assert state_of(self.sg) == self._state_after, "a streams handler changed the groups' state"
        for rec in res.records:
            self.sg.replay(rec)
        for effect in res.memory:
            self._effects[type(effect)](effect)
        self._state_after = state_of(self.sg)
        self.log.extend(res.records)
        for t in res.timers:
            if isinstance(t, ScheduleTimer):
                self.timers[t.key] = t.deadline_ms
            elif isinstance(t, CancelTimer):
                self.timers.pop(t.key, None)
        for task in res.tasks:
            (self.creates if isinstance(task, CreateInternalTopics) else self.pending).append(task)

    def join(self, member: str, process: str | None = None, topology: StreamsTopology | None = None,
             **kw: Any) -> StreamsHeartbeatResponse:
        return self.hb(member, 0, topology=topology or word_count(), process_id=process or f"p-{member}",
                       rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 10_000),
                       active_tasks=NO_TASKS, standby_tasks=NO_TASKS, warmup_tasks=NO_TASKS, **kw)

    def hb(self, member: str, epoch: int, **kw: Any) -> StreamsHeartbeatResponse:
        res = self.sg.heartbeat(StreamsHeartbeatRequest(GROUP, member, epoch, **kw), self.now)
        self._take(res)
        return res.response

    def owned(self, member: str, epoch: int, active: Tasks, **kw: Any) -> StreamsHeartbeatResponse:
        return self.hb(member, epoch, active_tasks=active, standby_tasks=NO_TASKS, warmup_tasks=NO_TASKS, **kw)

    def advance(self, ms: int) -> None:
        """Move the clock, firing every timer that comes due, in deadline order."""
        end = self.now + ms
        while True:
            due = sorted((d, k) for k, d in self.timers.items() if d <= end)
            if not due:
                break
            d, k = due[0]
            self.now = max(self.now, d)
            del self.timers[k]
            self._take(self.sg.fire_timer(k, self.now))
        self.now = end

    def complete_runs(self) -> int:
        n = 0
        while self.pending:
            run = self.pending.pop(0)
            self._take(self.sg.complete_assignor(run.run(), self.now))
            n += 1
        return n

    def state(self) -> str:
        return self.sg.state(GROUP).value

    def replayed(self) -> dict[str, Any]:
        groups: dict[str, Any] = {}
        for rec in self.log:
            apply_record(groups, rec)
        return {g: v.persisted() for g, v in groups.items()}

    def live(self) -> dict[str, Any]:
        return {g: v.persisted() for g, v in self.sg.groups.items()}


def tasks(*pairs: tuple[str, int]) -> Tasks:
    return frozenset(pairs)
