"""`uniform` for heterogeneous groups: Kafka 4.4's UniformHeterogeneousAssignmentBuilder, step by step.

Why mirror it: which partitions stay, and which move where, follow from the builder's visiting orders and
tie-breaks, and users moving from Kafka expect the broker's answer. The builder (Kafka's):
1. Members are numbered in the member map's order (`_java_order`). Each member keeps its owned partitions
   of topics it still subscribes to, and drops the rest.
2. Topics are sorted by partitions per subscriber (descending), then subscriber count (ascending), then
   topic id (`Uuid.compareTo`). Each topic's unowned partitions, ascending, go one by one to its least
   loaded subscriber: subscribers sorted by (partitions held, member number); the least loaded range
   fills level by level, widening as it reaches the next members' count.
3. Balancing: up to 16 passes over the topics with two or more subscribers, in the same order, until a
   full pass moves nothing. Within a topic the most loaded subscribers (from the end of the sorted order)
   give their highest-numbered partition of the topic to the least loaded one, until the two ranges'
   counts are within one. Racks are ignored, as in Kafka.

Kafka's builder throws on ownership it cannot represent (a partition beyond the topic's count); such
ownership is dropped here first, and a partition owned twice stays with its first owner in member order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from assignors._java_order import hash_map_member_order, uuid_sort_key
from assignors.api import AssignorError, GroupAssignment, GroupSpec, MemberAssignment, TopicDescriber

MAX_ITERATION_COUNT = 16


class _Balancer:
    """Kafka's MemberAssignmentBalancer: the least loaded range grows rightwards over the sorted
    subscribers, the most loaded range leftwards."""

    __slots__ = ("least_count", "least_end", "most_count", "most_end", "most_start", "next_least",
                 "next_most", "order", "sizes")

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.order: list[int] = []
        self.least_end = self.least_count = self.next_least = 0
        self.most_start = self.most_end = self.most_count = self.next_most = 0

    def initialize(self, members: Sequence[int]) -> int:
        sizes = self.sizes
        order = sorted(members, key=lambda i: (sizes[i], i))
        self.order = order
        self.least_end = 0
        self.least_count = sizes[order[0]] - 1
        self.next_least = 0
        n = len(order)
        self.most_start = n
        self.most_end = n
        self.most_count = sizes[order[-1]] + 1
        self.next_most = n - 1
        return sizes[order[-1]] - sizes[order[0]]

    def next_least_loaded(self) -> int:
        order, sizes = self.order, self.sizes
        if self.next_least >= self.least_end:
            self.least_count += 1
            end, n, level = self.least_end, len(order), self.least_count
            while end < n and sizes[order[end]] == level:
                end += 1
            self.least_end = end
            self.next_least = 0
        member = order[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        order, sizes = self.order, self.sizes
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                self.most_count = sizes[order[self.most_start - 1]]
            else:
                self.most_count -= 1
            start, level = self.most_start, self.most_count
            while start > 0 and sizes[order[start - 1]] == level:
                start -= 1
            self.most_start = start
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = order[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        order = self.order
        i, j = self.next_most + 1, self.most_end - 1
        order[i], order[j] = order[j], order[i]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


class _Builder:
    def __init__(self, group: GroupSpec, topics: TopicDescriber) -> None:
        self.group = group
        self.member_ids = hash_map_member_order(group.members, len(group.members))
        self.subscribers: dict[str, list[int]] = {}
        self.counts: dict[str, int] = {}
        for index, m in enumerate(self.member_ids):
            for t in group.members[m].subscribed_topic_ids:
                subs = self.subscribers.get(t)
                if subs is None:
                    c = topics.partition_count(t)
                    if c < 0:
                        raise AssignorError(
                            "members are subscribed to a topic that does not exist in the topic metadata")
                    self.counts[t] = c
                    subs = self.subscribers[t] = []
                subs.append(index)
        self.sizes = [0] * len(self.member_ids)
        self.owners = {t: [-1] * c for t, c in self.counts.items()}
        # per member: the mapping given (unchanged) or a dict of sets being edited
        self.out: list[MemberAssignment | dict[str, set[int]]] = []
        self.edited = [False] * len(self.member_ids)

    def topic_key(self) -> Callable[[str], tuple[float, int, tuple[int, int, str]]]:
        counts, subscribers = self.counts, self.subscribers
        return lambda t: (-counts[t] / len(subscribers[t]), len(subscribers[t]), uuid_sort_key(t))

    def revoke_unsubscribed(self) -> None:
        """Kafka's maybeRevokePartitions (plus dropping what Kafka could not represent)."""
        owners, sizes = self.owners, self.sizes
        for index, m in enumerate(self.member_ids):
            spec = self.group.members[m]
            old = spec.assigned_partitions
            subs = spec.subscribed_topic_ids
            new: dict[str, set[int]] | None = None
            for t, ps in old.items():
                topic_owners = owners.get(t) if t in subs else None
                if topic_owners is None:
                    if new is None:
                        new = {k: set(v) for k, v in old.items()}
                    del new[t]
                    continue
                n = len(topic_owners)
                for p in ps:
                    if 0 <= p < n and topic_owners[p] == -1:
                        topic_owners[p] = index
                        sizes[index] += 1
                    else:
                        if new is None:
                            new = {k: set(v) for k, v in old.items()}
                        new[t].discard(p)
                        if not new[t]:
                            del new[t]
            if new is None:
                self.out.append(old)
            else:
                self.out.append(new)
                self.edited[index] = True

    def _editable(self, index: int) -> dict[str, set[int]]:
        a = self.out[index]
        if not self.edited[index]:
            a = {t: set(ps) for t, ps in a.items()}
            self.out[index] = a
            self.edited[index] = True
        assert isinstance(a, dict)
        return a  # type: ignore[return-value]

    def assign_partition(self, t: str, p: int, index: int) -> None:
        topic_owners = self.owners[t]
        old = topic_owners[p]
        if old != -1:
            a = self._editable(old)
            ps = a.get(t)
            if ps is not None:
                ps.discard(p)
                if not ps:
                    del a[t]
            self.sizes[old] -= 1
        self._editable(index).setdefault(t, set()).add(p)
        topic_owners[p] = index
        self.sizes[index] += 1

    def assign_remaining(self) -> None:
        unassigned = {t: [p for p, o in enumerate(own) if o == -1] for t, own in self.owners.items()}
        balancer = _Balancer(self.sizes)
        for t in sorted((t for t, ps in unassigned.items() if ps), key=self.topic_key()):
            balancer.initialize(self.subscribers[t])
            for p in unassigned[t]:
                self.assign_partition(t, p, balancer.next_least_loaded())

    def balance(self) -> None:
        topics = sorted((t for t, s in self.subscribers.items() if len(s) >= 2), key=self.topic_key())
        if not topics:
            return
        balancer = _Balancer(self.sizes)
        last = -1
        for _ in range(MAX_ITERATION_COUNT):
            for i, t in enumerate(topics):
                if i == last:
                    return
                moved = self.balance_topic(t, balancer)
                if moved > 0 or last == -1:
                    last = i

    def balance_topic(self, t: str, balancer: _Balancer) -> int:
        if balancer.initialize(self.subscribers[t]) <= 1:
            return 0
        owners = self.owners[t]
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, p in enumerate(partitions):
            o = owners[p]
            start.setdefault(o, i)
            end[o] = i + 1
        moved = 0
        while not balancer.is_balanced():
            most = -1
            while True:
                most = balancer.next_most_loaded()
                if most == -1:
                    break
                if most not in end or end[most] - start[most] <= 0:
                    balancer.exclude_most_loaded()
                    continue
                break
            if most == -1:
                break
            p = partitions[end[most] - 1]
            end[most] -= 1
            least = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self.assign_partition(t, p, least)
            moved += 1
        return moved

    def result(self) -> GroupAssignment:
        out: GroupAssignment = {}
        for index, m in enumerate(self.member_ids):
            a = self.out[index]
            out[m] = {t: frozenset(ps) for t, ps in a.items() if ps} if self.edited[index] else a  # type: ignore[misc]
        return out


def assign_heterogeneous(group: GroupSpec, topics: TopicDescriber) -> GroupAssignment:
    if not group.members:
        return {}
    b = _Builder(group, topics)
    b.revoke_unsubscribed()
    if b.subscribers:
        b.assign_remaining()
        b.balance()
    return b.result()
