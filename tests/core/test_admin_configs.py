"""DescribeGroups, ListGroups, DeleteGroups, DescribeGroupConfigs and AlterGroupConfigs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import CommitPartition, OffsetCommitRequest, OffsetFetchRequest
from groupcoord.coordinator.core.records import GroupConfig, OffsetCommitTombstone
from tests.core.context import CoreContext, shard_state


def two_groups() -> CoreContext:
    ctx = CoreContext({"foo": 6}, group_consumer_assignors="range")
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.join("b", subscribed_topic_names=("foo",))
    ctx.join("x", group_id="other", subscribed_topic_names=("foo",))
    ctx.heartbeat(group_id="other", member_id="x", member_epoch=-1)
    return ctx


def test_describe_reports_type_state_epochs_assignor_and_members() -> None:
    ctx = two_groups()
    [d] = ctx.shard.describe_groups(["grp"], ctx.now).response
    assert d.error_code is Errors.NONE
    assert (d.group_type, d.group_state, d.group_epoch, d.assignment_epoch) == ("consumer", "RECONCILING", 3, 3)
    assert d.assignor_name == "range" and d.assignment_timestamp_ms == ctx.now
    assert [m.member_id for m in d.members] == ["a", "b"]
    a, b = d.members
    assert a.assignment == ctx.tps(foo=range(6)) and a.target_assignment == ctx.tps(foo={0, 1, 2})
    assert b.assignment == {} and b.target_assignment == ctx.tps(foo={3, 4, 5})
    assert b.state == "UNRELEASED_PARTITIONS" and b.member_epoch == 3
    assert b.subscribed_topic_names == ("foo",)


def test_describe_shows_partitions_pending_revocation() -> None:
    ctx = two_groups()
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    [d] = ctx.shard.describe_groups(["grp"], ctx.now).response
    assert d.members[0].partitions_pending_revocation == ctx.tps(foo={3, 4, 5})
    assert d.members[0].state == "UNREVOKED_PARTITIONS"


def test_describe_of_an_unknown_group_is_group_id_not_found_and_dead() -> None:
    ctx = two_groups()
    [d] = ctx.shard.describe_groups(["nope"], ctx.now).response
    assert d.error_code is Errors.GROUP_ID_NOT_FOUND and d.group_state == "DEAD"


def test_list_groups_without_filters_lists_every_group() -> None:
    ctx = two_groups()
    listed = ctx.shard.list_groups([], [], ctx.now).response
    assert [(g.group_id, g.group_state, g.group_type) for g in listed] == [
        ("grp", "RECONCILING", "consumer"), ("other", "EMPTY", "consumer")]


def test_list_groups_filters_by_state_case_insensitively() -> None:
    ctx = two_groups()
    assert [g.group_id for g in ctx.shard.list_groups(["Empty"], [], ctx.now).response] == ["other"]
    assert [g.group_id for g in ctx.shard.list_groups(["STABLE"], [], ctx.now).response] == []
    assert [g.group_id for g in ctx.shard.list_groups(["empty", "reconciling"], [], ctx.now).response] == [
        "grp", "other"]


def test_list_groups_filters_by_type() -> None:
    ctx = two_groups()
    assert len(ctx.shard.list_groups([], ["Consumer"], ctx.now).response) == 2
    assert ctx.shard.list_groups([], ["classic"], ctx.now).response == []


def test_delete_of_a_group_with_members_is_non_empty_group() -> None:
    ctx = two_groups()
    before = shard_state(ctx.shard)
    [r] = ctx.apply(ctx.shard.delete_groups(["grp"], ctx.now))
    assert r.error_code is Errors.NON_EMPTY_GROUP
    assert shard_state(ctx.shard) == before


def test_delete_of_an_unknown_group_is_group_id_not_found() -> None:
    ctx = two_groups()
    [r] = ctx.apply(ctx.shard.delete_groups(["nope"], ctx.now))
    assert r.error_code is Errors.GROUP_ID_NOT_FOUND


def test_delete_of_an_empty_group_removes_it_and_its_offsets() -> None:
    ctx = two_groups()
    ctx.apply(ctx.shard.offset_commit(OffsetCommitRequest("other", "", -1, [CommitPartition("foo", 1, 5)]), ctx.now))
    results = ctx.apply(ctx.shard.delete_groups(["other", "nope", "grp"], ctx.now))
    assert [r.error_code for r in results] == [Errors.NONE, Errors.GROUP_ID_NOT_FOUND, Errors.NON_EMPTY_GROUP]
    assert "other" not in ctx.shard.groups
    assert OffsetCommitTombstone("other", "foo", 1) in ctx.records
    assert ctx.shard.offset_fetch(OffsetFetchRequest("other"), ctx.now).response.offsets == []
    assert [g.group_id for g in ctx.shard.list_groups([], [], ctx.now).response] == ["grp"]


def test_delete_of_offsets_only_group_deletes_the_offsets() -> None:
    ctx = CoreContext({"foo": 6})
    ctx.apply(ctx.shard.offset_commit(OffsetCommitRequest("simple", "", -1, [CommitPartition("foo", 1, 5)]), ctx.now))
    [r] = ctx.apply(ctx.shard.delete_groups(["simple"], ctx.now))
    assert r.error_code is Errors.NONE and not ctx.shard.offsets.has_offsets("simple")


def test_deleted_group_can_be_created_again_from_epoch_2() -> None:
    ctx = two_groups()
    ctx.apply(ctx.shard.delete_groups(["other"], ctx.now))
    r = ctx.join("y", group_id="other", subscribed_topic_names=("foo",))
    assert r.member_epoch == 2 and ctx.group("other").group_epoch == 2


def test_describe_group_configs_lists_defaults_and_overrides() -> None:
    ctx = CoreContext()
    ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignment.interval.ms": "250"}, False, ctx.now))
    [d] = ctx.shard.describe_group_configs(["grp"], ctx.now).response
    entries = {e.name: e for e in d.configs}
    assert entries["consumer.assignment.interval.ms"].value == "250"
    assert not entries["consumer.assignment.interval.ms"].is_default
    assert entries["consumer.assignor.offload.enable"].is_default
    assert entries["consumer.session.timeout.ms"].value == ""
    [d] = ctx.shard.describe_group_configs(["fresh"], ctx.now).response
    assert all(e.is_default for e in d.configs)
    assert {e.name: e.value for e in d.configs}["consumer.assignment.interval.ms"] == "-1"


def test_describe_group_configs_with_an_empty_group_id_is_invalid_group_id() -> None:
    ctx = CoreContext()
    [d] = ctx.shard.describe_group_configs([""], ctx.now).response
    assert d.error_code is Errors.INVALID_GROUP_ID


def test_alter_group_configs_sets_and_deletes_overrides_with_a_record() -> None:
    ctx = CoreContext()
    r = ctx.apply(ctx.shard.alter_group_configs(
        "grp", {"consumer.assignment.interval.ms": "250", "consumer.assignor.offload.enable": "TRUE"}, False, ctx.now))
    assert r.error_code is Errors.NONE
    assert ctx.shard.group_configs["grp"] == {"consumer.assignment.interval.ms": 250,
                                              "consumer.assignor.offload.enable": True}
    ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignment.interval.ms": None}, False, ctx.now))
    assert ctx.shard.group_configs["grp"] == {"consumer.assignor.offload.enable": True}
    ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignor.offload.enable": None}, False, ctx.now))
    assert "grp" not in ctx.shard.group_configs
    assert ctx.records[-1] == GroupConfig("grp", {})


def test_assignment_interval_accepts_minus_1() -> None:
    ctx = CoreContext()
    r = ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignment.interval.ms": "-1"}, False, ctx.now))
    assert r.error_code is Errors.NONE and ctx.shard.group_configs["grp"]["consumer.assignment.interval.ms"] == -1


@pytest.mark.parametrize("updates", [
    {"no.such.config": "1"},
    {"consumer.assignment.interval.ms": "soon"},
    {"consumer.assignment.interval.ms": "-2"},
    {"consumer.assignment.interval.ms": "15001"},  # above group.consumer.max.assignment.interval.ms
    {"consumer.session.timeout.ms": "-1"},  # -1 is only for the assignment interval
    {"consumer.session.timeout.ms": "99"},  # below group.consumer.min.session.timeout.ms (100 here)
    {"consumer.heartbeat.interval.ms": "16000"},
    {"consumer.assignor.offload.enable": "yes"},
    {"consumer.auto.offset.reset": "sometimes"},
    {"consumer.assignment.interval.ms": "100", "consumer.assignor.offload.enable": "maybe"},
])
def test_bad_config_names_or_values_are_invalid_config_and_change_nothing(updates: dict[str, str]) -> None:
    ctx = CoreContext()
    ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignment.interval.ms": "7"}, False, ctx.now))
    before, records = shard_state(ctx.shard), len(ctx.records)
    r = ctx.apply(ctx.shard.alter_group_configs("grp", updates, False, ctx.now))
    assert r.error_code is Errors.INVALID_CONFIG and r.error_message
    assert shard_state(ctx.shard) == before and len(ctx.records) == records


def test_validate_only_changes_nothing() -> None:
    ctx = CoreContext()
    r = ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignment.interval.ms": "250"}, True, ctx.now))
    assert r.error_code is Errors.NONE
    assert ctx.shard.group_configs == {} and ctx.records == []
    r = ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignment.interval.ms": "x"}, True, ctx.now))
    assert r.error_code is Errors.INVALID_CONFIG


def test_alter_group_configs_with_an_empty_group_id_is_invalid_group_id() -> None:
    ctx = CoreContext()
    r = ctx.apply(ctx.shard.alter_group_configs("", {"consumer.assignment.interval.ms": "1"}, False, ctx.now))
    assert r.error_code is Errors.INVALID_GROUP_ID and ctx.records == []


@settings(max_examples=200, deadline=None)
@given(updates=st.dictionaries(
    st.sampled_from(["consumer.assignment.interval.ms", "consumer.assignor.offload.enable",
                     "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "consumer.auto.offset.reset",
                     "share.assignment.interval.ms", "bogus", ""]),
    st.one_of(st.none(), st.sampled_from(["-1", "0", "1000", "x", "true", "false", "45000", "", " 7 ", "1_0",
                                          "earliest", "99999999999"])),
    max_size=3), validate_only=st.booleans())
def test_random_config_alterations_never_raise_and_are_all_or_nothing(
        updates: dict[str, str | None], validate_only: bool) -> None:
    ctx = CoreContext()
    ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignment.interval.ms": "7"}, False, ctx.now))
    before = shard_state(ctx.shard)
    result = ctx.shard.alter_group_configs("grp", updates, validate_only, ctx.now)
    ctx.apply(result)
    assert result.response.error_code in (Errors.NONE, Errors.INVALID_CONFIG)
    if result.response.error_code is not Errors.NONE or validate_only:
        assert result.records == [] and shard_state(ctx.shard) == before
    else:
        [record] = result.records
        assert isinstance(record, GroupConfig)
        for name, value in updates.items():
            assert (name in ctx.shard.group_configs.get("grp", {})) == (value is not None)
    [described] = ctx.shard.describe_group_configs(["grp"], ctx.now).response
    assert described.error_code is Errors.NONE


def test_offset_delete_refuses_topics_subscribed_by_name_or_by_resolved_regex_and_tombstones_the_rest() -> None:
    ctx = CoreContext({"foo": 2, "bar": 2, "baz": 2})
    commits = [CommitPartition(t, p, 5) for t in ("foo", "bar", "baz") for p in (0, 1)]
    ctx.apply(ctx.shard.offset_commit(OffsetCommitRequest("grp", "", -1, commits), ctx.now))
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.join("b", subscribed_topic_regex="ba[r]")
    before = len(ctx.records)
    whole, per_partition = ctx.apply(ctx.shard.delete_offsets("grp", [("foo", 0), ("bar", 1), ("baz", 0)], ctx.now))
    assert whole.error_code is Errors.NONE
    assert [(p.topic, p.partition, p.error_code) for p in per_partition] == [
        ("foo", 0, Errors.GROUP_SUBSCRIBED_TO_TOPIC), ("bar", 1, Errors.GROUP_SUBSCRIBED_TO_TOPIC),
        ("baz", 0, Errors.NONE)]
    assert ctx.records[before:] == [OffsetCommitTombstone("grp", "baz", 0)]
    left = ctx.shard.offset_fetch(OffsetFetchRequest("grp"), ctx.now).response.offsets
    assert sorted((o.topic, o.partition) for o in left) == [("bar", 0), ("bar", 1), ("baz", 1), ("foo", 0), ("foo", 1)]


def test_offset_delete_of_an_unknown_group_is_group_id_not_found_and_writes_nothing() -> None:
    ctx = CoreContext({"foo": 2})
    before = len(ctx.records)
    whole, per_partition = ctx.apply(ctx.shard.delete_offsets("nope", [("foo", 0)], ctx.now))
    assert whole.error_code is Errors.GROUP_ID_NOT_FOUND and per_partition == [] and len(ctx.records) == before
