"""A scenario driver for the sans-I/O core, like Kafka's GroupMetadataManagerTestContext.

It plays the runtime's part with a virtual clock: keeps the armed timers and fires them when the clock
passes their deadline, runs offloaded assignor tasks (at once, or when the test says), and keeps every
record emitted so a test can replay them into a fresh shard and compare.

The clock starts at `START_MS`, not 0: KIP-1263 stores "when the last assignment finished" with 0 meaning
"unknown", so a computation at virtual time 0 would look like no computation at all.
"""

from __future__ import annotations

import dataclasses
import itertools
import pickle
from collections.abc import Iterable, Mapping
from typing import Any

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.consumer.group import ConsumerGroup, ConsumerGroupMember, MemberState
from groupcoord.coordinator.core.consumer.topic_regex import RegexResolution
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from groupcoord.coordinator.core.metadata import MetadataImage, TopicMetadata, topic_id_for_name
from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion, AssignorRun
from groupcoord.coordinator.core.results import Result, TimerKey
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.runtime.executor import compact_run, load_outcome, run_sliced
from groupcoord.coordinator.runtime.sliced_run import slice_run
from tests.virtual_clock import VirtualClock


def as_in_a_worker_process(run: AssignorRun) -> Any:
    """The run's assignment as the process executor hands it back: the run pickled in slices as it crosses to
    a worker, run there (`run_sliced`: only the changed members come back when it can), the outcome pickled
    back and loaded over the run's own snapshot. Assignor errors raise, as the direct call did."""
    outcome = pickle.loads(pickle.dumps(run_sliced(pickle.loads(pickle.dumps(slice_run(compact_run(run)))))))
    if outcome.error is not None:
        raise AssertionError(outcome.error)
    return load_outcome(outcome, run).assignment

START_MS = 1_000_000

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


def tid(topic: str) -> str:
    return topic_id_for_name(topic)


class CoreContext(VirtualClock):
    def __init__(self, topics: Mapping[str, int] | None = None, *, auto_complete_runs: bool = True,
                 auto_resolve_regexes: bool = True,
                 overrides: Mapping[str, Any] | None = None, **config: Any) -> None:
        raw = dict(FAST_CONFIG)
        raw.update({k.replace("_", "."): v for k, v in config.items()})
        raw.update(overrides or {})
        self.config = BrokerConfig.from_mapping(raw)
        self.image = image_of(topics if topics is not None else {"foo": 6, "bar": 3})
        ids = itertools.count(1)
        self.shard = GroupCoordinatorShard(self.config, lambda: f"gen-{next(ids)}", self.image)
        self.now = START_MS
        self.timers: dict[TimerKey, int] = {}
        self.pending_runs: list[AssignorRun] = []
        self.records: list[Any] = []
        self.auto_complete_runs = auto_complete_runs
        self.pending_regex: list[RegexResolution] = []
        self.auto_resolve_regexes = auto_resolve_regexes

    # --- plumbing ----------------------------------------------------------------------------------------
    def apply(self, result: Result[Any]) -> Any:
        self.record(result)
        self.pending_runs.extend(t for t in result.tasks if isinstance(t, AssignorRun))
        self.pending_regex.extend(t for t in result.tasks if isinstance(t, RegexResolution))
        if self.auto_complete_runs and self.pending_runs:
            self.complete_runs()
        if self.auto_resolve_regexes and self.pending_regex:
            self.resolve_regexes()
        return result.response

    def resolve_regexes(self) -> int:
        """Run the pending background regex resolutions now (as the runtime's executor does); how many ran."""
        tasks, self.pending_regex = self.pending_regex, []
        for task in tasks:
            self.apply(self.shard.on_regex_resolution_complete(task.run(), self.now))
        return len(tasks)

    def complete_runs(self, group_id: str | None = None) -> int:
        """Finish the pending offloaded runs (of one group, or all) now; returns how many finished."""
        runs = [r for r in self.pending_runs if group_id is None or r.group_id == group_id]
        self.pending_runs = [r for r in self.pending_runs if group_id is not None and r.group_id != group_id]
        for run in runs:
            self.apply(self.shard.on_assignment_complete(
                AssignorCompletion(run.group_id, run.run_id, as_in_a_worker_process(run)), self.now))
        return len(runs)

    def complete_run(self, run_id: int, fail: bool = False) -> None:
        """Finish one pending offloaded run now (or report that the assignor failed)."""
        run = next(r for r in self.pending_runs if r.run_id == run_id)
        self.pending_runs = [r for r in self.pending_runs if r.run_id != run_id]
        if fail:
            completion = AssignorCompletion(run.group_id, run.run_id, None, "assignor failed")
        else:
            completion = AssignorCompletion(run.group_id, run.run_id, as_in_a_worker_process(run))
        self.apply(self.shard.on_assignment_complete(completion, self.now))

    def tid(self, topic: str) -> str:
        return topic_id_for_name(topic)

    def tps(self, **topics: Iterable[int]) -> dict[str, frozenset[int]]:
        return {self.tid(t): frozenset(ps) for t, ps in topics.items()}

    def set_metadata(self, topics: Mapping[str, int]) -> None:
        self.image = image_of(topics)
        self.apply(self.shard.on_metadata_update(self.image, self.now))

    # --- requests ----------------------------------------------------------------------------------------
    def request(self, group_id: str = "grp", member_id: str = "", member_epoch: int = 0,
                **fields: Any) -> ConsumerGroupHeartbeatRequest:
        """A heartbeat request; joins (epoch 0) get the fields a join must carry unless given."""
        if member_epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 5000)
            if "subscribed_topic_regex" not in fields:
                fields.setdefault("subscribed_topic_names", ("foo", "bar"))
            fields.setdefault("topic_partitions", {})
        return ConsumerGroupHeartbeatRequest(group_id=group_id, member_id=member_id, member_epoch=member_epoch,
                                             **fields)

    def send(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        return self.apply(self.shard.consumer_group_heartbeat(request, self.now))  # type: ignore[no-any-return]

    def heartbeat(self, group_id: str = "grp", member_id: str = "", member_epoch: int = 0,
                  **fields: Any) -> ConsumerGroupHeartbeatResponse:
        return self.send(self.request(group_id, member_id, member_epoch, **fields))

    def join(self, member_id: str, group_id: str = "grp", **fields: Any) -> ConsumerGroupHeartbeatResponse:
        return self.heartbeat(group_id, member_id, 0, **fields)

    def group(self, group_id: str = "grp") -> ConsumerGroup:
        group = self.shard.groups[group_id]
        assert isinstance(group, ConsumerGroup)
        return group

    def member(self, member_id: str, group_id: str = "grp") -> ConsumerGroupMember:
        return self.group(group_id).members[member_id]

    def ack(self, member_id: str, group_id: str = "grp", **fields: Any) -> ConsumerGroupHeartbeatResponse:
        """Heartbeat at the member's current epoch, reporting as owned exactly what the coordinator says it
        may own now (what a prompt client holds after applying the last response)."""
        m = self.member(member_id, group_id)
        fields.setdefault("topic_partitions", m.assigned_sets())
        return self.heartbeat(group_id, member_id, m.member_epoch, **fields)

    def stabilise(self, group_id: str = "grp", rounds: int = 10) -> None:
        """Prompt clients: every member acks its assignment until the group is STABLE."""
        for _ in range(rounds):
            group = self.group(group_id)
            if group.state().value == "STABLE":
                return
            for mid in sorted(group.members):
                if group.members[mid].member_epoch >= 0:
                    self.ack(mid, group_id)
        raise AssertionError(f"group {group_id} did not stabilise: {self.group(group_id).state()}")

    def fresh_replay(self) -> GroupCoordinatorShard:
        """A new shard with every record replayed: it must equal the live one."""
        shard = GroupCoordinatorShard(self.config, lambda: "unused", self.image)
        for r in self.records:
            shard.replay(r)
        return shard


# --- state comparison and invariants -------------------------------------------------------------------
def _norm(partitions: Mapping[str, Iterable[int]]) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in partitions.items() if ps}


