"""A scenario driver for the sans-I/O core, like Kafka's GroupMetadataManagerTestContext.

It plays the runtime's part with a virtual clock: keeps the armed timers and fires them when the clock
passes their deadline, runs offloaded assignor tasks (at once, or when the test says), and keeps every
record emitted so a test can replay them into a fresh shard and compare.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from assignors.registry import get_server_assignor
from coordinator.core.config import BrokerConfig
from coordinator.core.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from coordinator.core.metadata import MetadataImage, TopicMetadata, topic_id_for_name
from coordinator.core.results import CancelTimer, Result, ScheduleTimer, TimerKey
from coordinator.core.shard import GroupCoordinatorShard
from coordinator.core.target_assignment import AssignorCompletion, AssignorRun

FAST_CONFIG: dict[str, Any] = {
    "group.consumer.min.session.timeout.ms": 100,
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.min.heartbeat.interval.ms": 10,
    "group.consumer.heartbeat.interval.ms": 5000,
    "group.consumer.assignment.interval.ms": 0,
    "group.consumer.assignor.offload.enable": False,
}


def image_of(topics: Mapping[str, int]) -> MetadataImage:
    return MetadataImage.of(TopicMetadata(topic_id_for_name(n), n, c) for n, c in topics.items())


class CoreContext:
    def __init__(self, topics: Mapping[str, int] | None = None, *, auto_complete_runs: bool = True,
                 **config: Any) -> None:
        raw = dict(FAST_CONFIG)
        raw.update({k.replace("_", "."): v for k, v in config.items()})
        self.config = BrokerConfig.from_mapping(raw)
        self.image = image_of(topics if topics is not None else {"foo": 6, "bar": 3})
        ids = itertools.count(1)
        self.shard = GroupCoordinatorShard(self.config, lambda: f"gen-{next(ids)}", self.image)
        self.now = 0
        self.timers: dict[TimerKey, int] = {}
        self.pending_runs: list[AssignorRun] = []
        self.records: list[Any] = []
        self.auto_complete_runs = auto_complete_runs

    # --- plumbing ----------------------------------------------------------------------------------------
    def apply(self, result: Result[Any]) -> Any:
        self.records.extend(result.records)
        for t in result.timers:
            if isinstance(t, ScheduleTimer):
                self.timers[t.key] = t.deadline_ms
            elif isinstance(t, CancelTimer):
                self.timers.pop(t.key, None)
        self.pending_runs.extend(result.tasks)
        if self.auto_complete_runs and result.tasks:
            self.complete_runs()
        return result.response

    def complete_runs(self) -> None:
        runs, self.pending_runs = self.pending_runs, []
        for run in runs:
            assignment = get_server_assignor(run.assignor_name).assign(run.spec, run.topics, run.lag)
            self.apply(self.shard.on_assignment_complete(
                AssignorCompletion(run.group_id, run.run_id, assignment), self.now))

    def advance(self, ms: int) -> None:
        """Move the virtual clock, firing due timers in deadline order."""
        end = self.now + ms
        while True:
            due = sorted((d, k) for k, d in self.timers.items() if d <= end)
            if not due:
                break
            deadline, key = due[0]
            del self.timers[key]
            self.now = max(self.now, deadline)
            self.apply(self.shard.on_timer(key, self.now))
        self.now = end

    def tid(self, topic: str) -> str:
        return topic_id_for_name(topic)

    def tps(self, **topics: Iterable[int]) -> dict[str, frozenset[int]]:
        return {self.tid(t): frozenset(ps) for t, ps in topics.items()}

    def set_metadata(self, topics: Mapping[str, int]) -> None:
        self.image = image_of(topics)
        self.apply(self.shard.on_metadata_update(self.image, self.now))

    # --- requests ----------------------------------------------------------------------------------------
    def heartbeat(self, group_id: str = "grp", member_id: str = "", member_epoch: int = 0,
                  **fields: Any) -> ConsumerGroupHeartbeatResponse:
        if member_epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 5000)
            if "subscribed_topic_regex" not in fields:
                fields.setdefault("subscribed_topic_names", ("foo", "bar"))
            fields.setdefault("topic_partitions", {})
        req = ConsumerGroupHeartbeatRequest(group_id=group_id, member_id=member_id, member_epoch=member_epoch,
                                            **fields)
        return self.apply(self.shard.consumer_group_heartbeat(req, self.now))  # type: ignore[no-any-return]

    def join(self, member_id: str, group_id: str = "grp", **fields: Any) -> ConsumerGroupHeartbeatResponse:
        return self.heartbeat(group_id, member_id, 0, **fields)

    def group(self, group_id: str = "grp") -> Any:
        return self.shard.groups[group_id]

    def fresh_replay(self) -> GroupCoordinatorShard:
        """A new shard with every record replayed: it must equal the live one."""
        shard = GroupCoordinatorShard(self.config, lambda: "unused", self.image)
        for r in self.records:
            shard.replay(r)
        return shard
