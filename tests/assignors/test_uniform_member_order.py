"""uniform reads a member's current topics in Kafka's order (a HashMap of topic ids), not in the order the
caller's mapping iterates in: the core hands it array-backed views whose order is the layout's."""

from __future__ import annotations

import uuid

from groupcoord.assignors.api import GroupSpec, MemberSpec, StaticTopicDescriber
from groupcoord.assignors.uniform import UniformAssignor


def test_uniform_gives_one_answer_whatever_order_a_members_topics_iterate_in() -> None:
    for seed in range(40):
        ids = [str(uuid.UUID(int=(seed * 7919 + k) * 2654435761 % (1 << 128))) for k in range(3)]
        topics = StaticTopicDescriber({ids[0]: 6, ids[1]: 3, ids[2]: 2})
        sub = frozenset(ids)
        owned = {t: frozenset(range(n)) for t, n in topics.partition_counts.items()}
        results = []
        for order in (ids, ids[::-1], [ids[1], ids[2], ids[0]]):
            spec = GroupSpec.of({"m1": MemberSpec(sub, {t: owned[t] for t in order}), "m2": MemberSpec(sub)})
            out = UniformAssignor().assign(spec, topics)
            results.append({m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()})
        assert results[0] == results[1] == results[2], seed
