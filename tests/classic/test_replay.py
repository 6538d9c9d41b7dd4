"""Records are the truth: replaying a classic group's records rebuilds it, in Initialize until the load is over;
after a failover the seed's recovery cases play out (members re-sync, or a JoinGroup aborts the sync)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.core.classic.group import ClassicGroup
from groupcoord.coordinator.core.classic.messages import JoinGroupRequest, SyncGroupRequest
from groupcoord.coordinator.core.classic.records import ClassicGroupState
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import CommitPartition, OffsetCommitRequest
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.runtime import record_codec
from groupcoord.coordinator.runtime.service_base import LEADER_ERROR_METADATA_KEY
from tests.classic.context import INITIAL_DELAY_MS, SESSION_MS, ClassicContext, persisted_view


def test_replaying_the_records_rebuilds_a_stable_group() -> None:
    ctx = ClassicContext()
    ctx.stable_group(3, protocols=(("range", b"r"), ("roundrobin", b"rr")))
    assert persisted_view(ctx.fresh_replay()) == persisted_view(ctx.shard)


def test_replaying_the_records_rebuilds_a_group_awaiting_sync_and_a_down_group() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    ctx.rejoin_all([a, b], protocols=(("range", b"v2"),))
    ids = ctx.stable_group(1, group_id="other")
    ctx.leave(*ids, group_id="other")
    assert persisted_view(ctx.fresh_replay()) == persisted_view(ctx.shard)
    assert ctx.fresh_replay().groups["other"].state is ClassicGroupState.DOWN


def test_a_snapshot_of_a_joining_group_is_its_last_persisted_generation() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    before = persisted_view(ctx.shard)
    ctx.join(a)
    assert ctx.state() is ClassicGroupState.JOINING
    assert persisted_view(ctx.snapshot_replay()) == before


def test_a_replayed_group_is_initialize_and_answers_coordinator_load_in_progress_until_loaded() -> None:
    ctx = ClassicContext()
    a, _ = ctx.stable_group(2)
    shard = GroupCoordinatorShard(ctx.config, lambda: "new", ctx.image)
    for r in ctx.records:
        shard.replay(r)
    group = shard.groups["grp"]
    assert isinstance(group, ClassicGroup) and group.state is ClassicGroupState.INITIALIZE
    assert shard.describe_groups(["grp"], ctx.now).response[0].group_state == "Initialize"
    join = shard.classic_group_join(JoinGroupRequest("grp", a, "consumer", (("range", b""),), SESSION_MS), 0, 1)
    sync = shard.classic_group_sync(SyncGroupRequest("grp", 1, a), 0, 2)
    commit = shard.offset_commit(OffsetCommitRequest("grp", a, 1, [CommitPartition("foo", 0, 1)]), 0)
    assert join.response is not None and join.response.error_code is Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert sync.response is not None and sync.response.error_code is Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert commit.response.partitions[0].error_code is Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert group.timers_after_load(ctx.now)
    assert group.state is ClassicGroupState.STABLE


def test_after_a_failover_in_awaiting_sync_the_members_sync_again_and_the_leaders_completes_it() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    ctx.rejoin_all([a, b], protocols=(("range", b"v2"),))
    ctx.failover()  # the generation was persisted (seed step 2), the assignment not yet
    assert ctx.state() is ClassicGroupState.AWAITING_SYNC
    sb = ctx.sync(b, 2)
    assert ctx.answer(sb) is None
    ctx.sync(a, 2, assignments={a: b"A", b: b"B"})
    assert ctx.sync_answer(sb).assignment == b"B"
    assert ctx.state() is ClassicGroupState.STABLE


def test_after_a_failover_a_join_group_aborts_the_persisted_synchronization() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    ctx.rejoin_all([a, b], protocols=(("range", b"v2"),))
    ctx.failover()  # b never received its JoinGroup response: it sends JoinGroup again (seed case 2)
    cb = ctx.join(b, protocols=(("range", b"v2"),))
    assert ctx.state() is ClassicGroupState.JOINING
    assert ctx.sync_answer(ctx.sync(a, 2, assignments={a: b"A"})).error_code is Errors.REBALANCE_IN_PROGRESS
    ca = ctx.join(a, protocols=(("range", b"v2"),))
    assert ctx.join_answer(ca).generation_id == ctx.join_answer(cb).generation_id == 3


def test_after_a_failover_members_that_never_come_back_are_noticed_by_their_session_timeout() -> None:
    ctx = ClassicContext()
    ctx.stable_group(2)
    ctx.failover()
    assert ctx.state() is ClassicGroupState.STABLE
    ctx.advance(SESSION_MS)
    assert ctx.group().members == {}
    assert ctx.state() is ClassicGroupState.DOWN


def test_classic_records_round_trip_through_the_persisted_encoding() -> None:
    ctx = ClassicContext()
    ctx.stable_group(2, instance_id=None, protocols=(("range", b"\x00\xff"),))
    ctx.join("", instance_id="host-s")
    ctx.advance(INITIAL_DELAY_MS)
    ctx.apply(ctx.shard.delete_groups(["nope"], ctx.now))
    assert LEADER_ERROR_METADATA_KEY  # importing the service registered the classic records with the codec
    decoded = [record_codec.decode(record_codec.encode(r)) for r in ctx.records]
    assert decoded == ctx.records


def test_a_tombstone_removes_the_group_on_replay() -> None:
    ctx = ClassicContext()
    (a,) = ctx.stable_group(1)
    ctx.leave(a)
    ctx.apply(ctx.shard.delete_groups(["grp"], ctx.now))
    assert "grp" not in ctx.fresh_replay().groups


OPS = st.lists(st.tuples(st.sampled_from(["new", "rejoin", "sync", "leave", "heartbeat", "advance"]),
                         st.integers(0, 3), st.integers(0, 2)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_replay_rebuilds_the_persisted_group_after_any_history(ops: list[tuple[str, int, int]]) -> None:
    """Whenever the group is not mid-Joining, replaying every record gives the same persisted view."""
    ctx = ClassicContext()
    known: list[str] = []
    for op, who, variant in ops:
        group = ctx.shard.groups.get("grp")
        members = list(group.members) if isinstance(group, ClassicGroup) else []
        target = (members or known or [""])[who % len(members or known or [""])]
        protocols = (("range", bytes([variant])), ("roundrobin", b""))
        if op == "new":
            first = ctx.join_answer(ctx.join("", protocols=protocols))
            if first.error_code is Errors.MEMBER_ID_REQUIRED:
                known.append(first.member_id)
                ctx.join(first.member_id, protocols=protocols)
        elif op == "rejoin" and target:
            ctx.join(target, protocols=protocols)
        elif op == "sync" and isinstance(group, ClassicGroup) and target in members:
            ctx.sync(target, group.generation, assignments={m: m.encode() for m in members})
        elif op == "leave" and target:
            ctx.leave(target)
        elif op == "heartbeat" and isinstance(group, ClassicGroup) and target:
            ctx.heartbeat(target, group.generation)
        elif op == "advance":
            ctx.advance([INITIAL_DELAY_MS, SESSION_MS // 2, 31_000][variant])
        group = ctx.shard.groups.get("grp")
        if isinstance(group, ClassicGroup) and group.state is not ClassicGroupState.JOINING:
            assert persisted_view(ctx.fresh_replay()) == persisted_view(ctx.shard)
