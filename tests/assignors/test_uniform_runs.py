"""`uniform`'s run path gives exactly the general path's results (Kafka's builder), step after step of joins
and leaves."""

from __future__ import annotations

import gc
import pickle

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.assignors.api import GroupSpec, MemberSpec, StaticTopicDescriber
from groupcoord.assignors.uniform import UniformAssignor
from groupcoord.assignors.uniform_homogeneous import assign_homogeneous
from groupcoord.assignors.uniform_runs import Lineage, MemberView, RunState

UNIFORM = UniformAssignor()


def plain(group: GroupSpec) -> GroupSpec:
    """The same group with every current assignment as plain dicts: forces the general path."""
    return GroupSpec.of({m: MemberSpec(s.subscribed_topic_ids, dict(s.assigned_partitions), s.rack_id)
                         for m, s in group.members.items()})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counts=st.lists(st.integers(0, 12), min_size=1, max_size=4),
    first=st.integers(1, 9),
    steps=st.lists(st.tuples(st.booleans(), st.integers(0, 30), st.integers(1, 3)), max_size=6),
)
def test_run_path_matches_general_path_across_joins_and_leaves(
    counts: list[int], first: int, steps: list[tuple[bool, int, int]]
) -> None:
    topics = StaticTopicDescriber({f"t{i}": c for i, c in enumerate(counts)})
    sub = frozenset(topics.partition_counts)
    names = [f"m{i:02d}" for i in range(first)]
    group = GroupSpec.of({m: MemberSpec(sub) for m in names})
    fresh_out = UNIFORM.assign(group, topics)
    assert fresh_out == assign_homogeneous(group, topics)
    current = dict(fresh_out)
    next_id = first
    for join, pick, k in steps:
        members = {m: MemberSpec(sub, current[m]) for m in current}
        if join:
            for _ in range(k):
                members[f"m{(next_id * 7919) % 97:02d}x{next_id}"] = MemberSpec(sub)
                next_id += 1
        else:
            for m in sorted(members)[pick % len(members):][:k]:
                if len(members) > 1:
                    del members[m]
        spec = GroupSpec.of(members)
        got = UNIFORM.assign(spec, topics)
        want = assign_homogeneous(plain(spec), topics)
        assert got == want
        assert all(isinstance(v, MemberView) for v in got.values())  # stayed on the run path
        current = dict(got)


def test_unchanged_members_get_their_view_objects_back() -> None:
    topics = StaticTopicDescriber({f"t{i}": 50 for i in range(20)})
    sub = frozenset(topics.partition_counts)
    names = [f"member{i}" for i in range(40)]
    before = UNIFORM.assign(GroupSpec.of({m: MemberSpec(sub) for m in names[:-1]}), topics)
    joined = {m: MemberSpec(sub, before[m]) for m in names[:-1]} | {"newMember": MemberSpec(sub)}
    after = UNIFORM.assign(GroupSpec.of(joined), topics)
    same = [m for m in names[:-1] if after[m] is before[m]]
    changed = [m for m in names[:-1] if after[m] != before[m]]
    assert len(same) + len(changed) == len(names) - 1
    assert len(changed) == 1000 % 39  # only the members that held one partition over the new floor give it up
    assert sum(len(ps) for ps in after["newMember"].values()) == 1000 // 40


def test_a_view_reads_and_pickles_as_a_plain_mapping() -> None:
    topics = StaticTopicDescriber({"a": 3, "b": 2})
    out = UNIFORM.assign(GroupSpec.of({"m1": MemberSpec(frozenset({"a", "b"}))}), topics)
    view = out["m1"]
    assert dict(view) == {"a": frozenset({0, 1, 2}), "b": frozenset({0, 1})}
    assert pickle.loads(pickle.dumps(view)) == view
    assert view == {"a": frozenset({0, 1, 2}), "b": frozenset({0, 1})}


def test_a_long_chain_of_results_keeps_only_a_few_states_alive() -> None:
    topics = StaticTopicDescriber({f"t{i}": 30 for i in range(10)})
    sub = frozenset(topics.partition_counts)
    current = dict(UNIFORM.assign(GroupSpec.of({f"m{i:03d}": MemberSpec(sub) for i in range(50)}), topics))
    for step in range(40):
        members = {m: MemberSpec(sub, a) for m, a in current.items()}
        if step % 2:
            del members[sorted(members)[step % len(members)]]
        else:
            members[f"n{step:03d}"] = MemberSpec(sub)
        current = dict(UNIFORM.assign(GroupSpec.of(members), topics))
        assert all(isinstance(v, MemberView) for v in current.values())
    gc.collect()
    assert sum(1 for o in gc.get_objects() if type(o) is RunState) <= Lineage.KEEP
