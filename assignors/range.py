"""`range`: contiguous ranges per topic (Kafka's RangeAssignor, server- and client-side).

Per topic, its subscribers in member-id order take consecutive ranges, the first `count % n` one partition
larger. When every member subscribes to the same topics with equal partition counts, each member gets the
same partition numbers of every topic (co-partitioning), which is what joins of keyed topics need. Not
sticky and not rack-aware by design: either would break the contiguity users pick this assignor for.
Topics with the same subscribers and count share one computation and the same frozensets.
"""

from __future__ import annotations

from assignors._layout import subscription_classes
from assignors.api import GroupAssignment, GroupSpec, LagSnapshot, TopicDescriber


def range_blocks(count: int, n: int) -> list[frozenset[int]]:
    """The ranges for subscribers 0..n-1 of a topic with `count` partitions (empty ones included)."""
    q, extra = divmod(count, n)
    out = []
    start = 0
    for i in range(n):
        size = q + (1 if i < extra else 0)
        out.append(frozenset(range(start, start + size)))
        start += size
    return out


class RangeAssignor:
    name = "range"

    def assign(
        self, group: GroupSpec, topics: TopicDescriber, lag: LagSnapshot | None = None
    ) -> GroupAssignment:
        member_ids = sorted(group.members)
        specs = [group.members[m] for m in member_ids]
        member_class, class_subs = subscription_classes(group, specs)
        out: dict[str, dict[str, frozenset[int]]] = {m: {} for m in member_ids}
        if not member_ids:
            return dict(out)
        classes_of_topic: dict[str, list[int]] = {}
        for k, sub in enumerate(class_subs):
            for t in sub:
                classes_of_topic.setdefault(t, []).append(k)
        members_of_class: list[list[str]] = [[] for _ in class_subs]
        for m, k in zip(member_ids, member_class.tolist(), strict=True):
            members_of_class[k].append(m)
        # topics with the same subscribing classes and partition count share one set of ranges
        batches: dict[tuple[tuple[int, ...], int], list[str]] = {}
        for t in sorted(classes_of_topic):
            count = topics.partition_count(t)
            if count > 0:
                batches.setdefault((tuple(classes_of_topic[t]), count), []).append(t)
        for (classes, count), tids in batches.items():
            subscribers = sorted(m for k in classes for m in members_of_class[k])
            for m, block in zip(subscribers, range_blocks(count, len(subscribers)), strict=True):
                if block:
                    out[m].update(dict.fromkeys(tids, block))
        return dict(out)
