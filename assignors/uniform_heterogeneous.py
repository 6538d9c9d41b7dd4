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

Speed (the steps are Kafka's; only their bookkeeping differs): partitions are numbered globally and owners
kept in one array; results are `HetView`s over that numbering, built into dicts only when read, and a
result fed back is read from its arrays. A subscription class whose topics no other member reads is
"isolated": its members' counts change only through its own topics, so it is assigned and balanced on
its own (Kafka's passes over the other topics never touch it), and when its counts are within one
(every topic balanced) Kafka's balancing moves nothing there and is skipped.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from groupcoord.assignors._java_order import hash_map_member_order, member_map_order, uuid_sort_key
from groupcoord.assignors._lazy_view import LazyAssignmentView
from groupcoord.assignors.api import AssignorError, GroupAssignment, GroupSpec, MemberAssignment, TopicDescriber

MAX_ITERATION_COUNT = 16
IntArray = npt.NDArray[np.int64]


class Numbering:
    """Topics (by id) and the first global index of each; shared by a result's views."""

    __slots__ = ("base", "index", "topics")

    def __init__(self, topics: list[str], counts: Sequence[int]) -> None:
        self.topics = topics
        self.base = [0]
        for c in counts:
            self.base.append(self.base[-1] + c)
        self.index = {t: i for i, t in enumerate(topics)}

    def same_as(self, other: Numbering) -> bool:
        return self is other or (self.topics == other.topics and self.base == other.base)


class HetView(LazyAssignmentView):
    """One member's result as sorted global partition numbers; the topic -> partitions mapping is built
    on first read (pickles as a plain dict)."""

    __slots__ = ("numbering", "parts", "subscription")

    def __init__(self, numbering: Numbering, parts: IntArray, subscription: frozenset[str]) -> None:
        super().__init__()
        self.numbering = numbering
        self.parts = parts
        self.subscription = subscription  # the member's, when made: every topic here is in it

    def _build(self) -> dict[str, frozenset[int]]:
        d: dict[str, frozenset[int]] = {}
        base, topics = self.numbering.base, self.numbering.topics
        parts = self.parts.tolist()
        i = 0
        while i < len(parts):
            t = bisect_right(base, parts[i]) - 1
            j = bisect_right(parts, base[t + 1] - 1, i)
            d[topics[t]] = frozenset(p - base[t] for p in parts[i:j])
            i = j
        if len(d) > 1:
            d = {t: d[t] for t in member_map_order(d)}  # as Kafka's record of it, read back
        return d

    def __bool__(self) -> bool:
        return len(self.parts) > 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HetView) and other.numbering.same_as(self.numbering):
            return bool(np.array_equal(other.parts, self.parts))
        return dict(self._mapping()) == other if isinstance(other, Mapping) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HetView({self._mapping()!r})"

    def __reduce__(self) -> tuple[type, tuple[dict[str, frozenset[int]]]]:
        return dict, (dict(self._mapping()),)


def _shared_numbering(numbering: Numbering, group: GroupSpec) -> Numbering:
    """The numbering of the views fed back, when it is the same: then views are compared by identity."""
    for spec in group.members.values():
        a = spec.assigned_partitions
        if type(a) is HetView:
            return a.numbering if a.numbering.same_as(numbering) else numbering
    return numbering


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

    def initialize(self, members: list[int]) -> int:
        sizes = self.sizes
        order = sorted(members, key=sizes.__getitem__)  # members ascending: ties by member number
        self.order = order
        self.least_end = 0
        self.least_count = sizes[order[0]] - 1
        self.next_least = 0
        n = len(order)
        self.most_start = self.most_end = n
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
        # members by subscription class first: topics' subscriber lists are built per class, not member
        self.classes: dict[frozenset[str], list[int]] = {}
        for index, m in enumerate(self.member_ids):
            self.classes.setdefault(group.members[m].subscribed_topic_ids, []).append(index)
        by_topic: dict[str, list[list[int]]] = {}
        for sub, members in self.classes.items():
            for t in sub:
                by_topic.setdefault(t, []).append(members)
        counts: dict[str, int] = {}
        subscribers: dict[str, list[int]] = {}
        for t, lists in by_topic.items():
            c = topics.partition_count(t)
            if c < 0:
                raise AssignorError("members are subscribed to a topic that does not exist in the topic metadata")
            counts[t] = c
            subscribers[t] = lists[0] if len(lists) == 1 else sorted(i for ms in lists for i in ms)
        self.subscribers = subscribers
        self.counts = counts
        order = sorted(counts, key=uuid_sort_key)
        self.numbering = _shared_numbering(Numbering(order, [counts[t] for t in order]), group)
        self.owners: IntArray = np.full(self.numbering.base[-1], -1, dtype=np.int64)
        self.sizes = [0] * len(self.member_ids)
        self.changed = [False] * len(self.member_ids)
        self.kept: list[MemberAssignment] = []

    def sort_topics(self, topics: list[str]) -> list[str]:
        counts, subscribers = self.counts, self.subscribers
        return sorted(topics, key=lambda t: (-counts[t] / len(subscribers[t]), len(subscribers[t]),
                                             uuid_sort_key(t)))

    def revoke_unsubscribed(self) -> None:
        """Kafka's maybeRevokePartitions: owners and counts from each member's current assignment, topics
        no longer subscribed dropped (plus what Kafka could not represent). This assignor's own results
        fed back are loaded from their arrays, before any other mapping."""
        owners, sizes, numbering = self.owners, self.sizes, self.numbering
        self.kept = [self.group.members[m].assigned_partitions for m in self.member_ids]
        views = [i for i, a in enumerate(self.kept) if type(a) is HetView and a.numbering is numbering]
        loaded = 0
        for index in views:
            parts = self.kept[index].parts  # type: ignore[attr-defined]
            owners[parts] = index
            sizes[index] = len(parts)
            loaded += len(parts)
        if loaded != int(np.count_nonzero(owners != -1)):
            self._reload_views_without_doubles(views)
        is_view = set(views)
        base, position = numbering.base, numbering.index
        for index, m in enumerate(self.member_ids):
            if index in is_view:
                continue
            subs = self.group.members[m].subscribed_topic_ids
            for t, ps in self.kept[index].items():
                k = position.get(t) if t in subs else None
                if k is None:
                    self.changed[index] = True
                    continue
                first, n = base[k], base[k + 1] - base[k]
                for p in ps:
                    if 0 <= p < n and owners[first + p] == -1:
                        owners[first + p] = index
                        sizes[index] += 1
                    else:
                        self.changed[index] = True
        for index in views:
            old = self.kept[index]
            assert type(old) is HetView
            subs = self.group.members[self.member_ids[index]].subscribed_topic_ids
            if not (subs is old.subscription or subs >= old.subscription or old.keys() <= subs):
                self._drop_unsubscribed(index, subs)

    def _reload_views_without_doubles(self, views: list[int]) -> None:
        """Views fed back claimed a partition twice (views of different results): load them again one by
        one, the earlier member in order keeping a doubly owned partition."""
        owners, sizes = self.owners, self.sizes
        owners.fill(-1)
        for index in views:
            old = self.kept[index]
            assert type(old) is HetView
            parts = old.parts[owners[old.parts] == -1]
            if len(parts) != len(old.parts):
                self.changed[index] = True
            owners[parts] = index
            sizes[index] = len(parts)

    def _drop_unsubscribed(self, index: int, subs: frozenset[str]) -> None:
        base, position = self.numbering.base, self.numbering.index
        for t in self.kept[index]:
            if t not in subs:
                k = position[t]
                seg = self.owners[base[k]:base[k + 1]]
                self.sizes[index] -= int((seg == index).sum())
                seg[seg == index] = -1
        self.changed[index] = True

    def assign_partition(self, g: int, index: int) -> None:
        old = int(self.owners[g])
        if old != -1:
            self.sizes[old] -= 1
            self.changed[old] = True
        self.owners[g] = index
        self.sizes[index] += 1
        self.changed[index] = True

    # --- assigning unowned partitions -------------------------------------------------------------

    def free_by_topic(self) -> tuple[IntArray, list[int]]:
        """The unowned partitions (global numbers, ascending) and where each topic's start among them."""
        free = np.flatnonzero(self.owners == -1)
        return free, np.searchsorted(free, self.numbering.base).tolist()

    def assign_remaining(self, topics: list[str]) -> None:
        position = self.numbering.index
        free, at = self.free_by_topic()
        if not len(free):
            return
        balancer = _Balancer(self.sizes)
        for t in self.sort_topics(topics):
            k = position[t]
            if at[k] == at[k + 1]:
                continue
            balancer.initialize(self.subscribers[t])
            for g in free[at[k]:at[k + 1]].tolist():
                self.assign_partition(g, balancer.next_least_loaded())

    def assign_remaining_isolated(self, topics: list[str], members: list[int]) -> None:
        """The same, for a class no other member shares topics with, while its members hold at most two
        adjacent counts and each topic's unowned partitions fit in the lower level: then a topic's
        partitions go to the first members of the lower level (member order), who move up a level."""
        sizes, position, owners = self.sizes, self.numbering.index, self.owners
        changed = self.changed
        free, at = self.free_by_topic()
        if not len(free):
            return
        levels = sorted({sizes[i] for i in members})
        if len(levels) > 2 or (len(levels) == 2 and levels[1] != levels[0] + 1):
            self.assign_remaining(topics)
            return
        low_level = levels[0]
        low = [i for i in members if sizes[i] == low_level]
        high = [i for i in members if sizes[i] != low_level]
        ordered = self.sort_topics(topics)
        for n, t in enumerate(ordered):
            k = position[t]
            m = at[k + 1] - at[k]
            if not m:
                continue
            if m > len(low):
                for i in low:
                    sizes[i] = low_level
                for i in high:
                    sizes[i] = low_level + 1
                self.assign_remaining(ordered[n:])
                return
            taken = low[:m]
            owners[free[at[k]:at[k + 1]]] = taken
            for i in taken:
                changed[i] = True
            del low[:m]
            high = sorted(high + taken)
            if not low:
                low, high, low_level = high, [], low_level + 1
        for i in low:
            sizes[i] = low_level
        for i in high:
            sizes[i] = low_level + 1

    # --- balancing ----------------------------------------------------------------------------------

    def balance(self, topics: list[str]) -> None:
        candidates = self.sort_topics([t for t in topics if len(self.subscribers[t]) >= 2])
        if not candidates:
            return
        balancer = _Balancer(self.sizes)
        last = -1
        for _ in range(MAX_ITERATION_COUNT):
            for i, t in enumerate(candidates):
                if i == last:
                    return
                moved = self.balance_topic(t, balancer)
                if moved > 0 or last == -1:
                    last = i

    def balance_topic(self, t: str, balancer: _Balancer) -> int:
        if balancer.initialize(self.subscribers[t]) <= 1:
            return 0
        k = self.numbering.index[t]
        first = self.numbering.base[k]
        seg = self.owners[first:self.numbering.base[k + 1]]
        partitions = np.argsort(seg, kind="stable").tolist()  # by (owner, partition)
        owner_of = seg.tolist()
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, p in enumerate(partitions):
            o = owner_of[p]
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
            self.assign_partition(first + p, least)
            moved += 1
        return moved

    # --- result -------------------------------------------------------------------------------------

    def result(self) -> GroupAssignment:
        owners = self.owners
        by_owner = np.argsort(owners, kind="stable")
        bounds = np.searchsorted(owners[by_owner], np.arange(-1, len(self.member_ids) + 1)).tolist()
        out: dict[str, MemberAssignment] = {}
        for index, m in enumerate(self.member_ids):
            if self.changed[index]:
                out[m] = HetView(self.numbering, by_owner[bounds[index + 1]:bounds[index + 2]],
                                 self.group.members[m].subscribed_topic_ids)
            else:
                out[m] = self.kept[index]
        return out


def _isolated_classes(b: _Builder) -> tuple[list[tuple[list[str], list[int]]], list[str]]:
    """(topics, members) of each isolated subscription class, and the topics of all the others."""
    classes: dict[frozenset[str], list[int]] = {}
    for index, m in enumerate(b.member_ids):
        classes.setdefault(b.group.members[m].subscribed_topic_ids, []).append(index)
    isolated: list[tuple[list[str], list[int]]] = []
    taken: set[str] = set()
    for sub, members in classes.items():
        if sub and all(len(b.subscribers[t]) == len(members) for t in sub):
            isolated.append((list(sub), members))
            taken.update(sub)
    return isolated, [t for t in b.counts if t not in taken]


def assign_heterogeneous(group: GroupSpec, topics: TopicDescriber, shortcuts: bool = True) -> GroupAssignment:
    """`shortcuts=False` runs Kafka's steps over all topics together (the tests' reference)."""
    if not group.members:
        return {}
    b = _Builder(group, topics)
    b.revoke_unsubscribed()
    if not b.counts:
        return b.result()
    if not shortcuts:
        b.assign_remaining(list(b.counts))
        b.balance(list(b.counts))
        return b.result()
    isolated, rest = _isolated_classes(b)
    for class_topics, members in isolated:
        b.assign_remaining_isolated(class_topics, members)
        sizes = [b.sizes[i] for i in members]
        if max(sizes) - min(sizes) > 1:
            b.balance(class_topics)
    if rest:
        b.assign_remaining(rest)
        b.balance(rest)
    return b.result()
