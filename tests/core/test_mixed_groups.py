"""Mixed groups (classic members in a consumer group) and online upgrade/downgrade, on the sans-I/O core with a
virtual clock: Kafka 4.x's classicGroupJoin/Sync/HeartbeatToConsumerGroup, KIP-1263's rules for mixed groups,
convertToConsumerGroup / convertToClassicGroup under group.consumer.migration.policy."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable
from typing import Any

import pytest

from groupcoord.assignors.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_version,
    encode_assignment,
    encode_subscription,
)
from groupcoord.assignors.registry import get_server_assignor
from groupcoord.coordinator.core.classic.group import ClassicGroup
from groupcoord.coordinator.core.classic.messages import JoinGroupResponse, SyncGroupResponse
from groupcoord.coordinator.core.classic.records import ClassicGroupState
from groupcoord.coordinator.core.config import BrokerConfig, ConfigError
from groupcoord.coordinator.core.consumer.group import ConsumerGroup, MemberState
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion, AssignorRun
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from tests.classic.context import REBALANCE_MS, ClassicContext
from tests.core.context import check_group_invariants, image_of, shard_state, tid

TopicPartition = tuple[str, int]
MIXED_CONFIG: dict[str, Any] = {
    "group.consumer.min.session.timeout.ms": 100,
    "group.consumer.session.timeout.ms": 45_000,
    "group.consumer.min.heartbeat.interval.ms": 10,
    "group.consumer.heartbeat.interval.ms": 5_000,
    "group.consumer.assignment.interval.ms": 0,
    "group.consumer.assignor.offload.enable": False,
    "group.initial.rebalance.delay.ms": 100,
    "group.min.session.timeout.ms": 100,
}


@dataclasses.dataclass
class Classic:
    """What a cooperative classic consumer keeps: its id, generation and the partitions it owns."""

    member_id: str
    generation: int = -1
    owned: set[TopicPartition] = dataclasses.field(default_factory=set)


class MixedContext(ClassicContext):
    def __init__(self, auto_complete_runs: bool = True, overrides: dict[str, Any] | None = None) -> None:
        super().__init__()
        raw = {**MIXED_CONFIG, **(overrides or {})}
        self.config = BrokerConfig.from_mapping(raw)
        self.image = image_of({"foo": 6})
        ids = itertools.count(1)
        self.shard = GroupCoordinatorShard(self.config, lambda: f"m{next(ids)}", self.image)
        self.pending_runs: list[AssignorRun] = []
        self.auto_complete_runs = auto_complete_runs

    def apply(self, result: Result[Any], token: int | None = None) -> Any:
        response = super().apply(result, token)
        self.pending_runs.extend(t for t in result.tasks if isinstance(t, AssignorRun))
        if self.auto_complete_runs:
            self.complete_runs()
        return response

    def complete_runs(self) -> None:
        runs, self.pending_runs = self.pending_runs, []
        for run in runs:
            assignment = get_server_assignor(run.assignor_name).assign(run.spec, run.topics, run.lag)
            self.apply(self.shard.on_assignment_complete(AssignorCompletion(run.group_id, run.run_id, assignment),
                                                         self.now))

    # --- classic members -------------------------------------------------------------------------------------
    def cjoin(self, c: Classic, topics: Iterable[str] = ("foo",), session_timeout_ms: int = 10_000,
              version: int = 3, protocols: tuple[str, ...] = ("range",)) -> JoinGroupResponse:
        metadata = encode_subscription(Subscription(tuple(topics), None, tuple(sorted(c.owned)), c.generation), version)
        response = self.join_answer(self.join(c.member_id, protocols=tuple((p, metadata) for p in protocols),
                                              session_timeout_ms=session_timeout_ms))
        if response.error_code is Errors.MEMBER_ID_REQUIRED:
            c.member_id = response.member_id
            return self.cjoin(c, topics, session_timeout_ms, version, protocols)
        if response.error_code is Errors.NONE:
            c.generation = response.generation_id
        return response

    def csync(self, c: Classic) -> SyncGroupResponse:
        response = self.sync_answer(self.sync(c.member_id, c.generation))
        if response.error_code is Errors.NONE:
            c.owned = set(decode_assignment(response.assignment).partitions)
        return response

    def rebalance(self, c: Classic, rounds: int = 4) -> None:
        """The classic consumer's loop: join and sync until a sync revokes nothing (KIP-429)."""
        for _ in range(rounds):
            before = set(c.owned)
            assert self.cjoin(c).error_code is Errors.NONE
            if self.csync(c).error_code is Errors.NONE and before <= c.owned:
                return
        raise AssertionError(f"{c.member_id} did not settle")

    def chb(self, c: Classic) -> Errors:
        return self.heartbeat(c.member_id, c.generation).error_code

    # --- consumer-protocol members ---------------------------------------------------------------------------
    def consumer(self, member_id: str = "", epoch: int = 0, **fields: Any) -> ConsumerGroupHeartbeatResponse:
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 5000)
            fields.setdefault("subscribed_topic_names", ("foo",))
            fields.setdefault("topic_partitions", {})
        request = ConsumerGroupHeartbeatRequest("grp", member_id, epoch, **fields)
        response = self.apply(self.shard.consumer_group_heartbeat(request, self.now))
        assert isinstance(response, ConsumerGroupHeartbeatResponse)
        return response

    def cack(self, member_id: str) -> ConsumerGroupHeartbeatResponse:
        m = self.cgroup().members[member_id]
        return self.consumer(member_id, m.member_epoch, topic_partitions=m.assigned_sets())

    def cgroup(self) -> ConsumerGroup:
        group = self.shard.groups["grp"]
        assert isinstance(group, ConsumerGroup)
        check_group_invariants(group)
        return group

    def classic_group_of(self, n: int, **fields: Any) -> list[Classic]:
        """A Stable classic group of `n` cooperative consumers; the leader gives foo's partitions round-robin."""
        members = [Classic("") for _ in range(n)]
        calls = []
        for c in members:
            first = self.join_answer(self.join("", protocols=(("range", encode_subscription(Subscription(("foo",)))),)))
            c.member_id = first.member_id
            calls.append(self.join(c.member_id, protocols=(("range", encode_subscription(Subscription(("foo",)))),)))
        while any(self.answer(call) is None for call in calls):
            self.advance(100)
        for c, call in zip(members, calls, strict=True):
            c.generation = self.join_answer(call).generation_id
        group = self.shard.groups["grp"]
        assert isinstance(group, ClassicGroup)
        parts = {c.member_id: [("foo", p) for p in range(6) if p % n == i] for i, c in enumerate(members)}
        user_data = fields.get("user_data")
        syncs = {c.member_id: self.sync(c.member_id, c.generation, assignments={
            mid: encode_assignment(Assignment(tuple(tps), user_data)) for mid, tps in parts.items()}
            if c.member_id == group.leader_id else None) for c in members}
        for c in members:
            c.owned = set(decode_assignment(self.sync_answer(syncs[c.member_id]).assignment).partitions)
        assert group.state is ClassicGroupState.STABLE
        return members


