"""Records are the truth: replaying every record the shard emitted into a fresh shard rebuilds the same state
(groups, members, target assignments, epochs, partition owners, offsets, configs)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.core.messages import CommitPartition, OffsetCommitRequest
from tests.core.context import CoreContext, shard_state

MEMBERS = ["a", "b", "c", "d"]
SUBSCRIPTIONS: list[dict[str, object]] = [
    {"subscribed_topic_names": ("foo", "bar")}, {"subscribed_topic_names": ("foo",)},
    {"subscribed_topic_regex": "b.*"},
]


def assert_replay_equal(ctx: CoreContext) -> None:
    assert shard_state(ctx.fresh_replay()) == shard_state(ctx.shard)


def test_replay_rebuilds_a_scripted_history() -> None:
    ctx = CoreContext({"foo": 6, "bar": 3}, group_consumer_assignment_interval_ms=1000)
    ctx.join("a")
    ctx.join("s", instance_id="i-s", subscribed_topic_names=("foo",))
    ctx.advance(1000)
    ctx.stabilise()
    ctx.apply(ctx.shard.offset_commit(OffsetCommitRequest("grp", "a", ctx.member("a").member_epoch,
                                                          [CommitPartition("bar", 0, 12, metadata="m")]), ctx.now))
    ctx.heartbeat(member_id="s", member_epoch=-2, instance_id="i-s")
    ctx.join("s2", instance_id="i-s", subscribed_topic_names=("foo",))
    ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignor.offload.enable": "true"}, False, ctx.now))
    ctx.set_metadata({"foo": 8, "bar": 3})
    ctx.advance(1000)
    ctx.ack("a")
    ctx.join("x", group_id="gone")
    ctx.heartbeat(group_id="gone", member_id="x", member_epoch=-1)
    ctx.apply(ctx.shard.delete_groups(["gone"], ctx.now))
    ctx.advance(60_000)  # everyone times out
    assert_replay_equal(ctx)
    assert ctx.group().members == {}


def test_replay_keeps_the_assignment_timestamp_and_target_epoch() -> None:
    ctx = CoreContext({"foo": 6}, group_consumer_assignor_offload_enable=True, auto_complete_runs=False)
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.advance(300)
    ctx.complete_runs()
    replayed = ctx.fresh_replay().groups["grp"]
    assert (replayed.target_assignment_epoch, replayed.assignment_timestamp_ms) == (2, ctx.now)


operations = st.lists(st.tuples(
    st.sampled_from(["join", "static_join", "ack", "bare", "leave", "static_leave", "advance", "metadata",
                     "config", "commit", "delete", "complete"]),
    st.sampled_from(MEMBERS),
    st.integers(0, 2),
), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, offload=st.booleans(), interval=st.sampled_from([0, 1000]))
def test_replay_of_random_histories_equals_the_live_state(ops: list[tuple[str, str, int]], offload: bool,
                                                           interval: int) -> None:
    ctx = CoreContext({"foo": 6, "bar": 3}, auto_complete_runs=False,
                      group_consumer_assignor_offload_enable=offload, group_consumer_assignment_interval_ms=interval)
    for op, m, k in ops:
        group = ctx.shard.groups.get("grp")
        member = group.members.get(m) if group is not None else None
        if op == "join":
            ctx.join(m, **SUBSCRIPTIONS[k])  # type: ignore[arg-type]
        elif op == "static_join":
            ctx.join(f"{m}{len(ctx.records)}", instance_id=f"i-{m}", **SUBSCRIPTIONS[k])  # type: ignore[arg-type]
        elif op in ("ack", "bare") and member is not None and member.member_epoch > 0:
            if op == "ack":
                ctx.ack(m)
            else:
                ctx.heartbeat(member_id=m, member_epoch=member.member_epoch)
        elif op == "leave" and member is not None:
            ctx.heartbeat(member_id=m, member_epoch=-1)
        elif op == "static_leave" and member is not None and member.instance_id:
            ctx.heartbeat(member_id=m, member_epoch=-2, instance_id=member.instance_id)
        elif op == "advance":
            ctx.advance([100, 1000, 50_000][k])
        elif op == "metadata":
            ctx.set_metadata({"foo": 6 + k, "bar": 3, **({"baz": 2} if k == 2 else {})})
        elif op == "config":
            ctx.apply(ctx.shard.alter_group_configs(
                "grp", {"consumer.assignment.interval.ms": ["0", "500", None][k]}, False, ctx.now))
        elif op == "commit" and member is not None:
            ctx.apply(ctx.shard.offset_commit(OffsetCommitRequest(
                "grp", m, member.member_epoch, [CommitPartition("foo", k, len(ctx.records))]), ctx.now))
        elif op == "delete":
            ctx.apply(ctx.shard.delete_groups(["grp"], ctx.now))
        elif op == "complete":
            ctx.complete_runs()
        assert_replay_equal(ctx)
