"""Regex subscriptions: RE2 semantics (Kafka's RE2/J syntax), validated on the request path, resolved off it.

KIP-848 / Kafka's GroupMetadataManager: a heartbeat never matches topics itself; it asks for a background
resolution whose result lands as records of the group (ConsumerGroupRegularExpression), bumping the group
epoch when the group's subscribed topics change. Resolutions are refreshed every
`group.consumer.regex.refresh.interval.ms` and when topic metadata changes.
"""

from __future__ import annotations

from groupcoord.coordinator.core.consumer.topic_regex import RegexResolution, resolve_topic_regexes
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.records import ConsumerGroupRegularExpression, ConsumerGroupRegularExpressionTombstone
from tests.core.context import CoreContext, image_of, shard_state

HOSTILE = "(.?.?.?)*X"  # catastrophic backtracking for Python's `re` against a 14-character name


def test_a_member_subscribed_only_by_regex_gets_partitions_once_the_resolution_lands() -> None:
    ctx = CoreContext({"foo": 2, "bar": 3}, auto_resolve_regexes=False)
    r = ctx.join("a", subscribed_topic_regex="f.*")
    assert r.error_code is Errors.NONE and r.assignment == {}
    assert [t.regexes for t in ctx.pending_regex] == [("f.*",)]
    assert ctx.ack("a").assignment in (None, {})
    epoch = ctx.group().group_epoch
    assert ctx.resolve_regexes() == 1
    assert ConsumerGroupRegularExpression("grp", "f.*", ("foo",), ctx.now) in ctx.records
    assert ctx.group().group_epoch == epoch + 1
    assert ctx.ack("a").assignment == ctx.tps(foo={0, 1})


def test_the_heartbeat_does_not_match_topics_itself() -> None:
    ctx = CoreContext({"a" * 14: 1, "foo": 1}, auto_resolve_regexes=False)
    r = ctx.join("a", subscribed_topic_regex=HOSTILE)
    assert r.error_code is Errors.NONE
    assert len(ctx.pending_regex) == 1 and ctx.group().resolved_regexes == {}


def test_a_hostile_pattern_resolves_with_re2_semantics() -> None:
    names = ["a" * 14, "b" * 30, "aaaX", "X"]
    assert resolve_topic_regexes([HOSTILE], names)[HOSTILE] == {"aaaX", "X"}


def test_re2j_syntax_kafka_users_write_is_accepted() -> None:
    names = ["orders-1", "orders-x", "Payments", "__consumer_offsets", "audit.log"]
    resolved = resolve_topic_regexes([r"orders-\d+", "(?i)payments", "[[:alpha:]]+\\.log", ".*"], names)
    assert resolved[r"orders-\d+"] == {"orders-1"}
    assert resolved["(?i)payments"] == {"Payments"}
    assert resolved["[[:alpha:]]+\\.log"] == {"audit.log"}
    assert "__consumer_offsets" not in resolved[".*"]


def test_patterns_re2_rejects_get_invalid_regular_expression_without_echoing_them() -> None:
    ctx = CoreContext({"foo": 1})
    for pattern in ["(?<=a)b", "(a)\\1", "[", "x{1001}", "(" * 100_000, "\\pL{500}"]:
        r = ctx.join("a", subscribed_topic_regex=pattern)
        assert r.error_code is Errors.INVALID_REGULAR_EXPRESSION, pattern[:20]
        assert int(Errors.INVALID_REGULAR_EXPRESSION) == 128
        assert len(r.error_message) < 300
    assert "grp" not in ctx.shard.groups or not ctx.group().members


def test_resolutions_are_refreshed_after_the_refresh_interval() -> None:
    ctx = CoreContext({"foo": 2}, auto_resolve_regexes=False)
    ctx.join("a", subscribed_topic_regex="f.*")
    ctx.resolve_regexes()
    ctx.stabilise()
    ctx.now += 10_000
    ctx.ack("a")
    assert ctx.pending_regex == []  # the resolution is fresh
    # A topic appears without a metadata notification (e.g. missed); the periodic refresh finds it.
    ctx.now += 600_000
    ctx.ack("a")
    assert len(ctx.pending_regex) == 1
    ctx.shard.metadata = ctx.image = image_of({"foo": 2, "fizz": 1})
    ctx.pending_regex = [RegexResolution(t.group_id, t.run_id, t.regexes, tuple(ctx.image.by_name))
                         for t in ctx.pending_regex]
    ctx.resolve_regexes()
    ctx.ack("a")
    assert ctx.member("a").assigned_sets() == ctx.tps(foo={0, 1}, fizz={0})


def test_a_metadata_change_resolves_again_in_the_background() -> None:
    ctx = CoreContext({"foo": 2}, auto_resolve_regexes=False)
    ctx.join("a", subscribed_topic_regex="f.*")
    ctx.resolve_regexes()
    ctx.stabilise()
    ctx.set_metadata({"foo": 2, "fizz": 3})
    assert len(ctx.pending_regex) == 1
    epoch = ctx.group().group_epoch
    ctx.resolve_regexes()
    assert ctx.group().resolved_regexes["f.*"] == {"foo", "fizz"}
    assert ctx.group().group_epoch == epoch + 1


def test_one_resolution_per_group_at_a_time_and_a_stale_one_is_followed_by_another() -> None:
    ctx = CoreContext({"foo": 2}, auto_resolve_regexes=False)
    ctx.join("a", subscribed_topic_regex="f.*")
    ctx.join("b", subscribed_topic_regex="fo+")
    assert len(ctx.pending_regex) == 1  # b's regex waits for the in-flight run
    ctx.resolve_regexes()  # a's run lands; b's regex is still unresolved, so another run is asked for
    ctx.ack("a")
    assert [t.regexes for t in ctx.pending_regex] == [("f.*", "fo+")]
    ctx.resolve_regexes()
    assert set(ctx.group().resolved_regexes) == {"f.*", "fo+"}


def test_a_regex_no_member_uses_any_more_is_tombstoned() -> None:
    ctx = CoreContext({"foo": 2, "bar": 1})
    ctx.join("a", subscribed_topic_regex="f.*")
    ctx.join("b", subscribed_topic_regex="b.*")
    ctx.heartbeat(member_id="b", member_epoch=-1)
    assert ConsumerGroupRegularExpressionTombstone("grp", "b.*") in ctx.records
    assert set(ctx.group().resolved_regexes) == {"f.*"}
    ctx.heartbeat(member_id="a", member_epoch=ctx.member("a").member_epoch, subscribed_topic_names=("bar",))
    assert ctx.group().resolved_regexes == {}


def test_resolved_regexes_replay_to_the_same_state() -> None:
    ctx = CoreContext({"foo": 2, "bar": 1, "fizz": 2})
    ctx.join("a", subscribed_topic_regex="f.*")
    ctx.join("b", subscribed_topic_regex="b.*")
    ctx.stabilise()
    ctx.set_metadata({"foo": 2, "bar": 1, "fizz": 2, "fuzz": 1})
    ctx.stabilise()
    assert shard_state(ctx.fresh_replay()) == shard_state(ctx.shard)
    assert ctx.fresh_replay().groups["grp"].resolved_regexes["f.*"] == {"foo", "fizz", "fuzz"}