def owned_by_all(ctx: MixedContext, classics: Iterable[Classic], consumers: Iterable[str]) -> list[TopicPartition]:
    """What every member believes it owns (classic: its last SyncGroup; consumer: what the coordinator gave)."""
    out: list[TopicPartition] = []
    for c in classics:
        out.extend(c.owned)
    group = ctx.cgroup()
    for mid in consumers:
        m = group.members[mid]
        out.extend(("foo", p) for t, ps in m.assigned_partitions.items() for p in ps if t == tid("foo"))
    return out


def assert_replay_equal(ctx: MixedContext) -> None:
    replayed = ctx.fresh_replay()
    assert shard_state(replayed) == shard_state(ctx.shard)
    live, again = ctx.shard.groups["grp"], replayed.groups["grp"]
    assert isinstance(live, ConsumerGroup) and isinstance(again, ConsumerGroup)
    assert again.classic_members == live.classic_members


# --- classic members in a consumer group ---------------------------------------------------------------------
def test_a_classic_join_to_a_consumer_group_becomes_a_classic_member_assigned_by_the_server_assignor() -> None:
    ctx = MixedContext()
    a = ctx.consumer()
    assert a.error_code is Errors.NONE and len(ctx.cgroup().members[a.member_id].assigned_sets()[tid("foo")]) == 6
    b = Classic("")
    joined = ctx.cjoin(b, version=1)
    assert joined.error_code is Errors.NONE and (joined.leader, joined.protocol_type, joined.protocol_name) == (
        "", "consumer", "range")
    member = ctx.cgroup().members[b.member_id]
    assert b.member_id in ctx.cgroup().classic_members and member.subscribed_topic_names == ("foo",)
    assert joined.generation_id == member.member_epoch == ctx.cgroup().target_assignment_epoch
    assert member.state is MemberState.UNRELEASED_PARTITIONS  # the consumer member still holds its share
    synced = ctx.csync(b)
    assert synced.error_code is Errors.NONE and b.owned == set() and decode_version(synced.assignment) == 1
    ctx.cack(a.member_id)  # revokes
    ctx.cack(a.member_id)  # reports the revocation
    assert ctx.chb(b) is Errors.REBALANCE_IN_PROGRESS  # what it waited for was released: rejoin
    ctx.rebalance(b)
    target = ctx.cgroup().target_assignment[b.member_id][tid("foo")]
    assert b.owned == {("foo", p) for p in target} and len(b.owned) == 3
    assert ctx.chb(b) is Errors.NONE
    assert sorted(owned_by_all(ctx, [b], [a.member_id])) == [("foo", p) for p in range(6)]
    assert_replay_equal(ctx)


