"""`uniform` for homogeneous groups, on any input: Kafka 4.4's UniformHomogeneousAssignmentBuilder.

Why mirror it step by step: which member keeps which partitions, and who receives the rest, is decided by
visiting order, and users moving from Kafka expect the broker's answer. The rules (Kafka's):
- P partitions over n members: each gets floor(P / n); E = P % n members get one more.
- Members are visited in the order of Kafka's member `HashMap` (`_java_order`), whatever the spec's
  order. A visited member takes one of the E extras while any remain, and keeps it if it fills it; a
  member that cannot fill it hands it on, unless only as many members are left as extras (so the extras
  go to members already owning more, else to the last ones).
- A member keeps its owned partitions (its mapping's topic order, partitions ascending) up to its quota
  and releases the rest; partitions of topics it no longer subscribes to are dropped.
- The partitions to hand out are those no member owns (topics in Kafka's `HashSet<Uuid>` order,
  partitions ascending), then the released ones in the order they were released; members below quota,
  in order, take them one after another.

A result iterates its topics as Kafka's record of it, read back, would (`member_map_order`): the order
the next run visits them in. Kafka's builder throws on an input it cannot complete (a partition owned
twice, or one beyond the topic's count); such ownership is dropped here first (the first owner in member
order keeps a doubly owned partition), so a valid input gives Kafka's answer and an invalid one a valid
answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from groupcoord.assignors._java_order import hash_map_member_order, hash_set_order, member_map_order
from groupcoord.assignors._layout import IntArray
from groupcoord.assignors.api import AssignorError, GroupAssignment, GroupSpec, MemberAssignment, TopicDescriber


def topic_counts(subscription: frozenset[str], topics: TopicDescriber) -> dict[str, int]:
    """Partition counts of the subscribed topics in Kafka's visiting order; an unknown topic is an error,
    as Kafka's PartitionAssignorException ("doesn't exist in the topic metadata")."""
    out: dict[str, int] = {}
    for t in hash_set_order(subscription):
        c = topics.partition_count(t)
        if c < 0:
            raise AssignorError("members are subscribed to a topic that does not exist in the topic metadata")
        out[t] = c
    return out


class Quotas:
    """Kafka's quota walk: P partitions over n members visited in order, each gets floor(P / n), and the
    first members that can fill one more take one of the P % n extras; a member that cannot fill its extra
    hands it on, unless only as many members are left as extras."""

    __slots__ = ("extra", "floor", "n")

    def __init__(self, total: int, n: int) -> None:
        self.n = n
        self.floor, self.extra = divmod(total, n)

    def quota(self) -> int:
        """The next member's quota, an extra included while any remain."""
        return self.floor + (self.extra > 0)

    def settle(self, index: int, left: int) -> int:
        """The member at visiting `index` kept partitions of its `quota()` and still needs `left`: what it
        will take from the unassigned ones (one fewer when it hands its extra on)."""
        has_extra = self.extra > 0
        if left > 0 and has_extra and self.n - index > self.extra:
            left -= 1
            has_extra = False
        if has_extra:
            self.extra -= 1
        return left

    def walk(self, owned: IntArray) -> tuple[IntArray, IntArray]:
        """The whole walk at once, from the start, for members (in visiting order) owning `owned` partitions
        they may keep: each one's `quota()` and what `settle` says it will take; the walk is not advanced.
        Why: member by member it is two calls per member, most of a run on 10,000 members of whom two move.
        While the extras last and none is forced, a member takes one exactly when it owns more than the floor;
        the walk turns at the first member with none left (then: the floor) or with as many members left as
        extras (then: every member to the end takes one)."""
        n, floor = self.n, self.floor
        full = owned > floor
        before = self.extra - np.concatenate(([0], np.cumsum(full[:-1])))  # extras left as each member comes
        index = np.arange(n)
        turns = np.flatnonzero((before <= 0) | (n - index <= before))
        turn = int(turns[0]) if len(turns) else n
        has_extra = index < turn
        if turn < n and before[turn] > 0:  # forced: the rest take one each, whatever they own
            has_extra[turn:] = True
        quota = floor + has_extra
        hands_on = has_extra & ~full & (index < turn)
        return quota, np.maximum(quota - owned, 0) - hands_on


