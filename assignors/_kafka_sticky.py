"""The decisions of Kafka's AbstractStickyAssignor that fix its exact answer, in the flat numbering of
`_layout` (members are indices into their sorted ids, partitions are global indices).

Theory of operation
-------------------
Kafka's leader builds `Map<String, Subscription>` as a `java.util.HashMap` and walks it twice in its
iteration order: to settle partitions claimed by several members (`allSubscriptionsEqual`) and to decide
which members over quota may keep `maxQuota` partitions (`ConstrainedAssignmentBuilder
.assignOwnedPartitions`). That order is part of the answer, so `JavaMapOrder` reproduces it (String
hashCode, HashMap's spread and table size, insertion order within a bucket), computed only for the few
members whose order matters.

Claims (`resolve_claims`): walking members in that order, the first claimant holds a partition; a later
claimant of a higher generation takes it from the current holder, one of the same generation makes it
claimed by several members (nobody keeps it and it is "transferring" to whoever receives it), one of a
lower generation is ignored. Claims of lower generations that nobody contests stay valid.

Constrained assignment (`constrained_assign`, all members subscribe the same topics), with P partitions,
N members, minQuota = P // N, maxQuota = ceil(P / N) and P % N members expected at maxQuota:
1. Each member keeps its owned partitions sorted by (partition number, topic): all of them if fewer than
   minQuota; maxQuota if it owns at least that many and fewer than P % N members have taken maxQuota so
   far (in map order); otherwise minQuota. What it does not keep may be revoked.
2. Unowned partitions, sorted by topic then partition, go round-robin over the members under minQuota
   (sorted by id), each leaving the rotation when it reaches minQuota; members that may still take one
   more (those kept at minQuota while fewer than P % N were at maxQuota, sorted by id, then the filled
   ones in the order they filled) take the rest, one each.
3. A partition given to a member other than the one that may revoke it, or one claimed by several members
   of the same generation, is transferring ownership: the cooperative assignor withholds it this round.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from groupcoord.assignors._layout import BoolArray, I32Array, IntArray


def java_string_hash(s: str) -> int:
    """`String.hashCode()` over UTF-16 code units, as an unsigned 32-bit value."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_sorted(ids: Sequence[str]) -> list[str]:
    """Ids in `String.compareTo` order (UTF-16 code units; Python's order for every BMP string)."""
    if "".join(ids).isascii():
        return sorted(ids)
    return sorted(ids, key=lambda s: s.encode("utf-16-be"))


class JavaMapOrder:
    """Iteration order of a `HashMap<String, _>` filled with `inserted` by `put` in that order: by bucket
    (spread hash masked by the table size the map grew to), then by insertion within a bucket. Buckets of
    eight or more colliding keys (treeified, or resized early) are not modelled."""

    def __init__(self, inserted: Sequence[str]) -> None:
        self._inserted = inserted
        self._position: dict[str, int] | None = None
        capacity = 16
        while len(inserted) > capacity * 3 // 4:
            capacity *= 2
        self._mask = capacity - 1

    def key(self, member_id: str) -> tuple[int, int]:
        if self._position is None:
            self._position = {m: i for i, m in enumerate(self._inserted)}
        h = java_string_hash(member_id)
        return (h ^ (h >> 16)) & self._mask, self._position[member_id]


def resolve_claims(
    glob: IntArray,
    member: I32Array,
    generation: IntArray,
    field_generation: IntArray,
    total: int,
    member_ids: Sequence[str],
    order: JavaMapOrder,
) -> tuple[I32Array, BoolArray]:
    """Claims (global partition, member) -> the owner each partition keeps (-1: none) and the partitions
    claimed by several members of one generation (see module docstring). Kafka compares a claimant's
    generation as its member data reads it (`generation`: from user data for v0/v1 subscriptions) with
    the current holder's subscription field (`field_generation`: -1 when absent)."""
    owner = np.full(total, -1, dtype=np.int32)
    multi = np.zeros(total, dtype=np.bool_)
    if len(glob) == 0:
        return owner, multi
    times = np.bincount(glob, minlength=total)
    single = times[glob] == 1
    owner[glob[single]] = member[single]
    if single.all():
        return owner, multi
    cg, cm = glob[~single].tolist(), member[~single].tolist()
    keys = {m: order.key(member_ids[m]) for m in set(cm)}
    claims = sorted(zip(cg, cm, strict=True), key=lambda c: (c[0], keys[c[1]]))
    gen, held_gen = generation.tolist(), field_generation.tolist()
    i = 0
    while i < len(claims):
        p = claims[i][0]
        holder = mapped = claims[i][1]
        i += 1
        while i < len(claims) and claims[i][0] == p:
            m = claims[i][1]
            i += 1
            if m == mapped:  # a member listing a partition twice still claims it once
                continue
            if gen[m] == held_gen[mapped]:
                multi[p] = True
                holder, mapped = -1, m
            elif gen[m] > held_gen[mapped]:
                holder = mapped = m
        owner[p] = holder
    return owner, multi


