"""`cooperative-sticky` (client-side, classic protocol): the constrained cooperative sticky assignor.

Kafka's general sticky algorithm took 2.5 minutes for 2,100 consumers x 2,100 partitions; when everyone
subscribes to the same topics, the constrained algorithm of the seed does it in a few linear passes: with
N members and P partitions each member gets floor(P/N) or ceil(P/N); members keep owned partitions up to
that quota, and the rest are filled in partition order (t0p0, t1p0, ..., t0p1, ...) so that consecutive
partition numbers, and therefore data, spread across members. Different subscriptions take the general
path of the same engine (`_balance`), which balances among the members subscribed to each topic.

Ownership comes from the members' subscriptions. Only members of the highest generation are sticky
(older generations were fenced and their claims may be stale); a partition claimed by two members of the
highest generation is kept by neither. In cooperative mode a partition given to a member that does not
claim it, while another member still does, is withheld for this rebalance: its holder revokes it,
rejoins, and the follow-up rebalance assigns it (KIP-429). Keeping a partition one claims is not an
addition, so it is never withheld, even if a stale member claims it too. In eager mode members revoked
everything before joining: nothing is claimed and nothing is withheld.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

import numpy as np

from assignors._balance import Policy, balance, contiguous_fill
from assignors._layout import (
    BoolArray,
    I32Array,
    IntArray,
    claim_arrays,
    stable_group_order,
    subscription_filter,
    topic_layout,
)
from assignors.api import PartitionOffsets
from assignors.classic import COOPERATIVE, EAGER, ClassicAssignment, ClassicSubscription
from assignors.rack import RackInfo


class CooperativeStickyAssignor:
    """`cooperative=False` returns the sticky target without withholding (the plain sticky assignor)."""

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
        member_ids = sorted(subscriptions)
        subs = [subscriptions[m] for m in member_ids]
        out: ClassicAssignment = {m: [] for m in member_ids}
        if not subs:
            return out
        index: dict[frozenset[str], int] = {}
        member_class = np.asarray(
            [index.setdefault(frozenset(s.topics), len(index)) for s in subs], dtype=np.int32
        )
        class_subs = list(index)
        tids, tindex, counts, base = topic_layout(frozenset().union(*class_subs), partitions_per_topic)
        if not tids:
            return out
        class_topics = np.zeros((len(class_subs), len(tids)), dtype=np.bool_)
        for k, sub in enumerate(class_subs):
            class_topics[k, [tindex[t] for t in sub if t in tindex]] = True

        owned = [_by_topic(s.owned_partitions) for s in subs]
        newest = max(s.generation for s in subs)
        sticky_claims = [owned[i] if s.generation == newest else {} for i, s in enumerate(subs)]
        owner = _owner_without_conflicts(
            sticky_claims, tindex, counts, base, subscription_filter(member_class, class_topics)
        )

        ptopic = np.repeat(np.arange(len(tids), dtype=np.int64), counts)
        local = np.arange(int(base[-1]), dtype=np.int64) - base[ptopic]
        partition_major = np.lexsort((ptopic, local))
        rack = RackInfo.build([s.rack_id for s in subs], _Describer(partitions_per_topic), tids, base)
        policy = Policy(fill=rack.contiguous_fill if rack else contiguous_fill, fill_order=partition_major)
        target = balance(owner, member_class, class_topics, counts, policy)

        if self.cooperative:
            claimed, claimant, _ = claim_arrays(owned, tindex, counts, base)
            target[_withheld(target, claimed, claimant)] = -1
        _fill_lists(out, member_ids, tids, base, target)
        return out


class _Describer:
    """Classic subscriptions carry no replica racks; rack matching then has nothing to match."""

    def __init__(self, counts: Mapping[str, int]) -> None:
        self._counts = counts

    def partition_count(self, topic_id: str) -> int:
        return self._counts.get(topic_id, -1)

    def partition_racks(self, topic_id: str, partition: int) -> frozenset[str]:
        return frozenset()


def _by_topic(pairs: tuple[tuple[str, int], ...]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in pairs:
        out.setdefault(t, []).append(p)
    return out


def _owner_without_conflicts(
    claims: Sequence[Mapping[str, Collection[int]]],
    tindex: Mapping[str, int],
    counts: IntArray,
    base: IntArray,
    allowed: Callable[[I32Array, IntArray], BoolArray],
) -> I32Array:
    total = int(base[-1])
    owner = np.full(total, -1, dtype=np.int32)
    glob, member, _ = claim_arrays(claims, tindex, counts, base, allowed)
    if len(glob):
        times = np.bincount(glob, minlength=total)
        single = times[glob] == 1
        owner[glob[single]] = member[single]
    return owner


def _withheld(target: I32Array, claimed: IntArray, claimant: I32Array) -> IntArray:
    """Partitions added to a member that another member still claims (Kafka's leader rejects a
    cooperative assignment that adds a partition some member is revoking in the same round)."""
    total = len(target)
    kept = np.zeros(total, dtype=np.bool_)
    other = np.zeros(total, dtype=np.bool_)
    mine = target[claimed] == claimant
    kept[claimed[mine]] = True
    other[claimed[~mine]] = True
    return np.flatnonzero(other & ~kept)


def _fill_lists(
    out: ClassicAssignment, member_ids: list[str], tids: list[str], base: IntArray, owner: I32Array
) -> None:
    parts = np.flatnonzero(owner >= 0)
    if len(parts) == 0:
        return
    own = owner[parts]
    order = stable_group_order(own, len(member_ids))
    parts, own = parts[order], own[order]
    topic = np.searchsorted(base, parts, side="right") - 1
    pairs = list(zip(map(tids.__getitem__, topic.tolist()), (parts - base[topic]).tolist(), strict=True))
    starts = np.flatnonzero(np.concatenate(([True], own[1:] != own[:-1]))).tolist()
    ends = starts[1:] + [len(parts)]
    for s, e in zip(starts, ends, strict=True):
        out[member_ids[int(own[s])]] = pairs[s:e]