def clean_owned(cur: MemberAssignment, counts: Mapping[str, int], seen: set[tuple[str, int]]) -> MemberAssignment:
    """One member's owned partitions with out-of-range ones and those in `seen` dropped (the very object
    given when nothing is); adds what it keeps to `seen`."""
    clean: dict[str, frozenset[int]] | None = None
    for t, ps in cur.items():
        n = counts.get(t)
        if n is None:
            continue  # not subscribed: dropped by the builder itself
        keep = [p for p in ps if 0 <= p < n and (t, p) not in seen]
        seen.update((t, p) for p in keep)
        if len(keep) != len(ps):
            if clean is None:
                clean = {k: frozenset(v) for k, v in cur.items()}
            clean[t] = frozenset(keep)
    return cur if clean is None else clean


def _valid_owned(group: GroupSpec, members: list[str], counts: Mapping[str, int]) -> dict[str, MemberAssignment]:
    """Each member's owned partitions with out-of-range and doubly owned ones dropped (unchanged
    mappings are the very objects given)."""
    seen: set[tuple[str, int]] = set()
    return {m: clean_owned(group.members[m].assigned_partitions, counts, seen) for m in members}


def release(old: MemberAssignment, counts: Mapping[str, int], quota: int,
            unassigned: list[tuple[str, int]]) -> tuple[MemberAssignment, int]:
    """Keep up to `quota` of a member's owned partitions, in Kafka's visiting order, appending the rest to
    `unassigned`; unsubscribed topics go. Returns the member's assignment (`old` itself when unchanged, else
    a new mapping in `member_map_order`) and the quota left."""
    new: dict[str, set[int]] | None = None
    # A plain mapping iterates as given (Kafka's own tests pass theirs in order); the core's array-backed
    # views iterate in layout order, so they are read in the order Kafka's record, read back, would have.
    for t in (old if isinstance(old, dict) else member_map_order(old)):
        ps = old[t]
        if t in counts:
            if len(ps) <= quota:
                quota -= len(ps)
                continue
            for p in sorted(ps):
                if quota > 0:
                    quota -= 1
                    continue
                if new is None:
                    new = {k: set(v) for k, v in old.items()}
                new[t].discard(p)
                if not new[t]:
                    del new[t]
                unassigned.append((t, p))
        else:
            if new is None:
                new = {k: set(v) for k, v in old.items()}
            del new[t]
    return (old if new is None else {t: frozenset(new[t]) for t in member_map_order(new)}), quota


def with_added(cur: MemberAssignment, added: Iterable[tuple[str, Iterable[int]]]) -> dict[str, frozenset[int]]:
    """A receiving member's new assignment, in `member_map_order`."""
    got = {t: set(ps) for t, ps in cur.items()}
    for t, ps in added:
        got.setdefault(t, set()).update(ps)
    return {t: frozenset(got[t]) for t in member_map_order(got)}


def assign_homogeneous(group: GroupSpec, topics: TopicDescriber) -> GroupAssignment:
    if not group.members:
        return {}
    members = hash_map_member_order(group.members, len(group.members))
    subscription = group.members[members[0]].subscribed_topic_ids
    counts = topic_counts(subscription, topics)
    owned = _valid_owned(group, members, counts)
    taken = {(t, p) for a in owned.values() for t, ps in a.items() if t in counts for p in ps}
    unassigned = [(t, p) for t, c in counts.items() for p in range(c) if (t, p) not in taken]
    quotas = Quotas(sum(counts.values()), len(members))
    out: dict[str, MemberAssignment] = {}
    unfilled: list[tuple[str, int]] = []
    for index, m in enumerate(members):
        out[m], left = release(owned[m], counts, quotas.quota(), unassigned)
        left = quotas.settle(index, left)
        if left > 0:
            unfilled.append((m, left))
    i = 0
    for m, quota in unfilled:
        out[m] = with_added(out[m], ((t, (p,)) for t, p in unassigned[i:i + quota]))
        i += quota
    if i < len(unassigned):
        raise AssignorError("partitions were left unassigned")
    return out