def shard_state(shard: GroupCoordinatorShard) -> dict[str, Any]:
    """Everything the records persist, in a comparable form. Leaves out what is deliberately not persisted:
    the in-flight offloaded run (a failover runs the assignor again) and caches."""
    groups: dict[str, Any] = {}
    for gid, group in shard.groups.items():
        assert isinstance(group, ConsumerGroup)
        members = {}
        for mid, m in group.members.items():
            d = dataclasses.asdict(m)
            d["assigned_partitions"] = {t: dict(ps) for t, ps in m.assigned_partitions.items() if ps}
            d["partitions_pending_revocation"] = _norm(m.partitions_pending_revocation)
            members[mid] = d
        groups[gid] = {
            "group_epoch": group.group_epoch,
            "metadata_hash": group.metadata_hash,
            "members": members,
            "static_members": dict(group.static_members),
            "target_assignment": {mid: _norm(p) for mid, p in group.target_assignment.items()},
            "target_assignment_epoch": group.target_assignment_epoch,
            "assignment_timestamp_ms": group.assignment_timestamp_ms,
            "partition_owner": dict(group.partition_owner),
            "resolved_regexes": dict(group.resolved_regexes),
            "state": group.state(),
        }
    offsets = {gid: dict(shard.offsets.committed(gid)) for gid in shard.offsets.group_ids()}
    return {"groups": groups, "offsets": offsets, "configs": dict(shard.group_configs),
            "empty_since": dict(shard.empty_since)}


def check_group_invariants(group: ConsumerGroup) -> None:
    """The coordinator's own bookkeeping: ownership index, single ownership, epoch order."""
    expected: dict[tuple[str, int], str] = {}
    for m in group.members.values():
        owned = [(t, p) for t, ps in m.assigned_partitions.items() for p in ps]
        owned += [(t, p) for t, ps in m.partitions_pending_revocation.items() for p in ps]
        for tp in owned:
            assert tp not in expected, f"{tp} held by both {expected[tp]} and {m.member_id}"
            expected[tp] = m.member_id
    assert group.partition_owner == expected, "partition_owner disagrees with members' assigned+pending"
    target_epoch = group.effective_target_epoch
    assert target_epoch <= group.group_epoch or not group.members
    for m in group.members.values():
        if m.member_epoch >= 0:
            assert m.member_epoch <= target_epoch, (m.member_id, m.member_epoch, target_epoch)
        if m.state is MemberState.UNREVOKED_PARTITIONS:
            assert any(m.partitions_pending_revocation.values())
        else:
            assert not any(m.partitions_pending_revocation.values())
