"""`uniform` on an owner-array current assignment gives exactly the general path's result (Kafka's builder),
object for object, and reads only the members that move. On the coordinator's snapshot (`SpecMembers`, whose
assignments are the array's views by construction) it gives the same result as an `OverlayAssignment`, and
the members that changed are told the same from it as from the same result as a plain dict."""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.assignors._java_order import hash_map_member_order, member_key, member_table_size
from groupcoord.assignors.api import (
    AssignorError,
    GroupAssignment,
    GroupSpec,
    MemberSpec,
    StaticTopicDescriber,
    SubscriptionType,
)
from groupcoord.assignors.compact import CompactAssignment, MemberAssignmentView, compact_from_mapping
from groupcoord.assignors.overlay import OverlayAssignment
from groupcoord.assignors.uniform import UniformAssignor
from groupcoord.assignors.uniform_compact import assign_homogeneous_compact
from groupcoord.assignors.uniform_homogeneous import Quotas, assign_homogeneous
from groupcoord.coordinator.core.consumer.spec_members import SpecMembers
from groupcoord.coordinator.core.consumer.target_delta import assignment_changes

UNIFORM = UniformAssignor()
# topic ids as the coordinator has them: Kafka's `HashSet` and member-map orders of 3 or more of them differ
# from sorted order (the array's order), so a path that visited topics the array's way would be caught
TOPICS = [str(uuid.uuid5(uuid.NAMESPACE_DNS, f"t{i}")) for i in range(5)]


def spec_on(current: CompactAssignment, members: list[str], sub: frozenset[str]) -> GroupSpec:
    """The group as the coordinator hands it over: members in `current` hold its views, the others {}."""
    return GroupSpec.of({m: MemberSpec(sub, current.view(m) if m in current else {}) for m in members},
                        current=current)


def snapshot_of(spec: GroupSpec) -> GroupSpec:
    """`spec` as the coordinator snapshots it (`build_spec`): rows over the same owner array, whose views
    each member's spec then holds by construction."""
    rows = {m: (s.subscribed_topic_ids, s.rack_id, s.instance_id) for m, s in spec.members.items()}
    distinct = list({s.subscribed_topic_ids: None for s in spec.members.values()})
    return GroupSpec(SpecMembers(rows, distinct, spec.current), SubscriptionType.HOMOGENEOUS, spec.current)


def check_same_result(spec: GroupSpec, want: GroupAssignment, got_spec: GroupSpec, got: GroupAssignment | None,
                      ) -> None:
    """`got` on `got_spec` is the general path's `want` on `spec`: same members in the same order, same
    partitions in the same topic order, and the very object each was given exactly where the general path
    gives it back."""
    assert got is not None
    assert list(got) == list(want)
    for m, w in want.items():
        given_ = got_spec.members[m].assigned_partitions
        assert (got[m] is given_) == (w is spec.members[m].assigned_partitions), m
        assert list(got[m].items()) == list(w.items()), m
    assert got == want and want == got