def test_a_classic_member_revokes_through_a_rejoin_and_its_sync_carries_the_assignment_without_them() -> None:
    ctx = MixedContext()
    a = ctx.consumer()
    b = Classic("")
    ctx.cjoin(b)
    ctx.csync(b)
    ctx.consumer(a.member_id, ctx.cgroup().members[a.member_id].member_epoch, topic_partitions={})
    ctx.rebalance(b)
    assert len(b.owned) == 3
    c = ctx.consumer()  # a third member: b must give one partition up
    epoch_before = b.generation
    assert ctx.chb(b) is Errors.REBALANCE_IN_PROGRESS
    assert ctx.cjoin(b).generation_id == epoch_before  # stays at its epoch until the revocation is acknowledged
    assert ctx.cgroup().members[b.member_id].state is MemberState.UNREVOKED_PARTITIONS
    synced = ctx.csync(b)  # below the target epoch, but it has partitions to revoke: no REBALANCE_IN_PROGRESS
    assert synced.error_code is Errors.NONE and len(b.owned) == 2
    assert ctx.cjoin(b).generation_id == ctx.cgroup().target_assignment_epoch > epoch_before
    assert ctx.csync(b).error_code is Errors.NONE
    for _ in range(3):
        ctx.cack(c.member_id)
        ctx.cack(a.member_id)
    owned = owned_by_all(ctx, [b], [a.member_id, c.member_id])
    assert len(owned) == len(set(owned)) == 6
    assert_replay_equal(ctx)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_an_eager_classic_member_of_any_subscription_version_is_answered_in_its_version(version: int) -> None:
    """An eager consumer (v0 carries no owned partitions) gives everything back before each JoinGroup."""
    ctx = MixedContext()
    a = ctx.consumer()
    b = Classic("")
    ctx.cjoin(b, version=version)
    synced = ctx.csync(b)
    assert decode_version(synced.assignment) == version
    for _ in range(2):
        ctx.cack(a.member_id)
    for _ in range(3):
        if ctx.chb(b) is Errors.REBALANCE_IN_PROGRESS:
            b.owned.clear()  # eager: revoke all, then join
            ctx.cjoin(b, version=version)
            ctx.csync(b)
    assert len(b.owned) == 3 and decode_version(ctx.sync_answer(ctx.sync(b.member_id, b.generation)).assignment) \
        == version
    owned = owned_by_all(ctx, [b], [a.member_id])
    assert len(owned) == len(set(owned)) == 6


