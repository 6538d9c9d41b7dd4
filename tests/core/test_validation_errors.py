"""Heartbeat errors: every validation rule answers INVALID_REQUEST; the other codes each have their cause.
Malformed or unlucky requests never raise out of the shard and never change its state."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.core.consumer.group import MemberState
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest
from tests.core.context import CoreContext, shard_state, tid

FOO = tid("foo")


def populated() -> CoreContext:
    """A group with a stable dynamic member a, a static member s (instance i-s), and b mid-rebalance."""
    ctx = CoreContext({"foo": 6, "bar": 3}, group_consumer_max_size=3)
    ctx.join("a")
    ctx.join("s", instance_id="i-s")
    ctx.stabilise()
    ctx.join("b")
    return ctx


def assert_rejected_without_change(ctx: CoreContext, request: ConsumerGroupHeartbeatRequest, code: Errors) -> None:
    before, records, timers = shard_state(ctx.shard), len(ctx.records), dict(ctx.timers)
    result = ctx.shard.consumer_group_heartbeat(request, ctx.now)
    assert result.response.error_code is code, result.response
    assert result.response.error_message
    assert result.records == [] and result.timers == [] and result.tasks == []
    ctx.apply(result)
    assert shard_state(ctx.shard) == before and len(ctx.records) == records and ctx.timers == timers


R = ConsumerGroupHeartbeatRequest
RETRY: dict[str, Any] = {"rebalance_timeout_ms": 5000, "subscribed_topic_names": ("foo",)}
JOIN: dict[str, Any] = {"rebalance_timeout_ms": 5000, "subscribed_topic_names": ("foo",), "topic_partitions": {}}

INVALID = {
    "empty group id": R("", "a", 0, **JOIN),
    "empty instance id": R("grp", "n", 0, instance_id="", **JOIN),
    "empty rack id": R("grp", "n", 0, rack_id="", **JOIN),
    "epoch below -2": R("grp", "a", -3),
    "member id missing with a non-zero epoch": R("grp", "", 2),
    "member id missing on leave": R("grp", "", -1),
    "static leave without instance id": R("grp", "s", -2),
    "topic names and regex together": R("grp", "n", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("foo",),
                                        subscribed_topic_regex="f.*", topic_partitions={}),
    "empty topic name": R("grp", "n", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("foo", ""),
                          topic_partitions={}),
    "zero rebalance timeout on join": R("grp", "n", 0, rebalance_timeout_ms=0, subscribed_topic_names=("foo",),
                                        topic_partitions={}),
    "negative rebalance timeout later": R("grp", "a", 2, rebalance_timeout_ms=-5),
    "join without rebalance timeout": R("grp", "n", 0, subscribed_topic_names=("foo",), topic_partitions={}),
    "join without subscription": R("grp", "n", 0, rebalance_timeout_ms=5000, topic_partitions={}),
    "join with owned partitions": R("grp", "n", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("foo",),
                                    topic_partitions={FOO: frozenset({0})}),
    "owned partitions with an empty topic id": R("grp", "a", 2, topic_partitions={"": frozenset({0})}),
    "owned partitions with a negative partition": R("grp", "a", 2, topic_partitions={FOO: frozenset({-1})}),
}


@pytest.mark.parametrize("request_", INVALID.values(), ids=list(INVALID))
def test_each_validation_rule_is_invalid_request_and_changes_nothing(request_: ConsumerGroupHeartbeatRequest) -> None:
    assert_rejected_without_change(populated(), request_, Errors.INVALID_REQUEST)


def test_unknown_server_assignor_is_unsupported_assignor() -> None:
    ctx = populated()
    assert_rejected_without_change(ctx, R("grp", "n", 0, server_assignor="sticky", **JOIN), Errors.UNSUPPORTED_ASSIGNOR)
    assert_rejected_without_change(ctx, R("grp", "a", 2, server_assignor="sticky"), Errors.UNSUPPORTED_ASSIGNOR)


def test_invalid_regex_is_invalid_regular_expression() -> None:
    ctx = populated()
    request = R("grp", "n", 0, rebalance_timeout_ms=5000, subscribed_topic_regex="foo(", topic_partitions={})
    assert_rejected_without_change(ctx, request, Errors.INVALID_REGULAR_EXPRESSION)


def test_join_beyond_group_max_size_is_group_max_size_reached() -> None:
    ctx = populated()  # 3 members, max 3
    assert_rejected_without_change(ctx, R("grp", "n", 0, **JOIN), Errors.GROUP_MAX_SIZE_REACHED)
    assert_rejected_without_change(ctx, R("grp", "", 0, **JOIN), Errors.GROUP_MAX_SIZE_REACHED)


def test_group_max_size_does_not_stop_a_known_member_rejoining_or_a_static_replacement() -> None:
    ctx = populated()
    assert ctx.join("a").error_code is Errors.NONE
    ctx.heartbeat(member_id="s", member_epoch=-2, instance_id="i-s")
    assert ctx.join("s2", instance_id="i-s").error_code is Errors.NONE


def test_unknown_member_is_unknown_member_id() -> None:
    ctx = populated()
    assert_rejected_without_change(ctx, R("grp", "ghost", 3), Errors.UNKNOWN_MEMBER_ID)
    assert_rejected_without_change(ctx, R("grp", "ghost", -1), Errors.UNKNOWN_MEMBER_ID)


def test_missing_group_is_group_id_not_found() -> None:
    ctx = populated()
    assert_rejected_without_change(ctx, R("nope", "a", 3), Errors.GROUP_ID_NOT_FOUND)


def test_epoch_newer_than_the_members_is_fenced_member_epoch() -> None:
    ctx = populated()
    assert_rejected_without_change(ctx, R("grp", "a", 9, topic_partitions={}), Errors.FENCED_MEMBER_EPOCH)


def test_epoch_older_than_the_previous_one_is_fenced_member_epoch() -> None:
    ctx = populated()
    ctx.stabilise()
    a = ctx.member("a")
    assert a.member_epoch == 4 and a.previous_member_epoch == 3
    assert_rejected_without_change(ctx, R("grp", "a", 2, topic_partitions={}), Errors.FENCED_MEMBER_EPOCH)


def test_previous_epoch_is_tolerated_when_owned_partitions_are_a_subset_of_the_assignment() -> None:
    """The response that moved the member to its new epoch was lost: it retries with the previous one."""
    ctx = populated()
    ctx.stabilise()
    a = ctx.member("a")
    r = ctx.heartbeat(member_id="a", member_epoch=a.previous_member_epoch, topic_partitions=a.assigned_sets())
    assert r.error_code is Errors.NONE and r.member_epoch == a.member_epoch
    assert r.assignment == a.assigned_sets()  # resent, since the client evidently missed it
    some = {t: frozenset(sorted(ps)[:1]) for t, ps in a.assigned_sets().items()}
    r = ctx.heartbeat(member_id="a", member_epoch=a.previous_member_epoch, topic_partitions=some)
    assert r.error_code is Errors.NONE


def test_previous_epoch_with_owned_partitions_outside_the_assignment_is_fenced_member_epoch() -> None:
    ctx = populated()
    ctx.stabilise()
    a = ctx.member("a")
    foreign = {t: frozenset(range(6)) for t in a.assigned_sets()}
    assert_rejected_without_change(ctx, R("grp", "a", a.previous_member_epoch, topic_partitions=foreign),
                                   Errors.FENCED_MEMBER_EPOCH)


def test_previous_epoch_without_owned_partitions_is_fenced_member_epoch() -> None:
    ctx = populated()
    ctx.stabilise()
    a = ctx.member("a")
    assert_rejected_without_change(ctx, R("grp", "a", a.previous_member_epoch), Errors.FENCED_MEMBER_EPOCH)



def test_previous_epoch_is_fenced_when_the_missed_answer_was_a_further_revocation_step() -> None:
    """As Kafka: the member acknowledged a revocation and the answer, which moved it to epoch+1 with more to
    revoke, was lost; its retry at the previous epoch still owns what it must now revoke (not a subset), so
    it is fenced after a single missed answer. Why clients/group_member.py waits for slow answers."""
    ctx = CoreContext({"foo": 6})
    ctx.join("a")
    ctx.stabilise()
    epoch = ctx.member("a").member_epoch
    ctx.join("b")
    assert ctx.heartbeat(member_id="a", member_epoch=epoch).error_code is Errors.NONE
    kept = ctx.member("a").assigned_sets()  # half of foo, the other half pending revocation
    ctx.join("c")
    ack = ctx.heartbeat(member_id="a", member_epoch=epoch, topic_partitions=kept)  # this answer is lost
    a = ctx.member("a")
    assert (ack.member_epoch, a.previous_member_epoch) == (epoch + 1, epoch)
    assert a.state is MemberState.UNREVOKED_PARTITIONS and a.assigned_sets() != kept
    assert_rejected_without_change(ctx, R("grp", "a", epoch, topic_partitions=kept, **RETRY),
                                   Errors.FENCED_MEMBER_EPOCH)

# --- fuzzing: nothing a client sends makes the shard raise, and an error never changes state --------------
names = st.sampled_from(["foo", "bar", "", "nope"])
requests = st.builds(
    ConsumerGroupHeartbeatRequest,
    group_id=st.sampled_from(["grp", "", "nope"]),
    member_id=st.sampled_from(["a", "b", "s", "", "ghost", "s2"]),
    member_epoch=st.integers(-4, 6),
    instance_id=st.sampled_from([None, "", "i-s", "i-x"]),
    rack_id=st.sampled_from([None, "", "r1"]),
    rebalance_timeout_ms=st.sampled_from([None, -1, 0, 3000]),
    subscribed_topic_names=st.one_of(st.none(), st.lists(names, max_size=3).map(tuple)),
    subscribed_topic_regex=st.sampled_from([None, "f.*", "(", ""]),
    server_assignor=st.sampled_from([None, "uniform", "range", "nope"]),
    topic_partitions=st.one_of(st.none(), st.dictionaries(
        st.sampled_from([FOO, tid("bar"), "", "unknown-id"]),
        st.frozensets(st.integers(-1, 7), max_size=3), max_size=2)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(requests, min_size=1, max_size=6))
def test_random_requests_never_raise_and_errors_never_change_state(batch: list[ConsumerGroupHeartbeatRequest]) -> None:
    ctx = populated()
    for request in batch:
        before = shard_state(ctx.shard)
        result = ctx.shard.consumer_group_heartbeat(request, ctx.now)
        if result.response.error_code is not Errors.NONE:
            assert result.records == [] and result.timers == [] and result.tasks == []
            assert shard_state(ctx.shard) == before
        ctx.apply(result)
        ctx.advance(100)
