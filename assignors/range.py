"""`range`: contiguous ranges per topic (Kafka's RangeAssignor, server- and client-side).

Per topic, its subscribers take consecutive ranges, the first `count % n` one partition larger. Subscribers
are ordered as Kafka's RangeAssignor orders them: static members first, by instance id, then the others by
member id, so a static member replaced under a new member id keeps its range. A subscription to a topic
that does not exist is an error, as Kafka's PartitionAssignorException. When every member subscribes to
the same topics with equal partition counts, each member gets the same partition numbers of every topic
(co-partitioning), which is what joins of keyed topics need. Not sticky and not rack-aware (Kafka 4.4's
is neither): either would break the contiguity users pick this assignor for.
Topics with the same subscribers and count share one computation and the same frozensets.
"""

from __future__ import annotations

from groupcoord.assignors._layout import subscription_classes
from groupcoord.assignors.api import AssignorError, GroupAssignment, GroupSpec, LagSnapshot, MemberSpec, TopicDescriber


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


def _order(member_id: str, spec: MemberSpec) -> tuple[bool, str]:
    """Kafka's sortMemberIds: static members (by instance id) before dynamic ones (by member id)."""
    return (False, spec.instance_id) if spec.instance_id is not None else (True, member_id)


class RangeAssignor:
    name = "range"

    def assign(
        self, group: GroupSpec, topics: TopicDescriber, lag: LagSnapshot | None = None
    ) -> GroupAssignment:
        members = group.members
        if any(s.instance_id is not None for s in members.values()):
            member_ids = sorted(members, key=lambda m: _order(m, members[m]))
        else:
            member_ids = sorted(members)
        rank: dict[str, int] = {}
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
            if count < 0:
                raise AssignorError("a member is subscribed to a topic that does not exist")
            if count > 0:
                batches.setdefault((tuple(classes_of_topic[t]), count), []).append(t)
        for (classes, count), tids in batches.items():
            if len(classes) == 1:
                subscribers = members_of_class[classes[0]]  # already in order
            else:
                if not rank:
                    rank = {m: i for i, m in enumerate(member_ids)}
                subscribers = sorted((m for k in classes for m in members_of_class[k]), key=rank.__getitem__)
            for m, block in zip(subscribers, range_blocks(count, len(subscribers)), strict=True):
                if block:
                    out[m].update(dict.fromkeys(tids, block))
        return dict(out)
