"""OffsetCommit / OffsetFetch for consumer groups: member epochs, per-partition assignment epochs, outsiders."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import (
    CommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from groupcoord.coordinator.core.records import OffsetCommit
from tests.core.context import CoreContext, shard_state


def commit(ctx: CoreContext, member_id: str, epoch: int, *parts: tuple[str, int, int],
           group_id: str = "grp", metadata: str | None = None) -> OffsetCommitResponse:
    request = OffsetCommitRequest(group_id, member_id, epoch,
                                  [CommitPartition(t, p, o, metadata=metadata) for t, p, o in parts])
    return ctx.apply(ctx.shard.offset_commit(request, ctx.now))  # type: ignore[no-any-return]


def fetch(ctx: CoreContext, **fields: object) -> OffsetFetchResponse:
    fields.setdefault("group_id", "grp")
    return ctx.apply(ctx.shard.offset_fetch(OffsetFetchRequest(**fields), ctx.now))  # type: ignore[arg-type,no-any-return]


def codes(response: OffsetCommitResponse) -> list[Errors]:
    return [p.error_code for p in response.partitions]


def scaled_out() -> CoreContext:
    """a held foo-0..5 since epoch 2; b joined (epoch 3); a keeps foo-0..2 and is now at epoch 3."""
    ctx = CoreContext({"foo": 6}, group_consumer_assignors="range")
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.join("b", subscribed_topic_names=("foo",))
    ctx.stabilise()
    assert ctx.member("a").member_epoch == 3 and ctx.member("b").member_epoch == 3
    return ctx


def test_commit_at_the_current_member_epoch_is_accepted_and_recorded() -> None:
    ctx = scaled_out()
    r = commit(ctx, "a", 3, ("foo", 0, 42), ("foo", 1, 7))
    assert r.error_code is Errors.NONE and codes(r) == [Errors.NONE, Errors.NONE]
    assert OffsetCommit("grp", "foo", 0, 42, -1, "", ctx.now) in ctx.records
    assert {(o.partition, o.committed_offset) for o in fetch(ctx).offsets} == {(0, 42), (1, 7)}


def test_commit_from_an_older_epoch_is_accepted_for_partitions_held_since_that_epoch() -> None:
    ctx = scaled_out()
    # a's response moving it to epoch 3 may not have reached it yet: foo-0..2 were a's at epoch 2 already.
    r = commit(ctx, "a", 2, ("foo", 0, 1), ("foo", 2, 1))
    assert codes(r) == [Errors.NONE, Errors.NONE]


def test_commit_from_an_epoch_older_than_the_partitions_assignment_epoch_is_stale_member_epoch() -> None:
    ctx = scaled_out()
    # b was given foo-3..5 at epoch 3: a commit for them from epoch 2 cannot come from b's ownership.
    ctx.join("c", subscribed_topic_names=("foo",))
    ctx.stabilise()
    epoch = ctx.member("b").member_epoch
    assert epoch == 4
    r = commit(ctx, "b", 2, *[("foo", p, 1) for p in sorted(ctx.member("b").assigned_sets()[ctx.tid("foo")])])
    assert set(codes(r)) == {Errors.STALE_MEMBER_EPOCH}
    assert r.partitions[0].error_message


def test_commit_from_an_older_epoch_for_a_partition_the_member_does_not_hold_is_stale_member_epoch() -> None:
    ctx = scaled_out()
    r = commit(ctx, "a", 2, ("foo", 0, 1), ("foo", 4, 1))
    assert codes(r) == [Errors.NONE, Errors.STALE_MEMBER_EPOCH]
    assert [o.partition for o in fetch(ctx).offsets] == [0]


def test_commit_from_a_newer_epoch_than_the_members_is_stale_member_epoch() -> None:
    ctx = scaled_out()
    before = shard_state(ctx.shard)
    r = commit(ctx, "a", 4, ("foo", 0, 1))
    assert r.error_code is Errors.STALE_MEMBER_EPOCH and codes(r) == [Errors.STALE_MEMBER_EPOCH]
    assert shard_state(ctx.shard) == before


def test_commit_from_an_unknown_member_is_unknown_member_id() -> None:
    ctx = scaled_out()
    r = commit(ctx, "ghost", 3, ("foo", 0, 1))
    assert r.error_code is Errors.UNKNOWN_MEMBER_ID and codes(r) == [Errors.UNKNOWN_MEMBER_ID]


def test_commit_from_outside_the_group_is_rejected_while_it_has_members() -> None:
    ctx = scaled_out()
    assert codes(commit(ctx, "", -1, ("foo", 0, 1))) == [Errors.UNKNOWN_MEMBER_ID]


def test_commit_from_outside_the_group_is_accepted_when_the_group_is_empty() -> None:
    ctx = scaled_out()
    for m in ("a", "b"):
        ctx.heartbeat(member_id=m, member_epoch=-1)
    assert codes(commit(ctx, "", -1, ("foo", 0, 9))) == [Errors.NONE]


def test_commit_from_outside_to_a_group_that_does_not_exist_stores_offsets_without_a_group() -> None:
    ctx = CoreContext({"foo": 6})
    assert codes(commit(ctx, "", -1, ("foo", 0, 9), group_id="simple")) == [Errors.NONE]
    assert "simple" not in ctx.shard.groups
    assert [o.committed_offset for o in fetch(ctx, group_id="simple").offsets] == [9]


def test_commit_with_a_member_id_to_a_missing_group_is_group_id_not_found() -> None:
    ctx = CoreContext({"foo": 6})
    assert codes(commit(ctx, "a", 3, ("foo", 0, 9), group_id="missing")) == [Errors.GROUP_ID_NOT_FOUND]
    assert ctx.records == []


def test_commit_of_unknown_topic_or_partition_fails_only_that_partition() -> None:
    ctx = scaled_out()
    r = commit(ctx, "a", 3, ("foo", 0, 1), ("nope", 0, 1), ("foo", 6, 1), ("foo", -1, 1))
    assert codes(r) == [Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                        Errors.UNKNOWN_TOPIC_OR_PARTITION]
    assert len([x for x in ctx.records if isinstance(x, OffsetCommit)]) == 1


def test_commit_with_metadata_over_the_limit_is_offset_metadata_too_large() -> None:
    ctx = CoreContext({"foo": 6}, offset_metadata_max_bytes=10)
    ctx.join("a", subscribed_topic_names=("foo",))
    assert codes(commit(ctx, "a", 2, ("foo", 0, 1), metadata="x" * 11)) == [Errors.OFFSET_METADATA_TOO_LARGE]
    assert codes(commit(ctx, "a", 2, ("foo", 0, 1), metadata="x" * 10)) == [Errors.NONE]
    assert fetch(ctx).offsets[0].metadata == "x" * 10


def test_commit_with_a_negative_offset_is_rejected() -> None:
    ctx = scaled_out()
    assert codes(commit(ctx, "a", 3, ("foo", 0, -5))) == [Errors.OFFSET_OUT_OF_RANGE]


def test_commit_with_an_empty_group_id_is_invalid_group_id() -> None:
    ctx = CoreContext()
    assert commit(ctx, "a", 1, ("foo", 0, 1), group_id="").error_code is Errors.INVALID_GROUP_ID


def test_fetch_of_specific_partitions_returns_minus_1_for_uncommitted_ones() -> None:
    ctx = scaled_out()
    commit(ctx, "a", 3, ("foo", 0, 5))
    r = fetch(ctx, topics={"foo": [0, 1]})
    assert [(o.partition, o.committed_offset) for o in r.offsets] == [(0, 5), (1, -1)]
    r = fetch(ctx, topics={"foo": None})
    assert [(o.partition, o.committed_offset) for o in r.offsets] == [(0, 5)]


def test_fetch_with_the_members_current_epoch_is_accepted() -> None:
    ctx = scaled_out()
    commit(ctx, "a", 3, ("foo", 0, 5))
    r = fetch(ctx, member_id="a", member_epoch=3)
    assert r.error_code is Errors.NONE and [o.committed_offset for o in r.offsets] == [5]


def test_fetch_with_another_epoch_is_stale_member_epoch() -> None:
    ctx = scaled_out()
    assert fetch(ctx, member_id="a", member_epoch=2).error_code is Errors.STALE_MEMBER_EPOCH
    assert fetch(ctx, member_id="a", member_epoch=4).error_code is Errors.STALE_MEMBER_EPOCH


def test_fetch_by_an_unknown_member_is_unknown_member_id() -> None:
    ctx = scaled_out()
    assert fetch(ctx, member_id="ghost", member_epoch=3).error_code is Errors.UNKNOWN_MEMBER_ID


def test_fetch_by_a_member_of_a_missing_group_is_group_id_not_found() -> None:
    ctx = CoreContext()
    assert fetch(ctx, group_id="missing", member_id="a", member_epoch=1).error_code is Errors.GROUP_ID_NOT_FOUND


def test_fetch_without_member_is_always_allowed() -> None:
    ctx = scaled_out()
    commit(ctx, "a", 3, ("foo", 0, 5))
    assert fetch(ctx).error_code is Errors.NONE
    assert fetch(ctx, group_id="missing").offsets == []


def test_fetch_with_an_empty_group_id_is_invalid_group_id() -> None:
    ctx = CoreContext()
    assert fetch(ctx, group_id="").error_code is Errors.INVALID_GROUP_ID


def test_rejected_commits_write_nothing() -> None:
    ctx = scaled_out()
    before = len(ctx.records)
    commit(ctx, "ghost", 3, ("foo", 0, 1))
    commit(ctx, "a", 9, ("foo", 0, 1))
    commit(ctx, "a", 2, ("foo", 5, 1))
    assert ctx.records[before:] == []


# --- fuzzing: no commit or fetch makes the shard raise; rejected partitions are never written ------------
commit_requests = st.builds(
    OffsetCommitRequest,
    group_id=st.sampled_from(["grp", "", "other"]),
    member_id=st.sampled_from(["a", "b", "", "ghost"]),
    generation_id_or_member_epoch=st.integers(-3, 5),
    partitions=st.lists(st.builds(CommitPartition, topic=st.sampled_from(["foo", "", "nope"]),
                                  partition=st.integers(-2, 7), committed_offset=st.integers(-5, 10**12),
                                  leader_epoch=st.integers(-1, 3),
                                  metadata=st.one_of(st.none(), st.text(max_size=5), st.just("x" * 5000))),
                        max_size=4),
)


@settings(max_examples=200, deadline=None)
@given(request=commit_requests, fetch_member=st.sampled_from(["", "a", "ghost"]), fetch_epoch=st.integers(-1, 4))
def test_random_commits_and_fetches_never_raise_and_only_accepted_partitions_are_written(
        request: OffsetCommitRequest, fetch_member: str, fetch_epoch: int) -> None:
    ctx = scaled_out()
    result = ctx.shard.offset_commit(request, ctx.now)
    ctx.apply(result)
    accepted = [(p.topic, p.partition) for p in result.response.partitions if p.error_code is Errors.NONE]
    assert [(r.topic, r.partition) for r in result.records] == accepted
    assert len(result.response.partitions) == len(request.partitions)
    ctx.shard.offset_fetch(OffsetFetchRequest("grp", fetch_member, fetch_epoch), ctx.now)
