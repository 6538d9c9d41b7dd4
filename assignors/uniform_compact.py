"""`uniform` for homogeneous groups whose current assignment is an owner array (`GroupSpec.current`).

Why: the coordinator hands the assignor its target as one `CompactAssignment`, each member's
`assigned_partitions` a lazy view of it. The general path (`uniform_homogeneous`) reads every view, so it
builds a mapping per member and a set of every owned partition: hundreds of milliseconds for 10,000
members when one leaves and one joins. Kafka's builder only moves what is over quota or unowned, and so
does this: per-member counts come from the array (`np.bincount`), the quota walk runs on integers, and only
the members that release, drop or receive partitions have their partitions read.

The result is the general path's, member for member and object for object: a member whose assignment does
not change gets back the very object it was given; the others get the general path's mapping (the same
`release` and `with_added` build them). Inputs this cannot read that way (a view of another assignment, a
non-empty mapping for a member the array lacks) return None and take the general path.

When the members mapping promises its assignments are the array's views (`overlay.given_as_views`, as the
coordinator's snapshot does), no member's assignment is checked or read up front, and the result is an
`OverlayAssignment`: the changed members' mappings over the members' own (10,000 members: no spec, view or
result entry per member, and the caller finds the changed ones without comparing every member).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import repeat

import numpy as np

from groupcoord.assignors._java_order import hash_map_member_order
from groupcoord.assignors._layout import BoolArray
from groupcoord.assignors.api import GroupAssignment, GroupSpec, MemberAssignment, TopicDescriber
from groupcoord.assignors.compact import CompactAssignment, IntArray, MemberAssignmentView
from groupcoord.assignors.overlay import OverlayAssignment, given_as_views
from groupcoord.assignors.uniform_homogeneous import Quotas, clean_owned, release, topic_counts, with_added


def _positions(group: GroupSpec, current: CompactAssignment, members: list[str],
               ) -> tuple[list[int], list[MemberAssignment]] | None:
    """Each member's index in `current` (-1: absent, holding nothing) and its given assignment, in `members`
    order; None when a member's assignment is not what `current` says (then the array cannot stand for it)."""
    pos = list(map(current.index.get, members, repeat(-1)))
    specs = group.members
    given = [specs[m].assigned_partitions for m in members]
    # what each member's assignment says its index is: -1 for an empty mapping, -2 for anything else
    said = [v.index if type(v) is MemberAssignmentView and v.source is current else -2 if v else -1
            for v in given]
    return (pos, given) if said == pos else None


def _scope(current: CompactAssignment, counts: Mapping[str, int]) -> tuple[IntArray, BoolArray]:
    """For each of `current`'s partitions: its topic (index into `current.topic_ids`) and whether it is
    one the general path keeps as owned (a subscribed topic, below the topic's partition count now)."""
    base = current.base
    sizes = np.diff(base)
    topic = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    limit = np.array([min(counts.get(t, 0), s) for t, s in zip(current.topic_ids, sizes.tolist(), strict=True)],
                     dtype=np.int64)
    local = np.arange(int(base[-1]), dtype=np.int64) - base[topic]
    return topic, local < limit[topic]


def _free(current: CompactAssignment, counts: Mapping[str, int], topic: IntArray, free_mask: BoolArray,
          ) -> Iterator[tuple[str, IntArray]]:
    """The partitions no member of the group owns, by topic in `counts` order (Kafka's `HashSet` order),
    ascending: unowned or out-of-group ones in the array, then those past its end for that topic."""
    free = np.flatnonzero(free_mask)
    ft = topic[free]
    cut = np.flatnonzero(ft[1:] != ft[:-1]) + 1
    starts = [0, *cut.tolist()]
    by_topic: dict[str, IntArray] = {}
    base = current.base
    tids = current.topic_ids
    if len(free):
        for a, b in zip(starts, [*starts[1:], len(free)], strict=True):
            j = int(ft[a])
            by_topic[tids[j]] = free[a:b] - base[j]
    where = {t: i for i, t in enumerate(tids)}
    for t, c in counts.items():
        got = by_topic.get(t)
        if got is not None:
            yield t, got
        i = where.get(t)
        have = 0 if i is None else min(int(base[i + 1] - base[i]), c)
        if have < c:
            yield t, np.arange(have, c, dtype=np.int64)


def assign_homogeneous_compact(group: GroupSpec, topics: TopicDescriber) -> GroupAssignment | None:
    """`assign_homogeneous` on `group.current`; None when the members' assignments are not its views."""
    current = group.current
    if current is None or not group.members:
        return None
    specs = group.members
    n = len(specs)
    members = hash_map_member_order(specs, n)
    given: list[MemberAssignment] | None = None
    if given_as_views(specs, current):  # views by construction: nothing to check, read only who moves
        pos_list = list(map(current.index.get, members, repeat(-1)))
    else:
        found = _positions(group, current, members)
        if found is None:
            return None
        pos_list, given = found
    pos = np.array(pos_list, dtype=np.int64)
    counts = topic_counts(specs[members[0]].subscribed_topic_ids, topics)
    topic, in_scope = _scope(current, counts)
    owner = current.owner
    held = owner >= 0
    k = len(current.member_ids)
    # per member in visiting order (the last slot answers -1, a member the array lacks): partitions it may
    # keep, partitions it holds
    valid = np.bincount(owner[held & in_scope], minlength=k + 1)[pos]
    total = np.bincount(owner[held], minlength=k + 1)[pos]
    in_group = np.zeros(k + 1, dtype=bool)
    in_group[pos[pos >= 0]] = True
    free_mask = in_scope & ~in_group[owner]

    def old_of(index: int) -> MemberAssignment:
        """The member at visiting `index`'s given assignment (read only for members that move)."""
        return specs[members[index]].assigned_partitions if given is None else given[index]

    quota, left = Quotas(sum(counts.values()), n).walk(valid)
    changed: dict[str, MemberAssignment] = {}  # members whose assignment is not the one given
    released: list[tuple[str, int]] = []
    # over quota or holding what the general path drops: its own code, on these members only, in order
    for index in np.flatnonzero((pos >= 0) & ((valid > quota) | (valid != total))).tolist():
        old = old_of(index)
        new, _ = release(clean_owned(old, counts, set()), counts, int(quota[index]), released)
        if new is not old:
            changed[members[index]] = new
    unfilled = np.flatnonzero(left > 0)
    unfilled_left = left[unfilled]

    queue: list[tuple[str, IntArray | list[int]]] = [*_free(current, counts, topic, free_mask), *_runs(released)]
    q = 0
    off = 0
    for index, need in zip(unfilled.tolist(), unfilled_left.tolist(), strict=True):
        added: list[tuple[str, list[int]]] = []
        while need > 0 and q < len(queue):
            t, ps = queue[q]
            take = ps[off:off + need]
            added.append((t, take.tolist() if isinstance(take, np.ndarray) else take))
            need -= len(take)
            off += len(take)
            if off == len(ps):
                q += 1
                off = 0
        m = members[index]
        cur = changed.get(m)
        changed[m] = with_added(old_of(index) if cur is None else cur, added)
    if q < len(queue):
        return None  # partitions left over: the general path says so
    if given is None:
        return OverlayAssignment(specs, members, changed)
    return {m: changed.get(m, old) for m, old in zip(members, given, strict=True)}


def _runs(released: list[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    """Released partitions, in release order, as consecutive same-topic groups."""
    out: list[tuple[str, list[int]]] = []
    for t, p in released:
        if out and out[-1][0] == t:
            out[-1][1].append(p)
        else:
            out.append((t, [p]))
    return out
