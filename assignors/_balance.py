"""Sticky count balancing: the engine behind `uniform`, `lag-sticky` and `cooperative-sticky` with
different subscriptions (with equal ones, cooperative-sticky follows Kafka exactly: `_kafka_sticky`).

Theory of operation
-------------------
Balanced means what Kafka's sticky assignors mean: no partition can move from its owner A to another
member B subscribed to its topic with count(A) > count(B) + 1. Among balanced assignments we want the one
closest to the current assignment.

Members with equal subscriptions form a *class*; topics subscribed by the same set of classes form a
*topic group*. Within a class all members are interchangeable, so the problem is first solved on the small
class x group matrix `x[g, k]` (partitions of group g held by class k), then materialised per member:

1. Keep every valid owned partition; hand each group's unowned partitions to its eligible classes by
   water-filling per-member load (groups with the fewest eligible classes first).
2. While some class k holds a partition of group g, g is eligible for class j, and
   ceil(load_k / n_k) > floor(load_j / n_j) + 1, move as many units of g from k to j as keep that true
   (units not yet placed move first). Each unit lowers the sum of squared member counts, so this ends,
   and the end state is balanced member by member once each class splits its load floor/ceil.
   Overlapping subscriptions can still leave a slope (52, 51, 50, 49, 48 around a ring of classes that
   each share topics with their neighbours), so units are also pushed along the shortest chain of
   classes from a busiest class to one at least two lower (up to 64 classes). The result is then
   balanced across the whole group, not only between neighbours.
3. Materialise: a class giving up units of g releases them from its most loaded members; within a class,
   members get floor or ceil of the class load, the ceil going first to members that already own more
   than the floor, in member order (the constrained seed's rule); members above target release their
   highest `keep_key` partitions; unplaced partitions are handed out by the policy's fill.

For a homogeneous group there is one class and one topic group, and this is exactly the seed's
constrained algorithm: keep owned up to quota, fill from unassigned, and (because extras are counted
before filling) never steal. An input that is already balanced is returned unchanged.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from groupcoord.assignors._layout import BoolArray, I32Array, IntArray, stable_group_order

# fill(incoming partitions, members (ascending), capacities, owner): set owner[incoming]; sum(caps) == len
FillFn = Callable[[IntArray, IntArray, IntArray, I32Array], None]

_BIG = np.int64(1) << 60
_MAX_PATH_CLASSES = 64  # chain search costs O(classes^2 x groups) per step; beyond: local balance only


def contiguous_fill(incoming: IntArray, members: IntArray, caps: IntArray, owner: I32Array) -> None:
    """Consecutive runs per member: few (member, topic) entries, so results stay small and cheap."""
    owner[incoming] = np.repeat(members, caps).astype(np.int32)


@dataclass(frozen=True, slots=True)
class Policy:
    """How the engine breaks ties that balance alone does not decide."""

    fill: FillFn = contiguous_fill
    keep_key: IntArray | None = None  # members over target keep their lowest keys (default: lowest index)
    fill_order: IntArray | None = None  # order in which unowned partitions are handed out (a permutation)


def balance(
    owner0: I32Array,
    member_class: I32Array,
    class_topics: BoolArray,
    topic_counts: IntArray,
    policy: Policy = Policy(),
) -> I32Array:
    """A balanced, sticky owner array for the problem (see module docstring)."""
    n = len(member_class)
    owner = owner0.copy()
    if n == 0 or len(owner) == 0:
        owner[:] = -1
        return owner
    n_classes, n_topics = class_topics.shape
    base = np.zeros(n_topics + 1, dtype=np.int64)
    np.cumsum(topic_counts, out=base[1:])
    ptopic = np.repeat(np.arange(n_topics, dtype=np.int64), topic_counts)
    assigned = owner >= 0
    counts = np.bincount(owner[assigned], minlength=n).astype(np.int64)
    if assigned.all() and _is_balanced(owner, counts, member_class, class_topics, base):
        return owner

    tgroup, eligible = _topic_groups(class_topics)
    n_groups = eligible.shape[0]
    pgroup = tgroup[ptopic]
    class_size = np.bincount(member_class, minlength=n_classes).astype(np.int64)
    x_owned = _group_class_counts(owner, pgroup, member_class, n_groups, n_classes)
    free_per_group = np.bincount(pgroup[~assigned], minlength=n_groups).astype(np.int64)
    x, x_free = _class_targets(x_owned, free_per_group, eligible, class_size)

    surplus = x_owned - (x - x_free)
    if surplus.any():
        _release_surplus(owner, counts, pgroup, member_class, surplus, policy.keep_key)
    load = x.sum(axis=0)
    targets = _member_targets(counts, member_class, load, class_size)
    if (counts > targets).any():
        _release_excess(owner, counts, targets, policy.keep_key)
    _fill(owner, counts, targets, pgroup, member_class, x, policy)
    return owner


def _topic_groups(class_topics: BoolArray) -> tuple[IntArray, BoolArray]:
    """Topic -> group of topics with the same subscribing classes, and each group's eligible classes."""
    n_classes, n_topics = class_topics.shape
    if n_classes == 1:
        return np.zeros(n_topics, dtype=np.int64), np.ones((1, 1), dtype=np.bool_)
    if n_classes <= 62:
        keys = class_topics.T.astype(np.int64) @ (np.int64(1) << np.arange(n_classes, dtype=np.int64))
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    else:
        index: dict[bytes, int] = {}
        inverse = np.asarray([index.setdefault(c.tobytes(), len(index)) for c in class_topics.T])
        first = np.unique(inverse, return_index=True)[1]
    return inverse.reshape(-1).astype(np.int64), class_topics[:, first].T.copy()