def test_a_classic_member_waiting_for_partitions_is_told_to_rejoin_only_once_all_of_them_are_free() -> None:
    ctx = MixedContext()
    a = ctx.consumer()
    c = ctx.consumer()
    for _ in range(3):
        ctx.cack(a.member_id)
        ctx.cack(c.member_id)
    b = Classic("")
    ctx.cjoin(b)
    ctx.csync(b)
    waiting = ctx.cgroup().members[b.member_id]
    assert waiting.state is MemberState.UNRELEASED_PARTITIONS
    ctx.cack(a.member_id)
    ctx.cack(a.member_id)  # a released its share; c still holds one of b's partitions
    assert ctx.chb(b) is Errors.NONE
    ctx.cack(c.member_id)
    ctx.cack(c.member_id)
    assert ctx.chb(b) is Errors.REBALANCE_IN_PROGRESS
    ctx.rebalance(b)
    assert len(b.owned) == 2


def test_a_classic_members_session_timeout_is_its_join_groups() -> None:
    ctx = MixedContext()
    ctx.consumer()
    b = Classic("")
    ctx.cjoin(b, session_timeout_ms=3_000)
    ctx.csync(b)
    ctx.advance(2_900)
    assert ctx.chb(b) in (Errors.NONE, Errors.REBALANCE_IN_PROGRESS)  # re-arms the session
    ctx.advance(2_900)
    assert b.member_id in ctx.cgroup().members
    ctx.advance(200)
    assert b.member_id not in ctx.cgroup().members and b.member_id not in ctx.cgroup().classic_members
    assert_replay_equal(ctx)


def test_a_classic_member_that_joins_but_never_syncs_is_fenced_after_its_rebalance_timeout() -> None:
    ctx = MixedContext()
    ctx.consumer()
    b = Classic("")
    ctx.cjoin(b, session_timeout_ms=60_000)  # rebalance timeout 30 s
    ctx.advance(29_000)
    assert b.member_id in ctx.cgroup().members
    ctx.advance(1_000)
    assert b.member_id not in ctx.cgroup().members
    assert_replay_equal(ctx)


def test_a_classic_member_told_to_rejoin_that_only_heartbeats_is_fenced_after_its_rebalance_timeout() -> None:
    ctx = MixedContext()
    ctx.consumer()
    b = Classic("")
    ctx.cjoin(b, session_timeout_ms=10_000)
    ctx.csync(b)
    ctx.consumer()  # a new target: b must rejoin
    for _ in range(6):
        assert ctx.chb(b) is Errors.REBALANCE_IN_PROGRESS
        ctx.advance(5_000)
    ctx.advance(1_000)
    assert b.member_id not in ctx.cgroup().members
    assert_replay_equal(ctx)


def test_classic_requests_of_a_consumer_protocol_member_or_another_generation_are_refused() -> None:
    ctx = MixedContext()
    a = ctx.consumer()
    b = Classic("")
    ctx.cjoin(b)
    assert ctx.heartbeat(a.member_id, a.member_epoch).error_code is Errors.UNKNOWN_MEMBER_ID
    assert ctx.heartbeat(b.member_id, b.generation + 1).error_code is Errors.ILLEGAL_GENERATION
    assert ctx.sync_answer(ctx.sync(b.member_id, b.generation + 1)).error_code is Errors.ILLEGAL_GENERATION
    wrong = ctx.sync_answer(ctx.sync(b.member_id, b.generation, protocol_name="roundrobin"))
    assert wrong.error_code is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.consumer(b.member_id, b.generation, topic_partitions={}).error_code is Errors.UNKNOWN_MEMBER_ID
    other = Classic("")
    assert ctx.cjoin(other, protocols=("roundrobin",)).error_code is Errors.INCONSISTENT_GROUP_PROTOCOL


def test_a_classic_leave_group_removes_the_member_and_bumps_the_group_epoch() -> None:
    ctx = MixedContext()
    ctx.consumer()
    b = Classic("")
    ctx.cjoin(b)
    epoch = ctx.cgroup().group_epoch
    response = ctx.leave(b.member_id)
    assert response.members[0].error_code is Errors.NONE
    assert b.member_id not in ctx.cgroup().members and ctx.cgroup().group_epoch == epoch + 1
    assert ctx.leave(b.member_id).members[0].error_code is Errors.UNKNOWN_MEMBER_ID
    assert_replay_equal(ctx)