def check_same(spec: GroupSpec, topics: StaticTopicDescriber) -> GroupAssignment:
    """The compact path's result equals the general path's on the same spec, and so does its result on the
    coordinator's snapshot of the same group (an overlay, telling the same changed members as a dict)."""
    snapshot = snapshot_of(spec)
    try:
        want = assign_homogeneous(spec, topics)
    except AssignorError:
        with pytest.raises(AssignorError):
            assign_homogeneous_compact(spec, topics)
        with pytest.raises(AssignorError):
            assign_homogeneous_compact(snapshot, topics)
        return {}
    got = assign_homogeneous_compact(spec, topics)
    assert got is not None
    check_same_result(spec, want, spec, got)
    assert UNIFORM.assign(spec, topics) == want
    on_snapshot = assign_homogeneous_compact(snapshot, topics)
    assert isinstance(on_snapshot, OverlayAssignment)
    check_same_result(spec, want, snapshot, on_snapshot)
    assert set(on_snapshot.overrides) <= set(snapshot.members)
    assert UNIFORM.assign(snapshot, topics) == want
    changes = assignment_changes(snapshot, on_snapshot)
    assert changes == assignment_changes(snapshot, dict(on_snapshot.items())) == assignment_changes(spec, want)
    return got


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counts=st.lists(st.integers(0, 12), min_size=1, max_size=4),
    old_sizes=st.lists(st.integers(0, 14), min_size=5, max_size=5),
    owners=st.lists(st.integers(-1, 9), min_size=70, max_size=70),
    in_group=st.lists(st.booleans(), min_size=10, max_size=10),
    newcomers=st.integers(0, 3),
)
def test_compact_path_matches_general_path_on_any_owner_array(
    counts: list[int], old_sizes: list[int], owners: list[int], in_group: list[bool], newcomers: int
) -> None:
    topics = StaticTopicDescriber({TOPICS[i]: c for i, c in enumerate(counts)})
    sub = frozenset(topics.partition_counts)
    pool = [f"m{i}" for i in range(10)]
    # old sizes differ from the counts now (grown, shrunk), and TOPICS[4] is a topic nobody subscribes to
    old: dict[str, dict[str, set[int]]] = {m: {} for m in pool}
    it = iter(owners)
    for k, size in enumerate(old_sizes):
        for p in range(size):
            o = next(it)
            if o >= 0:
                old[pool[o]].setdefault(TOPICS[k], set()).add(p)
    current = compact_from_mapping(old)
    assert current is not None
    members = [m for m, keep in zip(pool, in_group, strict=True) if keep] + [f"new{i}" for i in range(newcomers)]
    if members:
        check_same(spec_on(current, members, sub), topics)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counts=st.lists(st.integers(0, 12), min_size=1, max_size=4),
    first=st.integers(1, 9),
    steps=st.lists(st.tuples(st.booleans(), st.integers(0, 30), st.integers(1, 3), st.integers(-3, 3)),
                   max_size=6),
)
def test_compact_path_matches_general_path_across_joins_leaves_and_resizes(
    counts: list[int], first: int, steps: list[tuple[bool, int, int, int]]
) -> None:
    sizes = {TOPICS[i]: c for i, c in enumerate(counts)}
    sub = frozenset(sizes)
    names = [f"m{i:02d}" for i in range(first)]
    result: Mapping[str, Mapping[str, frozenset[int]]] = assign_homogeneous(
        GroupSpec.of({m: MemberSpec(sub) for m in names}), StaticTopicDescriber(sizes))
    next_id = first
    for join, pick, k, resize in steps:
        members = list(result)
        if join:
            members += [f"m{(next_id * 7919) % 97:02d}x{j}" for j in range(next_id, next_id + k)]
            next_id += k
        else:  # leavers stay in the array, as the coordinator's previous target keeps them
            members = [m for m in members if m not in sorted(members)[pick % len(members):][:k]] or members[:1]
        t = TOPICS[pick % len(sizes)]
        sizes[t] = max(0, sizes[t] + resize)
        current = compact_from_mapping(result)
        assert current is not None
        spec = spec_on(current, members, sub)
        result = check_same(spec, StaticTopicDescriber(dict(sizes)))


def one_left_one_joined() -> tuple[StaticTopicDescriber, list[str], GroupAssignment, GroupSpec]:
    """100 members on one topic of 1,000 partitions; then member0 leaves and newMember joins: the topics, the
    first members' names, their assignment, and the spec on its owner array."""
    topics = StaticTopicDescriber({"t": 1000})
    sub = frozenset({"t"})
    names = [f"member{i}" for i in range(100)]
    before = assign_homogeneous(GroupSpec.of({m: MemberSpec(sub) for m in names}), topics)
    current = compact_from_mapping(before)
    assert current is not None
    return topics, names, before, spec_on(current, [*names[1:], "newMember"], sub)


def test_one_leaves_one_joins_reads_only_the_members_that_move() -> None:
    topics, names, before, spec = one_left_one_joined()
    got = assign_homogeneous_compact(spec, topics)
    assert got is not None
    assert got["newMember"] == before["member0"]
    for m in names[1:]:
        assert got[m] is spec.members[m].assigned_partitions
        view = got[m]
        assert isinstance(view, MemberAssignmentView) and view._dict is None  # never read
    check_same(spec, topics)


