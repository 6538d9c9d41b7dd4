"""`uniform` on heterogeneous groups: the shortcuts (isolated classes, results fed back as arrays) give
exactly the result of Kafka's steps run over all topics together, step after step of joins, leaves and
subscription changes. (Kafka's steps themselves: tests/conformance, and the jar comparison in the README.)"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.assignors.api import GroupSpec, MemberSpec, StaticTopicDescriber, SubscriptionType
from groupcoord.assignors.uniform import UniformAssignor
from groupcoord.assignors.uniform_heterogeneous import HetView, assign_heterogeneous

UNIFORM = UniformAssignor()


def plain(group: GroupSpec) -> GroupSpec:
    """The same group with every current assignment as a plain dict."""
    return GroupSpec({m: MemberSpec(s.subscribed_topic_ids, dict(s.assigned_partitions))
                      for m, s in group.members.items()}, group.subscription_type)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counts=st.lists(st.integers(0, 12), min_size=1, max_size=5),
    classes=st.lists(st.frozensets(st.integers(0, 4), min_size=1), min_size=1, max_size=3),
    first=st.lists(st.integers(0, 2), min_size=1, max_size=8),
    steps=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30), st.integers(0, 2)), max_size=6),
)
def test_shortcuts_give_kafkas_steps_results(
    counts: list[int], classes: list[frozenset[int]], first: list[int], steps: list[tuple[int, int, int]]
) -> None:
    names = [f"t{i}" for i in range(len(counts))]
    topics = StaticTopicDescriber(dict(zip(names, counts, strict=True)))
    subs = [frozenset(names[i % len(names)] for i in c) for c in classes]
    members = {f"m{i:02d}": MemberSpec(subs[k % len(subs)]) for i, k in enumerate(first)}
    kind = SubscriptionType.HETEROGENEOUS
    for n, (action, pick, k) in enumerate([(0, 0, 0), *steps]):
        if action == 1:
            members[f"j{n}"] = MemberSpec(subs[k % len(subs)])
        elif action == 2 and len(members) > 1:
            victim = sorted(members)[pick % len(members)]
            if k:
                members[victim] = MemberSpec(subs[k % len(subs)], members[victim].assigned_partitions)
            else:
                del members[victim]
        spec = GroupSpec(members, kind)
        got = UNIFORM.assign(spec, topics)
        assert got == assign_heterogeneous(plain(spec), topics, shortcuts=False)
        members = {m: MemberSpec(s.subscribed_topic_ids, got[m]) for m, s in members.items()}


def test_unchanged_members_get_their_mappings_back() -> None:
    topics = StaticTopicDescriber({f"t{i}": 20 for i in range(10)})
    a, b = frozenset(f"t{i}" for i in range(5)), frozenset(f"t{i}" for i in range(5, 10))
    group = GroupSpec.of({f"m{i}": MemberSpec(a if i % 2 else b) for i in range(10)})
    first = UNIFORM.assign(group, topics)
    assert all(isinstance(v, HetView) for v in first.values())
    again = UNIFORM.assign(GroupSpec.of({m: MemberSpec(s.subscribed_topic_ids, first[m])
                                         for m, s in group.members.items()}), topics)
    assert all(again[m] is first[m] for m in first)


def test_views_of_different_results_claiming_one_partition_leave_it_to_the_first_member() -> None:
    topics = StaticTopicDescriber({"t0": 6, "t1": 4})
    a, b = frozenset({"t0"}), frozenset({"t0", "t1"})
    first = UNIFORM.assign(GroupSpec.of({"m1": MemberSpec(a), "m2": MemberSpec(b)}), topics)
    # m1 leaves, m2 takes its partitions; then m1's old view and m2's new one are fed back together
    second = UNIFORM.assign(GroupSpec.of({"m2": MemberSpec(b, first["m2"]), "m3": MemberSpec(a)}), topics)
    stale = GroupSpec.of({"m1": MemberSpec(a, first["m1"]), "m2": MemberSpec(b, second["m2"]),
                          "m3": MemberSpec(a, second["m3"])})
    got = UNIFORM.assign(stale, topics)
    claimed = [(t, p) for v in got.values() for t, ps in v.items() for p in ps]
    assert len(claimed) == len(set(claimed)) == 10
    assert got == assign_heterogeneous(plain(stale), topics, shortcuts=False)