# --- KIP-1263 in mixed groups --------------------------------------------------------------------------------
def test_rebalance_in_progress_goes_only_below_the_target_epoch_and_only_consumer_heartbeats_run_batched_assignors(
) -> None:
    ctx = MixedContext(overrides={"group.consumer.assignment.interval.ms": 10_000})
    a = ctx.consumer()
    b = Classic("")
    ctx.cjoin(b, session_timeout_ms=30_000)  # interval not elapsed since a's computation: no new target
    group = ctx.cgroup()
    assert group.group_epoch > group.target_assignment_epoch
    assert ctx.csync(b).error_code is Errors.NONE  # at the target epoch: no REBALANCE_IN_PROGRESS
    assert ctx.chb(b) is Errors.NONE  # the group epoch is newer, the target is not
    ctx.advance(10_000)
    runs = ctx.shard.stats.assignor_runs_sync
    assert ctx.chb(b) is Errors.NONE  # a classic heartbeat never runs the assignor
    assert ctx.shard.stats.assignor_runs_sync == runs
    assert ctx.cgroup().group_epoch > ctx.cgroup().target_assignment_epoch
    ctx.cack(a.member_id)  # a consumer-protocol heartbeat does
    assert ctx.shard.stats.assignor_runs_sync == runs + 1
    assert ctx.cgroup().target_assignment_epoch == ctx.cgroup().group_epoch
    assert ctx.chb(b) is Errors.REBALANCE_IN_PROGRESS  # a newer target exists: rejoin
    assert_replay_equal(ctx)


def test_an_offloaded_run_completing_tells_classic_members_to_rejoin() -> None:
    ctx = MixedContext(auto_complete_runs=False, overrides={"group.consumer.assignor.offload.enable": True})
    a = ctx.consumer()
    ctx.complete_runs()
    ctx.cack(a.member_id)
    b = Classic("")
    ctx.cjoin(b)  # hands a run to the executor: no new target yet
    assert ctx.pending_runs and ctx.csync(b).error_code is Errors.NONE
    assert ctx.chb(b) is Errors.NONE
    ctx.complete_runs()
    assert ctx.chb(b) is Errors.REBALANCE_IN_PROGRESS


def test_a_sync_below_the_target_epoch_without_partitions_to_revoke_is_rebalance_in_progress() -> None:
    ctx = MixedContext(auto_complete_runs=False, overrides={"group.consumer.assignor.offload.enable": True})
    a = ctx.consumer()
    ctx.complete_runs()
    b = Classic("")
    ctx.cjoin(b)
    ctx.complete_runs()  # the new target lands between b's JoinGroup and its SyncGroup
    assert ctx.cgroup().members[b.member_id].member_epoch < ctx.cgroup().target_assignment_epoch
    assert ctx.csync(b).error_code is Errors.REBALANCE_IN_PROGRESS
    del a


# --- online upgrade ------------------------------------------------------------------------------------------
def test_the_first_consumer_member_upgrades_a_classic_group_keeping_its_members_assignments() -> None:
    ctx = MixedContext()
    m1, m2 = ctx.classic_group_of(2)
    generation = m1.generation
    new = ctx.consumer()
    assert new.error_code is Errors.NONE
    group = ctx.cgroup()
    assert set(group.classic_members) == {m1.member_id, m2.member_id}
    for c in (m1, m2):
        m = group.members[c.member_id]
        assert m.member_epoch == generation and m.state is MemberState.STABLE
        assert {("foo", p) for p in m.assigned_sets()[tid("foo")]} == c.owned
    assert group.group_epoch == max(generation + 1, 2) and ctx.shard.stats.groups_upgraded == 1
    assert new.assignment == {}  # everything is still owned by the classic members
    for c in (m1, m2):
        assert ctx.chb(c) is Errors.REBALANCE_IN_PROGRESS
        ctx.rebalance(c)
    for _ in range(2):
        ctx.cack(new.member_id)
    owned = owned_by_all(ctx, [m1, m2], [new.member_id])
    assert len(owned) == len(set(owned)) == 6 and ctx.cgroup().members[new.member_id].assigned_sets()
    assert_replay_equal(ctx)


