"""Shared helpers for the ported UniformAssignor tests: Kafka's topic ids, so topic order matches Kafka's."""

from __future__ import annotations

from collections.abc import Mapping

from groupcoord.assignors._java_order import hash_set_order
from groupcoord.assignors.api import GroupAssignment, GroupSpec, MemberSpec, StaticTopicDescriber, SubscriptionType
from groupcoord.assignors.uniform import UniformAssignor

UNIFORM = UniformAssignor()
T1 = "T1-A4s3VTwiI5CTbEp6POw"
T2 = "T2-B4s3VTwiI5YHbPp6YUe"
T3 = "T3-CU8fVTLCz5YMkLoDQsa"
T4 = "T4-Tw9fVTLCz5HbPp6YQsa"
A, B, C = "A", "B", "C"
Plan = Mapping[str, Mapping[str, tuple[int, ...]]]


def spec(topics: tuple[str, ...], current: Mapping[str, tuple[int, ...]] | None = None,
         rack_id: str | None = None) -> MemberSpec:
    """A member; `current` in the order given, as Kafka's `mkOrderedAssignment` (a LinkedHashMap)."""
    return MemberSpec(frozenset(topics), {t: frozenset(ps) for t, ps in (current or {}).items()}, rack_id)


def hashed(current: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """`current` in the iteration order of Kafka's `mkAssignment` (a HashMap keyed by topic id)."""
    return {t: current[t] for t in hash_set_order(list(current))}


def assign(members: Mapping[str, MemberSpec], counts: Mapping[str, int],
           kind: SubscriptionType | None = None) -> GroupAssignment:
    """Kafka's tests name the subscription type; None derives it from the subscriptions."""
    group = GroupSpec.of(dict(members)) if kind is None else GroupSpec(dict(members), kind)
    return UNIFORM.assign(group, StaticTopicDescriber(dict(counts)))


def norm(out: GroupAssignment) -> dict[str, dict[str, frozenset[int]]]:
    """Members that got nothing are left out, as Kafka's assignment leaves them empty or absent."""
    flat = {m: {t: ps for t, ps in a.items() if ps} for m, a in out.items()}
    return {m: a for m, a in flat.items() if a}


def expect(plan: Plan) -> dict[str, dict[str, frozenset[int]]]:
    full = {m: {t: frozenset(ps) for t, ps in a.items() if ps} for m, a in plan.items()}
    return {m: a for m, a in full.items() if a}


def check_valid_and_balanced(members: Mapping[str, MemberSpec], out: GroupAssignment) -> None:
    """Kafka's checkValidityAndBalance: subscribed topics only, no partition twice, sizes within one."""
    seen: set[tuple[str, int]] = set()
    sizes = []
    for m, a in out.items():
        for t, ps in a.items():
            assert not ps or t in members[m].subscribed_topic_ids
            for p in ps:
                assert (t, p) not in seen
                seen.add((t, p))
        sizes.append(sum(len(ps) for ps in a.values()))
    assert not sizes or max(sizes) - min(sizes) <= 1
