"""The target assignment kept as arrays: replay order, lasting overlaps, records only for members whose
target changed, and the bytes it costs per partition."""

from __future__ import annotations

import random

from groupcoord.assignors.compact import CompactAssignment
from groupcoord.coordinator.core.consumer.target_store import TargetAssignment
from groupcoord.coordinator.core.records import ConsumerGroupTargetAssignmentMember
from tests.core.context import CoreContext, check_group_invariants, shard_state, tid

FOO = tid("foo")


def test_a_gainers_record_before_the_losers_ends_with_each_partition_owned_once() -> None:
    store = TargetAssignment({"a": {"t": frozenset({0, 1, 2})}, "b": {"t": frozenset({3})}})
    store["b"] = {"t": frozenset({2, 3})}  # b gains 2 before a's record drops it
    assert store.snapshot() is None  # for now, 2 is claimed twice
    store["a"] = {"t": frozenset({0, 1})}
    snap = store.snapshot()
    assert snap is not None and snap.owner.tolist()[:4] == [0, 0, 1, 1] and (snap.owner[4:] == -1).all()
    assert dict(store) == {"a": {"t": frozenset({0, 1})}, "b": {"t": frozenset({2, 3})}}


def test_a_lasting_overlap_keeps_every_members_partitions_exact() -> None:
    store = TargetAssignment({"a": {"t": frozenset({0, 1})}, "b": {"t": frozenset({1, 2})}})
    assert store.snapshot() is None
    assert store["a"] == {"t": frozenset({0, 1})} and store["b"] == {"t": frozenset({1, 2})}
    del store["b"]
    snap = store.snapshot()
    assert snap is not None and dict(snap["a"]) == {"t": frozenset({0, 1})}


def test_a_removed_members_slot_is_reused_and_empty_targets_are_kept() -> None:
    store = TargetAssignment({"a": {"t": frozenset({0})}, "b": {}})
    del store["a"]
    store["c"] = {"t": frozenset({5})}
    assert dict(store) == {"b": {}, "c": {"t": frozenset({5})}}
    snap = store.snapshot()
    assert snap is not None and snap.member_ids == ["b", "c"] and snap.partitions_of(1) == {"t": frozenset({5})}


def test_the_target_costs_bytes_per_partition_not_objects() -> None:
    store = TargetAssignment({f"m{i}": {f"t{i % 10}": frozenset(range((i // 10) * 1000, (i // 10 + 1) * 1000))}
                              for i in range(100)})
    assert store.nbytes() <= 9 * 100_000  # a member entry (4 bytes) and an owner entry (4, grown by <= 1/4)


def test_one_member_joining_writes_target_records_only_for_members_whose_target_changed() -> None:
    ctx = CoreContext({"foo": 60}, group_consumer_assignors="uniform")
    for i in range(9):
        ctx.join(f"m{i}", subscribed_topic_names=("foo",))
    ctx.stabilise()
    before = {m: dict(p) for m, p in ctx.group().target_assignment.items()}
    start = len(ctx.records)
    ctx.join("m9", subscribed_topic_names=("foo",))
    written = [r for r in ctx.records[start:] if isinstance(r, ConsumerGroupTargetAssignmentMember)]
    after = {m: dict(p) for m, p in ctx.group().target_assignment.items()}
    changed = {m for m in after if after[m] != before.get(m)}
    assert {r.member_id for r in written} == changed
    assert 1 < len(changed) < len(after)
    ctx.stabilise()
    check_group_invariants(ctx.group())
    assert shard_state(ctx.fresh_replay()) == shard_state(ctx.shard)


def test_the_assignor_reads_the_target_as_the_stores_owner_array() -> None:
    ctx = CoreContext({"foo": 12}, group_consumer_assignors="uniform")
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.join("b", subscribed_topic_names=("foo",))
    ctx.stabilise()
    snap = ctx.group().target_assignment.snapshot()
    assert isinstance(snap, CompactAssignment) and snap.topic_ids == [FOO]
    assert sorted(snap.counts()) == [6, 6]


def test_snapshots_list_members_sorted_as_members_come_and_go_before_and_after_one() -> None:
    rng = random.Random(7)
    store = TargetAssignment()
    live: dict[str, dict[str, frozenset[int]]] = {}
    free = list(range(200))
    for step in range(300):
        if live and rng.random() < 0.4:
            gone = rng.choice(sorted(live))
            del store[gone]
            free += sorted(live.pop(gone)["t"])
        elif free:
            member = f"m{rng.randrange(1000):03d}"
            if member in live:
                continue
            take, free = free[:3], free[3:]
            live[member] = {"t": frozenset(take)}
            store[member] = live[member]
        if step % 25 == 0:  # snapshots taken now and then: inserts and removals keep the order in between
            snap = store.snapshot()
            assert snap is not None and snap.member_ids == sorted(live)
            assert {m: dict(snap.view(m)) for m in snap.member_ids} == live