@pytest.mark.parametrize("policy", ["DISABLED", "downgrade"])
def test_the_migration_policy_can_forbid_the_upgrade(policy: str) -> None:
    ctx = MixedContext(overrides={"group.consumer.migration.policy": policy})
    ctx.classic_group_of(2)
    assert ctx.consumer().error_code is Errors.GROUP_ID_NOT_FOUND
    assert isinstance(ctx.shard.groups["grp"], ClassicGroup)


def test_a_classic_group_whose_assignor_keeps_user_data_refuses_to_upgrade() -> None:
    ctx = MixedContext()
    ctx.classic_group_of(2, user_data=b"custom-state")
    response = ctx.consumer()
    assert response.error_code is Errors.GROUP_ID_NOT_FOUND and "custom assignor" in response.error_message
    assert isinstance(ctx.shard.groups["grp"], ClassicGroup)


def test_a_rebalancing_classic_group_is_upgraded_only_once_its_members_have_synced() -> None:
    ctx = MixedContext()
    m1, _ = ctx.classic_group_of(2)
    ctx.join(m1.member_id, protocols=(("range", encode_subscription(Subscription(("foo",)))),))  # rebalancing
    assert ctx.consumer().error_code is Errors.GROUP_ID_NOT_FOUND
    assert isinstance(ctx.shard.groups["grp"], ClassicGroup)


def test_the_policy_is_case_insensitive_and_checked() -> None:
    assert BrokerConfig.from_mapping({"group.consumer.migration.policy": "Upgrade"})
    with pytest.raises(ConfigError):
        BrokerConfig.from_mapping({"group.consumer.migration.policy": "sideways"})


# --- online downgrade ----------------------------------------------------------------------------------------
def upgraded(ctx: MixedContext) -> tuple[list[Classic], str]:
    classics = ctx.classic_group_of(2)
    new = ctx.consumer()
    for c in classics:
        ctx.rebalance(c)
    for _ in range(2):
        ctx.cack(new.member_id)
    return classics, new.member_id


def test_the_last_consumer_member_leaving_converts_the_group_back_to_classic() -> None:
    ctx = MixedContext()
    (m1, m2), consumer = upgraded(ctx)
    epoch = ctx.cgroup().group_epoch
    ctx.consumer(consumer, -1)
    group = ctx.shard.groups["grp"]
    assert isinstance(group, ClassicGroup) and ctx.shard.stats.groups_downgraded == 1
    assert set(group.members) == {m1.member_id, m2.member_id} and group.generation == epoch
    assert group.state is ClassicGroupState.JOINING and group.protocol_name == "range"
    for c in (m1, m2):
        assert ctx.chb(c) is Errors.REBALANCE_IN_PROGRESS
    assert all(k[0] != "session" for k in ctx.timers)  # the consumer group's timers are gone
    replayed = ctx.fresh_replay().groups["grp"]
    assert isinstance(replayed, ClassicGroup) and replayed.persisted == group.persisted
    calls = [ctx.join(c.member_id, protocols=(("range", encode_subscription(
        Subscription(("foo",), None, tuple(sorted(c.owned)), c.generation))),)) for c in (m1, m2)]
    assert all(ctx.join_answer(call).error_code is Errors.NONE for call in calls)
    assert group.state is ClassicGroupState.AWAITING_SYNC


