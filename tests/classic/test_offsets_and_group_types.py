"""Offset commits from classic members (validated against the generation), a group id being either classic or
consumer, and what administration shows of a classic group."""

from __future__ import annotations

from groupcoord.coordinator.core.classic.records import KAFKA_STATE_NAMES, ClassicGroupState
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import CommitPartition, ConsumerGroupHeartbeatRequest, OffsetCommitRequest
from tests.classic.context import ClassicContext


def commit(ctx: ClassicContext, member_id: str, generation: int, instance_id: str | None = None,
           group_id: str = "grp") -> Errors:
    request = OffsetCommitRequest(group_id, member_id, generation, [CommitPartition("foo", 0, 42)], instance_id)
    response = ctx.apply(ctx.shard.offset_commit(request, ctx.now))
    codes = {p.error_code for p in response.partitions}
    assert len(codes) == 1
    return codes.pop()


def consumer_heartbeat(ctx: ClassicContext, group_id: str = "grp") -> Errors:
    request = ConsumerGroupHeartbeatRequest(group_id, "", 0, rebalance_timeout_ms=5000,
                                            subscribed_topic_names=("foo",), topic_partitions={})
    return ctx.apply(ctx.shard.consumer_group_heartbeat(request, ctx.now)).error_code  # type: ignore[no-any-return]


def test_a_commit_from_a_member_of_the_current_generation_is_accepted() -> None:
    ctx = ClassicContext()
    a, _ = ctx.stable_group(2)
    assert commit(ctx, a, 1) is Errors.NONE
    assert ctx.shard.offsets.committed("grp")[("foo", 0)].committed_offset == 42


def test_a_commit_with_another_generation_is_illegal_generation() -> None:
    ctx = ClassicContext()
    a, _ = ctx.stable_group(2)
    assert commit(ctx, a, 0) is Errors.ILLEGAL_GENERATION


def test_a_commit_while_awaiting_sync_is_rebalance_in_progress() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    ctx.rejoin_all([a, b], protocols=(("range", b"v2"),))
    assert ctx.state() is ClassicGroupState.AWAITING_SYNC
    assert commit(ctx, a, 2) is Errors.REBALANCE_IN_PROGRESS


def test_the_old_generation_may_still_commit_while_the_group_is_joining() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    ctx.join(a)
    assert ctx.state() is ClassicGroupState.JOINING
    assert commit(ctx, b, 1) is Errors.NONE


def test_commits_from_strangers_fenced_instances_and_outsiders_are_rejected() -> None:
    ctx = ClassicContext()
    ctx.join("", instance_id="host-a")
    ctx.advance(200)
    member_id = ctx.group().static_members["host-a"]
    assert commit(ctx, "stranger", 1) is Errors.UNKNOWN_MEMBER_ID
    assert commit(ctx, "impostor", 1, instance_id="host-a") is Errors.FENCED_INSTANCE_ID
    assert commit(ctx, "", -1) is Errors.UNKNOWN_MEMBER_ID  # from outside the group, while it has members
    ctx.leave(member_id)
    assert ctx.state() is ClassicGroupState.DOWN
    assert commit(ctx, "", -1) is Errors.NONE  # from outside, once the group is empty


def test_a_consumer_group_heartbeat_cannot_upgrade_a_classic_group_whose_members_do_not_use_the_consumer_protocol(
) -> None:
    # Kafka's validateOnlineUpgrade: the members' metadata here is not a ConsumerProtocol subscription.
    ctx = ClassicContext()
    ctx.stable_group(1)
    assert consumer_heartbeat(ctx) is Errors.GROUP_ID_NOT_FOUND
    assert ctx.state() is ClassicGroupState.STABLE


def test_an_empty_classic_group_becomes_a_consumer_group_on_its_first_consumer_group_heartbeat() -> None:
    ctx = ClassicContext()
    (a,) = ctx.stable_group(1)
    ctx.leave(a)
    assert consumer_heartbeat(ctx) is Errors.NONE
    assert ctx.shard.describe_groups(["grp"], ctx.now).response[0].group_type == "consumer"


