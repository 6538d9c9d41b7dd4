"""Array assignors give the same results whether the current assignment comes as dicts or as one owner array
(`GroupSpec.current`), and their compact results read back as the dicts they stand for."""

from __future__ import annotations

import pickle

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from groupcoord.assignors.api import AssignorError, GroupSpec, LagSnapshot, MemberSpec, StaticTopicDescriber
from groupcoord.assignors.compact import CompactAssignment, compact_from_mapping
from groupcoord.assignors.lag_sticky import LagStickyAssignor
from groupcoord.assignors.uniform import UniformAssignor
from tests.assignors.strategies import scenarios


def assign_general(group: GroupSpec, topics: StaticTopicDescriber) -> object:
    """uniform as the coordinator calls it (its homogeneous and heterogeneous builders both read `current`);
    a refusal (a subscribed topic missing from the metadata, as Kafka refuses it) reads as {"error": {}}."""
    try:
        return UniformAssignor().assign(group, topics)
    except AssignorError:
        return {"error": {}}


def as_dicts(result: object) -> dict[str, dict[str, frozenset[int]]]:
    assert isinstance(result, (dict, CompactAssignment))
    return {m: {t: frozenset(ps) for t, ps in a.items() if ps} for m, a in result.items()}


def with_compact_current(group: GroupSpec, gone: dict[str, frozenset[int]]) -> GroupSpec | None:
    """The same group with its current assignment as one owner array (plus a member that left, holding
    `gone`); None when the assignment overlaps (an owner array cannot hold it)."""
    claims = {m: s.assigned_partitions for m, s in group.members.items()}
    claims["zz-left"] = gone
    current = compact_from_mapping(claims)
    if current is None:
        return None
    members = {m: MemberSpec(s.subscribed_topic_ids, current.view(m), s.rack_id, s.instance_id)
               for m, s in group.members.items()}
    return GroupSpec(members, group.subscription_type, current)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=scenarios(), gone=st.dictionaries(st.sampled_from(["t0", "t1"]), st.frozensets(st.integers(0, 9))))
def test_array_assignors_read_a_compact_current_assignment_as_its_dicts(
    case: tuple[GroupSpec, StaticTopicDescriber, LagSnapshot], gone: dict[str, frozenset[int]]
) -> None:
    group, topics, lag = case
    compact = with_compact_current(group, gone)
    assume(compact is not None)
    assert compact is not None
    plain = GroupSpec.of({m: MemberSpec(s.subscribed_topic_ids, dict(s.assigned_partitions), s.rack_id)
                          for m, s in compact.members.items()})
    assert as_dicts(assign_general(compact, topics)) == as_dicts(assign_general(plain, topics))
    lag_sticky = LagStickyAssignor()
    assert as_dicts(lag_sticky.assign(compact, topics, lag)) == as_dicts(lag_sticky.assign(plain, topics, lag))


def compact_assign(group: GroupSpec, topics: StaticTopicDescriber) -> object:
    """lag-sticky: an array assignor whose results come back as a `CompactAssignment` (uniform now follows
    Kafka's builders and answers with its own views)."""
    return LagStickyAssignor().assign(group, topics, LagSnapshot({}, "latest"))


def test_a_compact_result_names_the_members_whose_assignment_changed() -> None:
    topics = StaticTopicDescriber({"t0": 40, "t1": 20}, {"t0": tuple(frozenset({"r"}) for _ in range(40))})
    sub = frozenset({"t0", "t1"})
    first = compact_assign(GroupSpec.of({f"m{i}": MemberSpec(sub, rack_id="r") for i in range(9)}), topics)
    assert isinstance(first, CompactAssignment)
    members = {m: MemberSpec(sub, first[m], rack_id="r") for m in first}
    members["m9"] = MemberSpec(sub, rack_id="r")
    second = compact_assign(GroupSpec.of(members), topics)
    assert isinstance(second, CompactAssignment) and second.previous is first  # fed back: read as arrays
    before, after = as_dicts(first), as_dicts(second)
    assert second.changed == {m for m in after if after[m] != before.get(m, {})}
    assert 0 < len(second.changed) < len(after)


def test_a_compact_assignment_pickles_to_the_same_assignment() -> None:
    topics = StaticTopicDescriber({"t0": 7, "t1": 5})
    out = compact_assign(GroupSpec.of({f"m{i}": MemberSpec(frozenset({"t0", "t1"}), {"t0": {i}}, "r")
                                       for i in range(3)}), topics)
    back = pickle.loads(pickle.dumps(out))
    assert as_dicts(back) == as_dicts(out) and isinstance(back, CompactAssignment)
    assert pickle.loads(pickle.dumps(out["m1"])) == dict(out["m1"])


def test_an_overlapping_assignment_has_no_compact_form() -> None:
    assert compact_from_mapping({"a": {"t": frozenset({1})}, "b": {"t": frozenset({1, 2})}}) is None
    assert as_dicts(compact_from_mapping({"a": {"t": {1}}, "b": {"t": {0, 2}}, "c": {}})) == {
        "a": {"t": frozenset({1})}, "b": {"t": frozenset({0, 2})}, "c": {}}


def test_a_spec_with_a_compact_current_pickles_its_arrays_once_and_assigns_the_same() -> None:
    topics = StaticTopicDescriber({f"t{i}": 30 for i in range(4)})
    sub = frozenset(topics.partition_counts)
    first = compact_assign(GroupSpec.of({f"m{i}": MemberSpec(sub, rack_id="r") for i in range(20)}), topics)
    assert isinstance(first, CompactAssignment)
    spec = GroupSpec.of({m: MemberSpec(sub, first.view(m), rack_id="r") for m in list(first)[1:]}, first)
    data = pickle.dumps(spec)
    assert len(data) < 4 * len(first.owner) + 4000  # the owner array, not a frozenset per member
    back = pickle.loads(data)
    assert back.current is not None and all(s.assigned_partitions.source is back.current
                                            for s in back.members.values())
    assert as_dicts(compact_assign(back, topics)) == as_dicts(compact_assign(spec, topics))
