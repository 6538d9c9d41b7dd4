"""`cooperative-sticky` (client-side, classic protocol): Kafka's CooperativeStickyAssignor.

When every member subscribes to the same topics (the common case), the answer is exactly Kafka's
constrained algorithm (`_kafka_sticky`): members keep owned partitions up to quota in Kafka's order, and
unowned partitions go round-robin over the members, sorted by topic then partition, so consecutive
partitions of a topic spread over members. It runs in a few linear passes: 2,100 consumers x 2,100
partitions take milliseconds, where Kafka's general algorithm took minutes. With different
subscriptions, small groups run Kafka's general algorithm itself (`_kafka_general`); larger ones hand out
unowned partitions as Kafka does and, when that leaves the group unbalanced, let `_balance` balance it:
balanced and sticky, with the same claims, but not always Kafka's choice among balanced answers.

Ownership comes from the members' subscriptions and is settled as Kafka settles it: per partition, the
highest generation wins, claims of lower generations that nobody contests stay sticky, and a partition
claimed twice in one generation is kept by neither. In cooperative mode a partition that changes owner is
withheld for this round (CooperativeStickyAssignor.adjustAssignment): its holder revokes it, rejoins,
and the follow-up rebalance assigns it (KIP-429). On top of Kafka, a claimed partition only ever goes to
its single highest-generation claimant in the round: that member may still be consuming it. In eager
mode members revoked everything before joining, and nothing is withheld.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping
from functools import lru_cache
from itertools import chain, repeat
from operator import attrgetter, itemgetter

import numpy as np
import numpy.typing as npt

from groupcoord.assignors._balance import Policy, _is_balanced, balance
from groupcoord.assignors._kafka_general import GeneralBuilder
from groupcoord.assignors._kafka_sticky import (
    JavaMapOrder,
    constrained_assign,
    java_sorted,
    resolve_claims,
    withheld_unless_newest_claimant,
)
from groupcoord.assignors._layout import BoolArray, I32Array, IntArray, stable_group_order, topic_layout
from groupcoord.assignors.api import PartitionOffsets
from groupcoord.assignors.classic import COOPERATIVE, EAGER, ClassicAssignment, ClassicSubscription

TP = tuple[str, int]
ObjArray = npt.NDArray[np.object_]


class CooperativeStickyAssignor:
    """`cooperative=False` returns the sticky target without withholding (Kafka's StickyAssignor
    protocol: eager)."""

    name = "cooperative-sticky"
    supported_protocols: tuple[str, ...] = (COOPERATIVE, EAGER)

    def __init__(self, cooperative: bool = True) -> None:
        self.cooperative = cooperative

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, ClassicSubscription],
        lag: Mapping[tuple[str, int], PartitionOffsets] | None = None,
        auto_offset_reset: str = "latest",
    ) -> ClassicAssignment:
        return sticky_assign(partitions_per_topic, subscriptions, self.cooperative)


def sticky_assign(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, ClassicSubscription],
    cooperative: bool,
    fast: bool = True,
) -> ClassicAssignment:
    """The assignment. `fast` takes the shortcuts of the common case (equal subscriptions, nothing owned
    or each partition claimed once, one topic, balanced lists); without it every step runs its general
    form. Both give the same answer (a property test compares them on random groups)."""
    member_ids = java_sorted(list(subscriptions))
    if not member_ids:
        return {}
    equal = fast and _equal_topics(subscriptions)
    if equal and not any(map(_OWNED, subscriptions.values())):
        return _fresh_equal(partitions_per_topic, member_ids, subscriptions[member_ids[0]].topics)
    subs = list(map(subscriptions.__getitem__, member_ids))
    if equal:
        member_class, class_subs = np.zeros(len(subs), dtype=np.int32), [frozenset(subs[0].topics)]
    else:
        member_class, class_subs = _subscription_classes(subs, fast)
    tids, tindex, counts, base = topic_layout(frozenset().union(*class_subs), partitions_per_topic)
    if not tids:
        return {m: [] for m in member_ids}
    total = int(base[-1])
    glob, claimant = _claims(subs, tindex, counts, base, fast)
    unique = len(glob) == 0 or int(np.bincount(glob).max()) == 1
    gen = field_gen = np.zeros(len(subs), dtype=np.int64)
    if not (fast and unique and len(class_subs) == 1):  # generations only settle contested claims
        field_gen = np.asarray([max(s.generation, -1) for s in subs], dtype=np.int64)
        gen = np.asarray([_member_generation(s) for s in subs], dtype=np.int64)
    order = JavaMapOrder(list(subscriptions))
    owned, multi = resolve_claims(glob, claimant, gen, field_gen, total, member_ids, order)

    if len(class_subs) == 1:
        target, transferring = constrained_assign(owned, multi, len(subs), counts, member_ids, order)
    else:
        class_topics = np.zeros((len(class_subs), len(tids)), dtype=np.bool_)
        for k, sub in enumerate(class_subs):
            class_topics[k, [tindex[t] for t in sub if t in tindex]] = True
        if total * len(subs) <= _EXACT_GENERAL_WORK:
            target = _kafka_general(owned, member_class, class_topics, counts, tids, glob, claimant, gen,
                                    [member_ids.index(m) for m in _java_iteration(member_ids, order)])
        else:
            target = _general_assign(owned, member_class, class_topics, counts)
        transferring = np.zeros(total, dtype=np.bool_)

    if cooperative:
        if fast and unique:  # each claimed partition has one claimant: it is the newest
            newest = np.full(total, -1, dtype=np.int32)
            newest[glob] = claimant
            transferring |= (newest >= 0) & (target >= 0) & (target != newest)
        else:
            transferring |= withheld_unless_newest_claimant(target, glob, claimant, gen)
        target[transferring] = -1
    return dict(zip(member_ids, member_lists(len(member_ids), tids, base, target, fast), strict=True))


def _equal_topics(subscriptions: Mapping[str, ClassicSubscription]) -> bool:
    """Every member lists the same topics in the same order: one `count` in C, identity first."""
    topics = list(map(_TOPICS, subscriptions.values()))
    return topics.count(topics[0]) == len(topics)


def _fresh_equal(partitions_per_topic: Mapping[str, int], member_ids: list[str], topics: tuple[str, ...]
                 ) -> ClassicAssignment:
    """Equal subscriptions and nothing owned: Kafka's constrained round-robin gives partition `j` (in
    topic, then partition order) to the `j % N`-th member by id, and nothing is withheld."""
    tids, _, _, base = topic_layout(frozenset(topics), partitions_per_topic)
    n = len(member_ids)
    target = (np.arange(int(base[-1]), dtype=np.int64) % n).astype(np.int32)
    return dict(zip(member_ids, member_lists(n, tids, base, target, True), strict=True))


_EXACT_GENERAL_WORK = 20_000  # partitions x members up to which Kafka's general path runs as Kafka's


def _java_iteration(member_ids: list[str], order: JavaMapOrder) -> list[str]:
    return sorted(member_ids, key=order.key)


def _kafka_general(
    owned: I32Array,
    member_class: I32Array,
    class_topics: BoolArray,
    counts: IntArray,
    tids: list[str],
    glob: IntArray,
    claimant: I32Array,
    gen: IntArray,
    java_order: list[int],
) -> I32Array:
    """Kafka's GeneralAssignmentBuilder (`_kafka_general`) for a small group with different
    subscriptions. Its prevAssignment holds the claims of members below the highest generation."""
    ptopic = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    owner = owned.copy()
    held = owner >= 0
    gone = np.zeros(len(owner), dtype=np.bool_)
    gone[held] = ~class_topics[member_class[owner[held]], ptopic[held]]
    owner[gone] = -1
    previous: dict[int, int] = {}
    previous_gen: dict[int, int] = {}
    if len(glob):
        newest = int(gen.max())
        rank = {m: i for i, m in enumerate(java_order)}
        claims = sorted(zip(claimant.tolist(), glob.tolist(), strict=True), key=lambda c: rank[c[0]])
        gens = gen.tolist()
        for m, p in claims:
            g = gens[m]
            if g < newest and (p not in previous or g > previous_gen[p]):
                previous[p], previous_gen[p] = m, g
    member_topics = [set(np.flatnonzero(class_topics[k]).tolist()) for k in member_class.tolist()]
    local = (np.arange(len(owner), dtype=np.int64) - np.concatenate(([0], np.cumsum(counts)))[ptopic]).tolist()
    builder = GeneralBuilder(owner.tolist(), ptopic.tolist(), local, tids, member_topics, java_order, previous,
                             bool(gone.any()))
    return np.asarray(builder.run(), dtype=np.int32)


def _general_assign(
    owned: I32Array,
    member_class: I32Array,
    class_topics: BoolArray,
    counts: IntArray,
) -> I32Array:
    """Different subscriptions: keep settled claims on topics the owner still subscribes, then hand out
    the rest as Kafka's general path does (topics with the fewest potential consumers first, then by
    name; each partition to the least-loaded subscribed member, then by id). When that is balanced, it
    is Kafka's answer (Kafka moves nothing then); otherwise `_balance` balances from the kept claims,
    where Kafka would run its own sequence of moves."""
    owner = owned.copy()
    ptopic = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    held = owner >= 0
    gone = np.zeros(len(owner), dtype=np.bool_)
    gone[held] = ~class_topics[member_class[owner[held]], ptopic[held]]
    owner[gone] = -1
    consumers = np.bincount(member_class, minlength=class_topics.shape[0]) @ class_topics.astype(np.int64)
    fill_order = np.lexsort((np.arange(len(owner)), consumers[ptopic]))
    if len(owner) * class_topics.shape[0] <= _GREEDY_WORK:
        greedy = _greedy_fill(owner, member_class, class_topics, ptopic, fill_order)
        size = np.bincount(greedy, minlength=len(member_class)).astype(np.int64)
        base = np.concatenate(([0], np.cumsum(counts)))
        if _is_balanced(greedy, size, member_class, class_topics, base):
            return greedy
    policy = Policy(fill=_least_loaded_fill, fill_order=fill_order)
    return balance(owner, member_class, class_topics, counts, policy)


_GREEDY_WORK = 4_000_000  # partitions x subscription classes; beyond, go straight to `_balance`


def _greedy_fill(
    owner: I32Array, member_class: I32Array, class_topics: BoolArray, ptopic: IntArray, fill_order: IntArray
) -> I32Array:
    """AbstractStickyAssignor.maybeAssign: unowned partitions in `fill_order`, each to the first member
    of the (size, id)-sorted set that subscribes its topic; a heap per subscription class."""
    out = owner.copy()
    size = np.bincount(out[out >= 0], minlength=len(member_class)).tolist()
    heaps: list[list[tuple[int, int]]] = [[] for _ in range(class_topics.shape[0])]
    for m, k in enumerate(member_class.tolist()):
        heaps[k].append((size[m], m))
    for h in heaps:
        heapq.heapify(h)
    classes_of = [np.flatnonzero(class_topics[:, t]).tolist() for t in range(class_topics.shape[1])]
    free = fill_order[out[fill_order] < 0]
    chosen = []
    for t in ptopic[free].tolist():
        ks = classes_of[t]
        k = ks[0] if len(ks) == 1 else min(ks, key=lambda c: heaps[c][0])
        n, m = heaps[k][0]
        heapq.heapreplace(heaps[k], (n + 1, m))
        chosen.append(m)
    out[free] = np.asarray(chosen, dtype=np.int32)
    return out


def _least_loaded_fill(incoming: IntArray, members: IntArray, caps: IntArray, owner: I32Array) -> None:
    """Each partition in turn to the member with the fewest partitions, ties by id (member index)."""
    current = np.bincount(owner[owner >= 0], minlength=int(members.max()) + 1)[members]
    slot = np.repeat(np.arange(len(members), dtype=np.int64), caps)
    level = current[slot] + np.arange(len(slot), dtype=np.int64) - np.repeat(np.cumsum(caps) - caps, caps)
    owner[incoming] = members[slot[np.lexsort((members[slot], level))]].astype(np.int32)


def _member_generation(s: ClassicSubscription) -> int:
    """CooperativeStickyAssignor.memberData: the subscription's generation (v2+), else the int32 that
    cooperative-sticky puts in its user data (v0/v1); -1 when neither is there or it does not parse."""
    if s.generation >= 0:
        return s.generation
    if len(s.user_data) >= 4:
        return int.from_bytes(s.user_data[:4], "big", signed=True)
    return -1


def _subscription_classes(subs: list[ClassicSubscription], fast: bool) -> tuple[I32Array, list[frozenset[str]]]:
    """Members with the same set of topics form a class. Equal tuples are matched first: hashing a tuple
    is much cheaper than building a frozenset per member, and comparing them (identity first, in C)
    cheaper still when every member lists the same topics."""
    topics = list(map(_TOPICS, subs))
    if fast and topics.count(topics[0]) == len(topics):
        return np.zeros(len(subs), dtype=np.int32), [frozenset(topics[0])]
    by_tuple: dict[tuple[str, ...], int] = {}
    tuple_of = [by_tuple.setdefault(t, len(by_tuple)) for t in topics]
    index: dict[frozenset[str], int] = {}
    class_of_tuple = np.asarray([index.setdefault(frozenset(t), len(index)) for t in by_tuple], dtype=np.int32)
    return class_of_tuple[np.asarray(tuple_of, dtype=np.int64)], list(index)


_TOPICS = attrgetter("topics")
_OWNED = attrgetter("owned_partitions")
_TOPIC, _PART = itemgetter(0), itemgetter(1)


def _claims(
    subs: list[ClassicSubscription], tindex: Mapping[str, int], counts: IntArray, base: IntArray, fast: bool
) -> tuple[IntArray, I32Array]:
    """Every owned partition of an existing subscribed topic as (global partition, member) arrays, in
    member order; the loops stay in C (map, chain, zip). When every claim names the one topic, the topic
    lookup is one `count`."""
    owned = list(map(_OWNED, subs))
    per_member = np.fromiter(map(len, owned), dtype=np.int64, count=len(owned))
    n = int(per_member.sum())
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
    flat = list(chain.from_iterable(owned))
    local = np.fromiter(map(_PART, flat), dtype=np.int64, count=n)
    topics = list(map(_TOPIC, flat))
    member = np.repeat(np.arange(len(subs), dtype=np.int32), per_member)
    if fast and len(tindex) == 1 and topics.count(next(iter(tindex))) == n:
        ok = (local >= 0) & (local < counts[0])
        return local[ok], member[ok]
    ti = np.fromiter(map(tindex.get, topics, repeat(-1)), dtype=np.int64, count=n)
    ok = (ti >= 0) & (local >= 0) & (local < counts[ti])
    return base[ti[ok]] + local[ok], member[ok]


def member_lists(n_members: int, tids: list[str], base: IntArray, owner: I32Array, fast: bool) -> list[list[TP]]:
    """Each member's sorted (topic, partition) list from the owner array. When sizes differ by at most
    one (a balanced result), the lists come out of numpy reshapes of an object array in C; otherwise
    from one slice per member."""
    parts = np.flatnonzero(owner >= 0)
    own = owner[parts]
    order = stable_group_order(own, n_members)
    parts, own = parts[order], own[order]
    sizes = np.bincount(own, minlength=n_members)
    if fast:
        pairs = _all_pairs(tuple(tids), tuple(np.diff(base).tolist()))[parts]
        lo = int(sizes.min())
        if int(sizes.max()) - lo <= 1:
            return _balanced_lists(pairs, sizes, lo)
        listed: list[TP] = pairs.tolist()
    elif len(tids) == 1:
        listed = list(zip(repeat(tids[0]), parts.tolist()))
    else:
        topic = np.searchsorted(base, parts, side="right") - 1
        listed = list(zip(map(tids.__getitem__, topic.tolist()), (parts - base[topic]).tolist(), strict=True))
    ends = np.cumsum(sizes).tolist()
    return list(map(listed.__getitem__, map(slice, [0, *ends[:-1]], ends)))


@lru_cache(maxsize=8)
def _all_pairs(tids: tuple[str, ...], counts: tuple[int, ...]) -> ObjArray:
    """Every (topic, partition) of a layout in global order, as one read-only object array. Tuples are
    immutable, so a leader that assigns the same topics again (every rebalance does) hands out the same
    tuples instead of building one per partition each time; eight layouts are kept."""
    pairs = np.fromiter(chain.from_iterable(zip(repeat(t), range(c)) for t, c in zip(tids, counts, strict=True)),
                        dtype=object, count=sum(counts))
    pairs.flags.writeable = False
    return pairs


def _balanced_lists(pairs: ObjArray, sizes: IntArray, lo: int) -> list[list[TP]]:
    """`pairs` grouped by member (sorted by member), every member holding `lo` or `lo + 1` of them. One
    reshape makes every list at the size most members have; the few others then gain or lose one item."""
    n = len(sizes)
    big = sizes > lo
    n_big = int(big.sum())
    if n_big in (0, n):
        return pairs.reshape(n, lo + (n_big > 0)).tolist()  # type: ignore[no-any-return]
    ends = np.cumsum(sizes)
    if 2 * n_big <= n:  # lists of lo, then each big member appends its last pair
        last = ends[big] - 1
        keep = np.ones(len(pairs), dtype=np.bool_)
        keep[last] = False
        lists: list[list[TP]] = pairs[keep].reshape(n, lo).tolist()
        deque(map(list.append, map(lists.__getitem__, np.flatnonzero(big).tolist()), pairs[last].tolist()), maxlen=0)
        return lists
    # lists of lo + 1 (small members padded with None), then each small member drops its pad
    padded = np.full(n * (lo + 1), None, dtype=object)
    rank = np.arange(len(pairs), dtype=np.int64) - np.repeat(ends - sizes, sizes)
    padded[np.repeat(np.arange(n, dtype=np.int64) * (lo + 1), sizes) + rank] = pairs
    lists = padded.reshape(n, lo + 1).tolist()
    deque(map(list.pop, map(lists.__getitem__, np.flatnonzero(~big).tolist())), maxlen=0)
    return lists