def _group_class_counts(
    owner: I32Array, pgroup: IntArray, member_class: I32Array, n_groups: int, n_classes: int
) -> IntArray:
    a = owner >= 0
    key = pgroup[a] * n_classes + member_class[owner[a]]
    return np.bincount(key, minlength=n_groups * n_classes).astype(np.int64).reshape(n_groups, n_classes)


def _is_balanced(
    owner: I32Array, counts: IntArray, member_class: I32Array, class_topics: BoolArray, base: IntArray
) -> bool:
    """Member-level balance: per topic, the busiest holder has at most one more than the idlest
    eligible member."""
    holder_max = np.maximum.reduceat(counts[owner], base[:-1])
    class_min = np.full(class_topics.shape[0], _BIG, dtype=np.int64)
    np.minimum.at(class_min, member_class, counts)
    eligible_min = np.where(class_topics, class_min[:, None], _BIG).min(axis=0)
    return bool((holder_max <= eligible_min + 1).all())


def _class_targets(
    x_owned: IntArray, free: IntArray, eligible: BoolArray, class_size: IntArray
) -> tuple[IntArray, IntArray]:
    """Steps 1-2: balanced x[g, k]; x_free[g, k] counts units of x not owned there before."""
    x = x_owned.copy()
    x_free = np.zeros_like(x)
    n_groups, n_classes = x.shape
    if n_classes == 1:
        x[:, 0] += free
        x_free[:, 0] = free
        return x, x_free
    load = x.sum(axis=0)
    for g in np.lexsort((np.arange(n_groups), eligible.sum(axis=1))).tolist():
        if free[g]:
            add = _waterfill(load, class_size, eligible[g], int(free[g]))
            x[g] += add
            x_free[g] += add
            load += add
    while _local_step(x, x_free, eligible, class_size) or (
        n_classes <= _MAX_PATH_CLASSES and _path_step(x, x_free, eligible, class_size)
    ):
        pass
    return x, x_free


def _move(x: IntArray, x_free: IntArray, g: int, k: int, j: int, d: int) -> None:
    """Move d units of group g from class k to j; units not yet placed in k go first."""
    from_free = min(d, int(x_free[g, k]))
    x[g, k] -= d
    x_free[g, k] -= from_free
    x[g, j] += d
    x_free[g, j] += d


