"""Hypothesis strategies and checks shared by the assignor tests."""

from __future__ import annotations

import random
from collections.abc import Mapping

from hypothesis import strategies as st

from groupcoord.assignors.api import (
    GroupAssignment,
    GroupSpec,
    LagSnapshot,
    MemberSpec,
    PartitionOffsets,
    StaticTopicDescriber,
)

RACKS = ("rack-a", "rack-b", "rack-c")


@st.composite
def scenarios(
    draw: st.DrawFn, homogeneous: bool = False, max_members: int = 7, with_racks: bool = True,
    missing_topics: bool = True,
) -> tuple[GroupSpec, StaticTopicDescriber, LagSnapshot]:
    """A group with arbitrary (possibly stale, overlapping or invalid) current assignments, topic metadata
    that may lack some subscribed topics (unless `missing_topics` is false: `range` and `uniform` refuse
    such subscriptions, as Kafka's do, and the coordinator never sends them), optional racks and a lag
    snapshot. Few, large draws: generation dominates the cost of these tests."""
    n_topics = draw(st.integers(1, 5))
    topic_ids = [f"t{i}" for i in range(n_topics)]
    raw_counts = draw(st.lists(st.integers(-1, 9), min_size=n_topics, max_size=n_topics))
    known = {t: c for t, c in zip(topic_ids, raw_counts, strict=True) if c >= 0}  # -1: topic vanished
    total = sum(known.values())
    racks: dict[str, tuple[frozenset[str], ...]] = {}
    racks_on = with_racks and draw(st.booleans())
    if racks_on:
        flat = draw(st.lists(st.sets(st.sampled_from(RACKS), max_size=2), min_size=total, max_size=total))
        it = iter(flat)
        racks = {t: tuple(frozenset(next(it)) for _ in range(c)) for t, c in known.items()}
    describer = StaticTopicDescriber(known, racks)
    subscribable = topic_ids if missing_topics else list(known)
    if subscribable:
        topic_sets = st.frozensets(st.sampled_from(subscribable))
        common = draw(st.frozensets(st.sampled_from(subscribable), min_size=1))
    else:
        topic_sets = st.just(frozenset())
        common = frozenset()
    n_members = draw(st.integers(1, max_members))
    member_draws = draw(
        st.lists(
            st.tuples(
                topic_sets,
                st.dictionaries(st.sampled_from(topic_ids), st.frozensets(st.integers(0, 10), max_size=4)),
                st.sampled_from((None, *RACKS)),
            ),
            min_size=n_members,
            max_size=n_members,
        )
    )
    members = {
        f"m{i:02d}": MemberSpec(common if homogeneous else subs, assigned, rack if racks_on else None)
        for i, (subs, assigned, rack) in enumerate(member_draws)
    }
    offset_draws = draw(
        st.lists(
            st.tuples(st.integers(0, 1000), st.integers(0, 1000), st.integers(-300, 1000)),
            min_size=total,
            max_size=total,
        )
    )
    offsets = {}
    it_off = iter(offset_draws)
    for t, c in known.items():
        for p in range(c):
            end, start, committed = next(it_off)
            if committed >= -100:  # below: no offsets known for this partition
                start = min(start, end)
                offsets[(t, p)] = PartitionOffsets(end, None if committed < 0 else committed, start)
    reset = draw(st.sampled_from(("latest", "earliest")))
    return GroupSpec.of(members), describer, LagSnapshot(offsets, reset)


def subscribed_partitions(group: GroupSpec, describer: StaticTopicDescriber) -> set[tuple[str, int]]:
    return {
        (t, p)
        for m in group.members.values()
        for t in m.subscribed_topic_ids
        for p in range(max(0, describer.partition_count(t)))
    }


def check_valid(group: GroupSpec, describer: StaticTopicDescriber, out: GroupAssignment) -> None:
    """Every subscribed partition exactly once, only to a member subscribed to its topic."""
    assert set(out) == set(group.members)
    seen: list[tuple[str, int]] = []
    for m, topics in out.items():
        for t, ps in topics.items():
            assert t in group.members[m].subscribed_topic_ids, (m, t)
            assert isinstance(ps, frozenset)
            seen.extend((t, p) for p in ps)
    assert len(seen) == len(set(seen)), "a partition was assigned twice"
    assert set(seen) == subscribed_partitions(group, describer)


def counts(out: GroupAssignment) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in out.items()}


def check_balanced(group: GroupSpec, out: GroupAssignment) -> None:
    """No partition can move from its owner to another subscribed member with two fewer partitions."""
    n = counts(out)
    for m, topics in out.items():
        for t in topics:
            for other, spec in group.members.items():
                if t in spec.subscribed_topic_ids:
                    assert n[m] <= n[other] + 1, (m, other, n)


def owners(out: GroupAssignment) -> dict[tuple[str, int], str]:
    return {(t, p): m for m, a in out.items() for t, ps in a.items() for p in ps}


def moved(before: GroupAssignment, after: GroupAssignment) -> int:
    old = owners(before)
    return sum(1 for tp, m in owners(after).items() if tp in old and old[tp] != m)


def with_assignment(group: GroupSpec, out: Mapping[str, Mapping[str, frozenset[int]]]) -> GroupSpec:
    return GroupSpec.of(
        {
            m: MemberSpec(s.subscribed_topic_ids, dict(out.get(m, {})), s.rack_id, s.instance_id)
            for m, s in group.members.items()
        }
    )


def shuffled(group: GroupSpec, lag: LagSnapshot, seed: int) -> tuple[GroupSpec, LagSnapshot]:
    """The same input with every dict built in another key order."""
    rnd = random.Random(seed)
    names = list(group.members)
    rnd.shuffle(names)
    members = {}
    for m in names:
        s = group.members[m]
        keys = list(s.assigned_partitions)
        rnd.shuffle(keys)
        members[m] = MemberSpec(
            frozenset(rnd.sample(sorted(s.subscribed_topic_ids), len(s.subscribed_topic_ids))),
            {k: frozenset(rnd.sample(sorted(s.assigned_partitions[k]), len(s.assigned_partitions[k])))
             for k in keys},
            s.rack_id,
            s.instance_id,
        )
    items = list(lag.offsets.items())
    rnd.shuffle(items)
    return GroupSpec(members, group.subscription_type), LagSnapshot(dict(items), lag.auto_offset_reset)