def test_on_a_snapshot_only_the_members_that_move_are_read_and_held() -> None:
    topics, names, before, plain = one_left_one_joined()
    snapshot = snapshot_of(plain)
    # as a worker gets it: pickled with its spec, the snapshot's array still the spec's very `current`
    crossed = pickle.loads(pickle.dumps(snapshot))
    assert isinstance(crossed.members, SpecMembers) and crossed.members.current is crossed.current
    for spec in (snapshot, crossed):
        got = assign_homogeneous_compact(spec, topics)
        members = spec.members
        assert isinstance(members, SpecMembers)
        # a spec only for the joiner and the first visited member (whose subscription stands for all)
        assert set(members._specs) <= {"newMember", hash_map_member_order(members, len(members))[0]}
        assert isinstance(got, OverlayAssignment)
        assert set(got.overrides) == {"newMember"}
        assert got["newMember"] == before["member0"]
        assert got["member5"] is members["member5"].assigned_partitions
        assert got == assign_homogeneous(plain, topics)


def test_the_general_path_is_still_a_dict_when_the_members_make_no_promise() -> None:
    current = compact_from_mapping({"a": {"t": {0, 1}}, "b": {"t": {2, 3}}})
    assert current is not None
    spec = spec_on(current, ["a", "b", "c"], frozenset({"t"}))
    got = assign_homogeneous_compact(spec, StaticTopicDescriber({"t": 6}))
    assert type(got) is dict


@settings(max_examples=300, deadline=None)
@given(total=st.integers(0, 60), owned=st.lists(st.integers(0, 12), min_size=1, max_size=20))
def test_the_quota_walk_at_once_is_the_walk_member_by_member(total: int, owned: list[int]) -> None:
    quotas, lefts = [], []
    walk = Quotas(total, len(owned))
    for index, o in enumerate(owned):
        quota = walk.quota()
        quotas.append(quota)
        lefts.append(walk.settle(index, max(quota - o, 0)))
    quota_a, left_a = Quotas(total, len(owned)).walk(np.array(owned, dtype=np.int64))
    assert quota_a.tolist() == quotas
    assert left_a.tolist() == lefts


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.text(min_size=0, max_size=6), max_size=80, unique=True), extra=st.integers(0, 40))
def test_member_order_is_the_member_key_order(ids: list[str], extra: int) -> None:
    n = len(ids) + extra  # the table size follows n, which may exceed the ids given
    assert hash_map_member_order(ids, n) == sorted(ids, key=member_key(member_table_size(n)))


def test_a_shrunk_topic_and_an_unsubscribed_one_are_dropped_as_the_general_path_drops_them() -> None:
    current = compact_from_mapping({"a": {"t": {0, 1, 2, 3}, "gone": {0, 1}}, "b": {"t": {4, 5, 6, 7}}})
    assert current is not None
    topics = StaticTopicDescriber({"t": 6, "gone": 2})
    got = check_same(spec_on(current, ["a", "b"], frozenset({"t"})), topics)
    assert sorted(p for a in got.values() for p in a.get("t", ())) == list(range(6))
    assert all("gone" not in a for a in got.values())


def test_a_grown_topic_hands_its_new_partitions_to_members_below_quota() -> None:
    current = compact_from_mapping({"a": {"t": {0, 1}}, "b": {"t": {2, 3}}})
    assert current is not None
    got = check_same(spec_on(current, ["a", "b", "c"], frozenset({"t"})), StaticTopicDescriber({"t": 6}))
    assert got["c"] == {"t": frozenset({4, 5})}


def test_an_input_that_is_not_the_arrays_views_takes_the_general_path() -> None:
    current = compact_from_mapping({"a": {"t": {0, 1}}, "b": {"t": {2, 3}}})
    other = compact_from_mapping({"a": {"t": {0, 1}}, "b": {"t": {2, 3}}})
    assert current is not None and other is not None
    topics = StaticTopicDescriber({"t": 4})
    sub = frozenset({"t"})
    cases = [
        {"a": MemberSpec(sub, other.view("a")), "b": MemberSpec(sub, current.view("b"))},  # another array's view
        {"a": MemberSpec(sub, current.view("b")), "b": MemberSpec(sub, current.view("b"))},  # another member's
        {"a": MemberSpec(sub, {"t": frozenset({0, 1})}), "b": MemberSpec(sub, current.view("b"))},  # a dict
        {"a": MemberSpec(sub, current.view("a")), "c": MemberSpec(sub, {"t": frozenset({2})})},  # not in array
    ]
    for members in cases:
        spec = GroupSpec.of(members, current=current)
        assert assign_homogeneous_compact(spec, topics) is None
        assert UNIFORM.assign(spec, topics) == assign_homogeneous(spec, topics)