def test_a_downgraded_group_completes_its_join_at_the_rebalance_timeout_without_a_member_that_only_heartbeats(
) -> None:
    """The downgrade arms the classic group's join timer inside a consumer heartbeat: the shard's stale-timer
    check must know its deadline, or the join (and every member's JoinGroup) would wait for ever."""
    ctx = MixedContext()
    (m1, m2), consumer = upgraded(ctx)
    ctx.consumer(consumer, -1)
    call = ctx.join(m1.member_id, protocols=(("range", encode_subscription(
        Subscription(("foo",), None, tuple(sorted(m1.owned)), m1.generation))),))
    for _ in range(10):  # m2 keeps its session alive but never rejoins
        ctx.advance(REBALANCE_MS // 8)
        ctx.chb(m2)
    response = ctx.join_answer(call)
    assert response.error_code is Errors.NONE and [m.member_id for m in response.members] == [m1.member_id]


def test_a_fenced_last_consumer_member_converts_the_group_back_to_classic() -> None:
    ctx = MixedContext()
    upgraded(ctx)
    for _ in range(5):
        ctx.advance(8_000)
        for c in ctx.cgroup().classic_members:
            ctx.heartbeat(c, ctx.cgroup().members[c].member_epoch)
    ctx.advance(40_000)
    assert isinstance(ctx.shard.groups["grp"], ClassicGroup)


def test_under_the_upgrade_policy_the_group_stays_a_consumer_group() -> None:
    ctx = MixedContext(overrides={"group.consumer.migration.policy": "upgrade"})
    (m1, m2), consumer = upgraded(ctx)
    ctx.consumer(consumer, -1)
    group = ctx.cgroup()
    assert set(group.members) == {m1.member_id, m2.member_id}
    assert_replay_equal(ctx)


# --- randomized: classic and consumer members interleaved ----------------------------------------------------
def _classic_step(ctx: MixedContext, c: Classic, phase: dict[str, str]) -> None:
    """One step of a cooperative classic consumer: heartbeat (rejoin when told), or join, or sync."""
    state = phase[c.member_id]
    if state == "stable":
        code = ctx.chb(c)
        if code is Errors.REBALANCE_IN_PROGRESS:
            phase[c.member_id] = "rejoin"
        elif code is not Errors.NONE:
            c.owned.clear()  # lost: the client drops everything and rejoins
            c.generation = -1
            phase[c.member_id] = "rejoin"
    elif state == "rejoin":
        code = ctx.cjoin(c).error_code
        phase[c.member_id] = "sync" if code is Errors.NONE else "rejoin"
        if code is not Errors.NONE:
            c.owned.clear()
            c.generation = -1
    else:
        before = set(c.owned)
        response = ctx.csync(c)
        if response.error_code is not Errors.NONE:
            phase[c.member_id] = "rejoin"
        else:
            phase[c.member_id] = "rejoin" if not before <= c.owned else "stable"


@pytest.mark.parametrize("seed", range(12))
def test_random_mixed_membership_never_lets_two_members_own_a_partition_and_replays_equal(seed: int) -> None:
    import random

    rng = random.Random(seed)
    offload = seed % 2 == 1
    ctx = MixedContext(auto_complete_runs=False, overrides={"group.consumer.migration.policy": "upgrade",
                          "group.consumer.assignor.offload.enable": offload,
                          "group.consumer.assignment.interval.ms": rng.choice([0, 500])})
    consumers = [ctx.consumer().member_id]
    classics: list[Classic] = []
    phase: dict[str, str] = {}
    for _ in range(250):
        roll = rng.random()
        if roll < 0.08 and len(classics) < 4:
            c = Classic("")
            if ctx.cjoin(c).error_code is Errors.NONE:
                classics.append(c)
                phase[c.member_id] = "sync"
        elif roll < 0.14 and len(consumers) < 4:
            consumers.append(ctx.consumer().member_id)
        elif roll < 0.18 and classics:
            c = classics.pop(rng.randrange(len(classics)))
            c.owned.clear()  # close(): revoke, then LeaveGroup
            ctx.leave(c.member_id)
        elif roll < 0.21 and len(consumers) > 1:
            mid = consumers.pop(rng.randrange(len(consumers)))
            ctx.consumer(mid, -1)
        elif roll < 0.60 and classics:
            _classic_step(ctx, rng.choice(classics), phase)
        elif roll < 0.95:
            ctx.cack(rng.choice(consumers))
        else:
            ctx.advance(rng.choice([100, 600]))
        if offload and rng.random() < 0.3:
            ctx.complete_runs()
        owned = owned_by_all(ctx, classics, consumers)
        group = ctx.cgroup()
        for mid in consumers:  # a consumer member still owns what it has yet to revoke
            owned.extend(("foo", p) for t, ps in group.members[mid].partitions_pending_revocation.items() for p in ps)
        assert len(owned) == len(set(owned)), f"step owned twice: {sorted(owned)}"
    assert_replay_equal(ctx)