def test_classic_requests_to_a_consumer_group_with_members_are_judged_as_kafka_4_does() -> None:
    """Kafka 4.x takes classic members into a consumer group (mixed/group.py): a JoinGroup without a member id
    is asked for one first (MEMBER_ID_REQUIRED, as Kafka 4.4 answers in the differential suite); with one, metadata
    that is not a ConsumerProtocol subscription, or another protocol type, is INCONSISTENT_GROUP_PROTOCOL;
    requests of a member the group does not know are UNKNOWN_MEMBER_ID."""
    ctx = ClassicContext()
    consumer_heartbeat(ctx)
    first = ctx.join_answer(ctx.join(""))
    assert first.error_code is Errors.MEMBER_ID_REQUIRED
    assert ctx.join_answer(ctx.join(first.member_id)).error_code is Errors.INCONSISTENT_GROUP_PROTOCOL
    other = ctx.join("", protocol_type="leader", protocols=(("single-writer", b""),))
    assert ctx.join_answer(other).error_code is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.sync_answer(ctx.sync("x", 1)).error_code is Errors.UNKNOWN_MEMBER_ID
    assert ctx.heartbeat("x", 1).error_code is Errors.UNKNOWN_MEMBER_ID
    assert ctx.leave("x").members[0].error_code is Errors.UNKNOWN_MEMBER_ID


def test_an_empty_consumer_group_becomes_classic_on_a_first_join_group() -> None:
    ctx = ClassicContext()
    consumer_heartbeat(ctx)
    member_id = ctx.shard.describe_groups(["grp"], ctx.now).response[0].members[0].member_id
    leave = ConsumerGroupHeartbeatRequest("grp", member_id, -1)
    ctx.apply(ctx.shard.consumer_group_heartbeat(leave, ctx.now))
    assert ctx.join_answer(ctx.join("")).error_code is Errors.MEMBER_ID_REQUIRED
    assert ctx.state() is ClassicGroupState.DOWN
    replayed = ctx.fresh_replay().groups["grp"]
    assert replayed.describe().group_type == "classic"


def test_describe_and_list_show_the_seeds_state_names_the_generation_and_members_bytes() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2, protocols=(("range", b"subscription"),))
    (described,) = ctx.shard.describe_groups(["grp"], ctx.now).response
    assert (described.group_type, described.group_state, described.group_epoch, described.assignor_name,
            described.protocol_type) == ("classic", "Stable", 1, "range", "consumer")
    assert [(m.member_id, m.member_metadata, m.member_assignment) for m in described.members] == [
        (a, b"subscription", a.encode()), (b, b"subscription", b.encode())]
    ctx.join(a)
    (listed,) = ctx.shard.list_groups(["joining"], ["classic"], ctx.now).response
    assert (listed.group_id, listed.group_state, listed.protocol_type) == ("grp", "Joining", "consumer")
    assert ctx.shard.list_groups(["stable"], [], ctx.now).response == []


def test_every_state_but_initialize_maps_to_a_kafka_state() -> None:
    assert {s.value: KAFKA_STATE_NAMES[s] for s in ClassicGroupState if s in KAFKA_STATE_NAMES} == {
        "Down": "Empty", "Stable": "Stable", "Joining": "PreparingRebalance", "AwaitingSync": "CompletingRebalance"}
    assert ClassicGroupState.INITIALIZE not in KAFKA_STATE_NAMES  # Kafka has no group state while loading


def test_only_an_empty_classic_group_can_be_deleted_and_deleting_it_is_replayed() -> None:
    ctx = ClassicContext()
    (a,) = ctx.stable_group(1)
    assert ctx.apply(ctx.shard.delete_groups(["grp"], ctx.now))[0].error_code is Errors.NON_EMPTY_GROUP
    ctx.leave(a)
    assert ctx.apply(ctx.shard.delete_groups(["grp"], ctx.now))[0].error_code is Errors.NONE
    assert "grp" not in ctx.shard.groups
    assert "grp" not in ctx.fresh_replay().groups