def _local_step(x: IntArray, x_free: IntArray, eligible: BoolArray, class_size: IntArray) -> bool:
    """One round of bulk moves between classes sharing a group (step 2), at most one move per class so
    each uses exact loads; False when none is needed. Busiest classes go first, then units not yet
    placed, then the widest gap."""
    load = x.sum(axis=0)
    floor = load // class_size
    ceil = -(-load // class_size)
    floor_eligible = np.where(eligible, floor[None, :], _BIG)
    dest = floor_eligible.argmin(axis=1)
    min_floor = floor_eligible[np.arange(len(x)), dest]
    gap = np.where(x > 0, ceil[None, :] - min_floor[:, None], -1)
    violating = gap > 1
    if not violating.any():
        return False
    score = np.where(violating, 2 * gap + (x_free > 0), -1)
    best = score.argmax(axis=0)  # per class: its best group (lowest index on ties)
    classes = np.flatnonzero(violating.any(axis=0))
    used = np.zeros(x.shape[1], dtype=np.bool_)
    for k in classes[np.lexsort((classes, -ceil[classes]))].tolist():
        g = int(best[k])
        j = int(dest[g])
        if used[k] or used[j]:
            continue
        used[k] = used[j] = True
        d = _max_steps(int(load[k]), int(class_size[k]), int(load[j]), int(class_size[j]), int(x[g, k]))
        _move(x, x_free, g, k, j, d)
    return True


def _path_step(x: IntArray, x_free: IntArray, eligible: BoolArray, class_size: IntArray) -> bool:
    """Locally balanced classes can still form a slope (52, 51, 50, 49, 48 around a ring of overlapping
    subscriptions). Push units along the shortest chain k -> ... -> j of classes, each holding a group
    the next is eligible for, from a busiest class to one at least two lower: the ends even out, the
    middle keeps its load. Without this a join in such a group ripples around the ring."""
    load = x.sum(axis=0)
    floor = load // class_size
    ceil = -(-load // class_size)
    if ceil.max() < floor.min() + 2:
        return False
    holds = x > 0
    adjacent = (holds.T.astype(np.float32) @ eligible.astype(np.float32)) > 0  # [u, v]: u can pass to v
    n_classes = x.shape[1]
    reach = adjacent.copy()
    while True:  # transitive closure by squaring: which classes each class can reach at all
        wider = reach | ((reach.astype(np.float32) @ reach.astype(np.float32)) > 0)
        if (wider == reach).all():
            break
        reach = wider
    lowest = np.where(reach, floor[None, :], _BIG).min(axis=1)
    sources = np.flatnonzero(lowest + 2 <= ceil)
    for k in sources[np.lexsort((sources, -ceil[sources]))].tolist():
        parent = np.full(n_classes, -1, dtype=np.int64)
        seen = np.zeros(n_classes, dtype=np.bool_)
        seen[k] = True
        frontier = np.zeros(n_classes, dtype=np.bool_)
        frontier[k] = True
        while frontier.any():
            step = adjacent & frontier[:, None]
            new = step.any(axis=0) & ~seen
            if not new.any():
                break
            parent[new] = step[:, new].argmax(axis=0)
            seen |= new
            frontier = new
        seen[k] = False
        if not seen.any():
            continue
        j = int(np.flatnonzero(seen)[np.argmin(floor[seen])])
        if floor[j] + 2 > ceil[k]:
            continue
        path: list[tuple[int, int, int]] = []  # (group, from, to), from j back to k
        v = j
        while v != k:
            u = int(parent[v])
            g = int(np.argmax(holds[:, u] & eligible[:, v]))
            path.append((g, u, v))
            v = u
        avail = min(int(x[g, u]) for g, u, _ in path)
        d = _max_steps(int(load[k]), int(class_size[k]), int(load[j]), int(class_size[j]), avail)
        for g, u, v in reversed(path):
            _move(x, x_free, g, u, v, d)
        return True
    return False


def _max_steps(load_k: int, n_k: int, load_j: int, n_j: int, avail: int) -> int:
    """How many single-unit moves k -> j in a row each still go from a ceil more than one above j's floor."""
    lo, hi = 1, avail
    while lo < hi:
        mid = (lo + hi + 1) // 2
        i = mid - 1
        if -(-(load_k - i) // n_k) > (load_j + i) // n_j + 1:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _waterfill(load: IntArray, class_size: IntArray, eligible_row: BoolArray, units: int) -> IntArray:
    """Split `units` over eligible classes, raising the lowest per-member loads first."""
    cls = np.flatnonzero(eligible_row)
    lc, nc = load[cls], class_size[cls]

    def need(h: int) -> int:
        return int(np.maximum(0, h * nc - lc).sum())

    lo, hi = 0, int((lc // nc).max()) + units + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if need(mid) >= units:
            hi = mid
        else:
            lo = mid + 1
    h = lo
    add = np.maximum(0, (h - 1) * nc - lc)
    rest = units - int(add.sum())
    room = np.maximum(0, h * nc - lc) - add
    before = np.cumsum(room) - room
    add += np.minimum(room, np.maximum(0, rest - before))
    out = np.zeros(len(load), dtype=np.int64)
    out[cls] = add
    return out


def _release_surplus(
    owner: I32Array,
    counts: IntArray,
    pgroup: IntArray,
    member_class: I32Array,
    surplus: IntArray,
    keep_key: IntArray | None,
) -> None:
    """A class gives up units of a group: take them one by one from its currently busiest holder."""
    n_classes = surplus.shape[1]
    held = np.flatnonzero(owner >= 0)
    pair = pgroup[held] * n_classes + member_class[owner[held]]
    order = np.argsort(pair, kind="stable")
    held, pair = held[order], pair[order]
    for g, k in zip(*np.nonzero(surplus), strict=True):
        key = int(g) * n_classes + int(k)
        cand = held[np.searchsorted(pair, key) : np.searchsorted(pair, key, side="right")]
        own = owner[cand]
        by = keep_key[cand] if keep_key is not None else cand
        order = np.lexsort((-cand, -by, own))  # per member: highest keep_key released first
        cand, own = cand[order], own[order]
        starts = np.flatnonzero(np.concatenate(([True], own[1:] != own[:-1])))
        ends = np.append(starts[1:], len(cand))
        heap = [(-int(counts[own[s]]), int(own[s]), int(s), int(e)) for s, e in zip(starts, ends, strict=True)]
        heapq.heapify(heap)
        for _ in range(int(surplus[g, k])):
            neg, m, s, e = heapq.heappop(heap)
            owner[cand[s]] = -1
            counts[m] -= 1
            if s + 1 < e:
                heapq.heappush(heap, (neg + 1, m, s + 1, e))


def _member_targets(
    counts: IntArray, member_class: I32Array, load: IntArray, class_size: IntArray
) -> IntArray:
    """floor/ceil of the class load; ceil first to members owning more than the floor, in member order."""
    n = len(counts)
    floor = (load // class_size)[member_class]
    extra = (load % class_size)[member_class]
    over = counts > floor
    order = np.lexsort((np.arange(n), ~over, member_class))
    class_start = np.concatenate(([0], np.cumsum(class_size)[:-1]))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - class_start[member_class[order]]
    return floor + (rank < extra)


def _release_excess(owner: I32Array, counts: IntArray, targets: IntArray, keep_key: IntArray | None) -> None:
    over = counts > targets
    parts = np.flatnonzero((owner >= 0) & over[np.maximum(owner, 0)])
    own = owner[parts]
    by_key = None if keep_key is None else keep_key[parts]
    order = stable_group_order(own, len(counts)) if by_key is None else np.lexsort((parts, by_key, own))
    parts, own = parts[order], own[order]
    starts = np.flatnonzero(np.concatenate(([True], own[1:] != own[:-1])))
    run_len = np.diff(np.append(starts, len(parts)))
    rank = np.arange(len(parts)) - np.repeat(starts, run_len)
    release = rank >= targets[own]
    owner[parts[release]] = -1
    np.subtract.at(counts, own[release], 1)


def _fill(
    owner: I32Array,
    counts: IntArray,
    targets: IntArray,
    pgroup: IntArray,
    member_class: I32Array,
    x: IntArray,
    policy: Policy,
) -> None:
    order = policy.fill_order
    free = np.flatnonzero(owner < 0) if order is None else order[owner[order] < 0]
    if len(free) == 0:
        return
    caps = targets - counts
    n_groups, n_classes = x.shape
    if n_classes == 1:
        policy.fill(free, np.arange(len(counts), dtype=np.int64), caps, owner)
        return
    x_now = _group_class_counts(owner, pgroup, member_class, n_groups, n_classes)
    deficit = x - x_now
    gorder = stable_group_order(pgroup[free], n_groups)
    pool = free[gorder]
    ptr = np.concatenate(([0], np.cumsum(np.bincount(pgroup[free], minlength=n_groups))[:-1]))
    by_class = stable_group_order(member_class, n_classes)
    class_start = np.concatenate(([0], np.cumsum(np.bincount(member_class, minlength=n_classes))))
    for k in range(n_classes):
        pieces = []
        for g in np.flatnonzero(deficit[:, k]).tolist():
            d = int(deficit[g, k])
            pieces.append(pool[ptr[g] : ptr[g] + d])
            ptr[g] += d
        if not pieces:
            continue
        members = by_class[class_start[k] : class_start[k + 1]]
        policy.fill(np.concatenate(pieces), members, caps[members], owner)
