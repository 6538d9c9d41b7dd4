"""Regex subscriptions resolved against known topics; topic metadata changes bump the group epoch;
the server assignor is the one most members ask for, else the first of group.consumer.assignors."""

from __future__ import annotations

import dataclasses

from groupcoord.coordinator.core.errors import Errors
from tests.core.context import CoreContext, image_of, tid


def test_regex_subscription_is_resolved_against_known_topics() -> None:
    ctx = CoreContext({"foo": 2, "food": 1, "bar": 3, "__consumer_offsets": 50})
    ctx.join("a", subscribed_topic_regex="foo.*")
    assert ctx.ack("a").assignment == ctx.tps(foo={0, 1}, food={0})


def test_regex_never_matches_internal_topics() -> None:
    ctx = CoreContext({"foo": 2, "__consumer_offsets": 50})
    ctx.join("a", subscribed_topic_regex=".*")
    assert ctx.group().resolved_regexes[".*"] == {"foo"}
    assert ctx.ack("a").assignment == ctx.tps(foo={0, 1})


def test_a_new_topic_matching_a_regex_bumps_the_epoch_and_gets_assigned() -> None:
    ctx = CoreContext({"foo": 2, "bar": 3})
    ctx.join("a", subscribed_topic_regex="f.*")
    ctx.stabilise()
    epoch = ctx.group().group_epoch
    bumps = ctx.shard.stats.metadata_bumps
    ctx.set_metadata({"foo": 2, "bar": 3, "fizz": 4})
    assert ctx.group().group_epoch == epoch + 1
    assert ctx.shard.stats.metadata_bumps == bumps + 1
    r = ctx.ack("a")
    assert r.assignment == ctx.tps(foo={0, 1}, fizz=range(4))


def test_a_new_topic_that_no_member_subscribes_to_changes_nothing() -> None:
    ctx = CoreContext({"foo": 2, "bar": 3})
    ctx.join("a", subscribed_topic_regex="f.*")
    epoch = ctx.group().group_epoch
    before = len(ctx.records)
    ctx.set_metadata({"foo": 2, "bar": 3, "baz": 4})
    assert ctx.records[before:] == [] and ctx.group().group_epoch == epoch


def test_more_partitions_for_a_subscribed_topic_bump_the_epoch() -> None:
    ctx = CoreContext({"foo": 2, "bar": 3})
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.set_metadata({"foo": 4, "bar": 3})
    assert ctx.group().group_epoch == 3
    assert ctx.ack("a").assignment == ctx.tps(foo=range(4))


def test_a_partition_count_change_of_an_unsubscribed_topic_does_not_bump() -> None:
    ctx = CoreContext({"foo": 2, "bar": 3})
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.set_metadata({"foo": 2, "bar": 9})
    assert ctx.group().group_epoch == 2


def test_a_deleted_topic_is_revoked_from_its_owner() -> None:
    ctx = CoreContext({"foo": 2, "bar": 3})
    ctx.join("a")
    ctx.set_metadata({"foo": 2})
    r = ctx.ack("a")
    assert r.assignment == ctx.tps(foo={0, 1})
    ctx.ack("a")
    assert ctx.member("a").assigned_sets() == ctx.tps(foo={0, 1})


def test_a_subscribed_topic_that_appears_later_is_picked_up() -> None:
    ctx = CoreContext({"foo": 2})
    assert ctx.join("a", subscribed_topic_names=("foo", "later")).assignment == ctx.tps(foo={0, 1})
    ctx.set_metadata({"foo": 2, "later": 2})
    assert ctx.ack("a").assignment == ctx.tps(foo={0, 1}, later={0, 1})


def test_metadata_change_for_an_empty_group_does_not_bump() -> None:
    ctx = CoreContext({"foo": 2})
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.heartbeat(member_id="a", member_epoch=-1)
    epoch = ctx.group().group_epoch
    ctx.set_metadata({"foo": 5})
    assert ctx.group().group_epoch == epoch


def test_a_heartbeat_notices_a_new_metadata_image_by_itself() -> None:
    ctx = CoreContext({"foo": 2})
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.shard.metadata = image_of({"foo": 3})  # swapped without on_metadata_update
    ctx.ack("a")
    assert ctx.group().group_epoch == 3


def test_rack_change_of_a_subscribed_topic_bumps_the_epoch() -> None:
    ctx = CoreContext({"foo": 2})
    ctx.join("a", subscribed_topic_names=("foo",))
    topic = ctx.image.by_name["foo"]
    racked = dataclasses.replace(topic, partition_racks=(frozenset({"r1"}), frozenset({"r2"})))
    image = type(ctx.image).of([racked])
    ctx.apply(ctx.shard.on_metadata_update(image, ctx.now))
    assert ctx.group().group_epoch == 3


def test_invalid_regex_on_a_later_heartbeat_is_rejected() -> None:
    ctx = CoreContext({"foo": 2})
    ctx.join("a", subscribed_topic_regex="f.*")
    assert ctx.heartbeat(member_id="a", member_epoch=2, subscribed_topic_regex="[").error_code \
        is Errors.INVALID_REGULAR_EXPRESSION
    assert ctx.member("a").subscribed_topic_regex == "f.*"


def test_switching_from_names_to_regex_replaces_the_subscription() -> None:
    ctx = CoreContext({"foo": 2, "bar": 1})
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.heartbeat(member_id="a", member_epoch=2, subscribed_topic_regex="b.*", topic_partitions=ctx.tps(foo={0, 1}))
    a = ctx.member("a")
    assert a.subscribed_topic_names == () and a.subscribed_topic_regex == "b.*"
    ctx.ack("a")
    ctx.ack("a")
    assert ctx.member("a").assigned_sets() == ctx.tps(bar={0})


# --- server assignor choice --------------------------------------------------------------------------------
def assignor_used(*votes: str | None, configured: str = "uniform,range") -> str:
    ctx = CoreContext({"foo": 6}, group_consumer_assignors=configured)
    for i, vote in enumerate(votes):
        ctx.join(f"m{i}", subscribed_topic_names=("foo",), server_assignor=vote)
    [described] = ctx.shard.describe_groups(["grp"], ctx.now).response
    return described.assignor_name


def test_server_assignor_is_the_one_most_members_ask_for() -> None:
    assert assignor_used("range", "range", "uniform") == "range"
    assert assignor_used(None, None, "range") == "range"


def test_server_assignor_tie_goes_to_the_earlier_configured_assignor() -> None:
    assert assignor_used("range", "uniform") == "uniform"
    assert assignor_used("uniform", "range", configured="range,uniform") == "range"


def test_server_assignor_defaults_to_the_first_configured() -> None:
    assert assignor_used(None, None) == "uniform"
    assert assignor_used(None, configured="range,uniform") == "range"


def test_range_and_uniform_assign_every_partition_once() -> None:
    for name in ("uniform", "range"):
        ctx = CoreContext({"foo": 7, "bar": 2}, group_consumer_assignors=name)
        for m in "abc":
            ctx.join(m)
        ctx.stabilise()
        owned = [(t, p) for mem in ctx.group().members.values() for t, ps in mem.assigned_partitions.items()
                 for p in ps]
        assert sorted(owned) == sorted([(tid("foo"), p) for p in range(7)] + [(tid("bar"), p) for p in range(2)])
