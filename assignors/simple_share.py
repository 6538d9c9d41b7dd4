"""Kafka's `simple` share-group assignor (KIP-932): partitions may go to several members, balanced.

Share groups read a partition with several members at once (each record is locked to one member at a time
by the share-partition state), so the assignor spreads *members* over partitions as well as partitions over
members. Per pool of partitions (all subscribed partitions when every member subscribes to the same topics,
else each topic on its own, as Kafka's SimpleHeterogeneousAssignmentBuilder):

- sharing = ceil(members / partitions): how many members each partition gets (1 when partitions >= members);
- the sharing * partitions slots are split over the members so their counts differ by at most one;
- balance first, then stickiness: a member keeps what it had as long as neither its count nor the
  partition's sharing is over the target, and the rest is handed out.

Pure and deterministic: members and partitions are visited in sorted order, never in hash order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from groupcoord.assignors.api import (
    GroupAssignment,
    GroupSpec,
    LagSnapshot,
    MemberAssignment,
    SubscriptionType,
    TopicDescriber,
)

Partition = tuple[str, int]


class SimpleShareAssignor:
    name = "simple"

    def assign(self, group: GroupSpec, topics: TopicDescriber, lag: LagSnapshot | None = None) -> GroupAssignment:
        members = sorted(group.members)
        out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
        if not members:
            return {}
        if group.subscription_type is SubscriptionType.HOMOGENEOUS:
            subscribed = group.members[members[0]].subscribed_topic_ids
            pools = [(sorted(subscribed), members)]
        else:
            by_topic: dict[str, list[str]] = {}
            for m in members:
                for t in group.members[m].subscribed_topic_ids:
                    by_topic.setdefault(t, []).append(m)
            pools = [([t], ms) for t, ms in sorted(by_topic.items())]
        for topic_ids, pool_members in pools:
            partitions = [(t, p) for t in topic_ids for p in range(max(topics.partition_count(t), 0))]
            old = {m: group.members[m].assigned_partitions for m in pool_members}
            for m, parts in balance_pool(partitions, pool_members, old).items():
                for t, p in parts:
                    out[m].setdefault(t, set()).add(p)
        return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


def desired_counts(slots: int, members: int) -> list[int]:
    """`slots` split over `members` in order, each ceil(slots*(i+1)/m) - ceil(slots*i/m): counts differ by <= 1."""
    return [-(-slots * (i + 1) // members) - -(-slots * i // members) for i in range(members)]


def balance_pool(partitions: Sequence[Partition], members: Sequence[str],
                 old: Mapping[str, MemberAssignment]) -> dict[str, list[Partition]]:
    """One pool: every partition gets `sharing` members (all of them, when members < sharing is impossible),
    every member its desired count, keeping old assignments where the targets allow."""
    if not partitions or not members:
        return {m: [] for m in members}
    sharing = -(-len(members) // len(partitions))
    want = dict(zip(members, desired_counts(sharing * len(partitions), len(members)), strict=True))
    in_pool = set(partitions)
    order = {m: i for i, m in enumerate(members)}
    holders: dict[Partition, list[str]] = {tp: [] for tp in partitions}
    got: dict[str, list[Partition]] = {m: [] for m in members}
    # 1. Stickiness within the targets: keep old partitions up to the member's count and the partition's sharing.
    for m in members:
        kept = sorted((t, p) for t, ps in old.get(m, {}).items() for p in ps if (t, p) in in_pool)
        for tp in kept:
            if len(got[m]) < want[m] and len(holders[tp]) < sharing:
                holders[tp].append(m)
                got[m].append(tp)
    # 2. Hand out the rest: the least-shared partitions first, to the members that need most.
    for _ in range(sharing):
        for tp in sorted(partitions, key=lambda x: (len(holders[x]), x)):
            if len(holders[tp]) >= sharing:
                continue
            need = [m for m in members if len(got[m]) < want[m] and m not in holders[tp]]
            if not need:
                continue
            m = max(need, key=lambda x: (want[x] - len(got[x]), -order[x]))
            holders[tp].append(m)
            got[m].append(tp)
    _fill_stuck_slots(partitions, members, sharing, want, holders, got)
    return got


def _fill_stuck_slots(partitions: Sequence[Partition], members: Sequence[str], sharing: int, want: dict[str, int],
                      holders: dict[Partition, list[str]], got: dict[str, list[Partition]]) -> None:
    """The greedy pass can leave a partition short of `sharing` while every member still short of its count
    already holds it (Kafka's builder accepts that). Swap instead: a member X that does not hold the partition
    takes it and hands one of its own partitions Q to the short member M (which lacks Q). M gains one, X
    keeps its count, and Q keeps its sharing."""
    for tp in sorted(partitions):
        while len(holders[tp]) < sharing:
            short = [m for m in members if len(got[m]) < want[m]]
            swap = next(((m, x, q) for m in short for x in members if x not in holders[tp] and x != m
                         for q in sorted(got[x]) if m not in holders[q] and q != tp), None)
            if swap is None:
                break
            m, x, q = swap
            got[x].remove(q)
            holders[q].remove(x)
            got[x].append(tp)
            holders[tp].append(x)
            got[m].append(q)
            holders[q].append(m)