def constrained_assign(
    owned: I32Array,
    multi: BoolArray,
    n_members: int,
    topic_counts: IntArray,
    member_ids: Sequence[str],
    order: JavaMapOrder,
) -> tuple[I32Array, BoolArray]:
    """Kafka's constrained assignment (module docstring): the owner of every partition and which of them
    are transferring ownership. `owned` comes from `resolve_claims`; members are indexed in id order."""
    total = len(owned)
    owner = owned.copy()
    owner[multi] = -1  # claimed by several members in one generation: nobody keeps it
    min_q, expected = divmod(total, n_members)
    max_q = min_q + (expected > 0)
    held = owner >= 0
    sizes = np.bincount(owner[held], minlength=n_members).astype(np.int64)

    at_max = np.zeros(n_members, dtype=np.bool_)
    if expected:
        big = np.flatnonzero(sizes >= max_q)
        if len(big) > expected:
            big = np.asarray(sorted(big.tolist(), key=lambda m: order.key(member_ids[m]))[:expected])
        at_max[big] = True
    under = sizes < min_q
    keep = np.where(at_max, max_q, np.where(under, sizes, min_q))

    revoker = np.full(total, -1, dtype=np.int32)  # Kafka's maybeRevokedPartitions
    if (sizes > keep).any():
        parts = np.flatnonzero(held & (sizes > keep)[np.maximum(owner, 0)])
        own = owner[parts]
        topic = np.searchsorted(np.cumsum(topic_counts), parts, side="right")
        local = parts - (np.cumsum(topic_counts) - topic_counts)[topic]
        srt = np.lexsort((topic, local, own))  # per member: by partition number, then topic
        parts, own = parts[srt], own[srt]
        starts = np.flatnonzero(np.concatenate(([True], own[1:] != own[:-1])))
        rank = np.arange(len(parts)) - np.repeat(starts, np.diff(np.append(starts, len(parts))))
        drop = parts[rank >= keep[own]]
        revoker[drop] = owner[drop]
        owner[drop] = -1

    free = np.flatnonzero(owner < 0)
    unfilled = np.flatnonzero(under)  # ids are sorted, so index order is Kafka's sorted order
    deficit = min_q - sizes[unfilled]
    n_slots = int(deficit.sum())
    if n_slots:
        pos = np.repeat(np.arange(len(unfilled), dtype=np.int64), deficit)
        rnd = np.arange(n_slots, dtype=np.int64) - np.repeat(np.cumsum(deficit) - deficit, deficit)
        rotation = unfilled[pos[np.argsort(rnd * len(unfilled) + pos, kind="stable")]]
        owner[free[:n_slots]] = rotation
    rest = free[n_slots:]
    if len(rest):
        kept_at_min = np.flatnonzero(~at_max & ~under) if at_max.sum() < expected else np.zeros(0, np.int64)
        filled = unfilled[np.lexsort((np.arange(len(unfilled)), deficit))]
        takers = np.concatenate((kept_at_min, filled))
        if len(rest) > len(takers):
            raise RuntimeError("constrained assignment: partitions left but every member is at capacity")
        owner[rest] = takers[: len(rest)]
    transferring = multi.copy()
    transferring[free] |= (revoker[free] >= 0) & (revoker[free] != owner[free])
    return owner, transferring


def withheld_unless_newest_claimant(
    target: I32Array, glob: IntArray, member: I32Array, generation: IntArray
) -> BoolArray:
    """The safety rule (issue 12): a claimed partition goes only to its single highest-generation
    claimant this round; any other receiver waits until that claimant has revoked it. Kafka's general
    path withholds only partitions the receiver did not claim, so a lower-generation claimant could get
    a partition its newer owner was still consuming."""
    total = len(target)
    out = np.zeros(total, dtype=np.bool_)
    if len(glob) == 0:
        return out
    g = generation[member]
    srt = np.lexsort((member, -g, glob))  # per partition, highest generation first
    sg, sm, sgen = glob[srt], member[srt], g[srt]
    first = np.concatenate(([True], sg[1:] != sg[:-1]))
    top = np.repeat(sgen[first], np.diff(np.append(np.flatnonzero(first), len(sg))))
    repeated = np.concatenate(([False], (sg[1:] == sg[:-1]) & (sm[1:] == sm[:-1])))  # listed twice
    at_top = (sgen == top) & ~repeated
    top_count = np.bincount(sg[at_top], minlength=total)
    newest = np.full(total, -1, dtype=np.int32)
    lead = first & (top_count[sg] == 1)
    newest[sg[lead]] = sm[lead]
    claimed = np.zeros(total, dtype=np.bool_)
    claimed[sg] = True
    return claimed & (target >= 0) & (target != newest)


__all__ = [
    "JavaMapOrder",
    "constrained_assign",
    "java_sorted",
    "java_string_hash",
    "resolve_claims",
    "withheld_unless_newest_claimant",
]
