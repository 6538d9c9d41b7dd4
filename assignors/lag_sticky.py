"""`lag-sticky`: balance total lag per member across all topics, with few moves. Ours; no Kafka equivalent.

Why: the lag assignor of KAFKA-5337 balances each topic on its own, so a group reading many small topics
piles them onto the lowest member ids, and it reassigns everything on every rebalance. Here lag is
balanced over the whole group, counts stay balanced exactly as under `uniform`, and a partition moves only
when that buys a real lag improvement.

Algorithm
1. Counts: the `uniform` engine (`_balance`) keeps owned partitions up to each member's count target; a
   member over target gives up its highest-lag partitions first.
2. Fill: unowned partitions, in decreasing lag, go to the member with the fewest partitions placed so
   far in this fill, then the least total lag (LPT within the count constraint; see `_greedy`). With
   rack ids, partitions are matched to same-rack members within each round of equal-count placement.
3. Refine: repeatedly take the member A with the most lag. If it is within `move_threshold` x mean lag of
   the mean, stop. Otherwise, among the `candidates` least-loaded members B, find the single move (A one
   partition above B, same subscriptions) or swap (counts unchanged; across subscriptions only between
   members with equal counts and only partitions both may hold) that brings max(lag A, lag B) closest to
   their midpoint; apply it only if it lowers max(lag A, lag B) by more than `move_threshold` x mean. If
   no B offers such a step, A is set aside and the next member is tried; set-aside members are checked
   again whenever steps were made since. Refinement ignores racks.

Guarantees
- Every subscribed partition is assigned exactly once, to a subscribed member, and partition counts are
  balanced by the same rule as `uniform` (within one of each other among members with equal
  subscriptions); refinement moves and swaps never change that.
- Idempotent: the same group, metadata and lags give back the same assignment (nothing moves). Scaling
  every lag by the same factor moves nothing either: the threshold is relative to the mean.
- Each refinement step lowers the larger of the two lags involved by more than move_threshold x mean, so
  the sum of squared member lags drops by at least 2 (move_threshold x mean)^2 per step, which bounds
  the number of steps (a backstop of 4 x (partitions + members) iterations also applies).
- On return, every member has lag <= (1 + move_threshold) x mean, or no single move or swap with any of
  the `candidates` least-loaded members lowers its lag by more than move_threshold x mean.
"""

from __future__ import annotations

import numpy as np

from groupcoord.assignors._balance import FillFn, Policy, balance, contiguous_fill
from groupcoord.assignors._greedy import greedy_rounds
from groupcoord.assignors._layout import BoolArray, Encoded, I32Array, IntArray, decode, encode_group, lag_vector
from groupcoord.assignors.api import GroupAssignment, GroupSpec, LagSnapshot, TopicDescriber
from groupcoord.assignors.rack import RackInfo

DEFAULT_MOVE_THRESHOLD = 0.02


class LagStickyAssignor:
    """`move_threshold`: fraction of the mean member lag a move or swap must gain (default 0.02, i.e. 2%):
    higher moves fewer partitions, lower balances more tightly. `candidates`: least-loaded members
    examined per step."""

    name = "lag-sticky"

    def __init__(self, move_threshold: float = DEFAULT_MOVE_THRESHOLD, candidates: int = 8) -> None:
        if not move_threshold > 0:
            raise ValueError("move_threshold must be > 0 (a fraction of the mean member lag)")
        if candidates < 1:
            raise ValueError("candidates must be >= 1")
        self.move_threshold = move_threshold
        self.candidates = candidates

    def assign(
        self, group: GroupSpec, topics: TopicDescriber, lag: LagSnapshot | None = None
    ) -> GroupAssignment:
        enc = encode_group(group, topics)
        if enc.n_members == 0:
            return {}
        lags = lag_vector(lag, enc.tindex, enc.counts, enc.base)
        rack = RackInfo.build([s.rack_id for s in enc.specs], topics, enc.topic_ids, enc.base)
        if lags.any():
            fill: FillFn = _LptFill(lags, enc.n_members, rack)
            policy = Policy(fill=fill, keep_key=lags, fill_order=np.argsort(-lags, kind="stable"))
        else:  # no lag information: nothing to balance but counts, so fill like `uniform`
            policy = Policy(fill=rack.contiguous_fill if rack else contiguous_fill)
        owner = balance(enc.owner, enc.member_class, enc.class_topics, enc.counts, policy)
        if enc.n_partitions:
            _refine(owner, lags, enc, self.move_threshold, self.candidates)
        return decode(enc, owner)


class _LptFill:
    """The engine's fill: decreasing lag, to (fewest placed in this fill, least total lag, lowest index)."""

    def __init__(self, lags: IntArray, n_members: int, rack: RackInfo | None) -> None:
        self._lags = lags
        self._n = n_members
        self._rack = rack
        self._member_lag: np.ndarray | None = None

    def __call__(self, incoming: IntArray, members: IntArray, caps: IntArray, owner: I32Array) -> None:
        if self._member_lag is None:  # first call: all releases are done, owned lag is final
            a = owner >= 0
            self._member_lag = np.bincount(
                owner[a], weights=self._lags[a].astype(np.float64), minlength=self._n
            )
        parts = incoming[np.argsort(-self._lags[incoming], kind="stable")]
        mlag = self._member_lag[members]
        pos = greedy_rounds(
            self._lags[parts].copy(), mlag, caps, parts, self._rack.match if self._rack else None
        )
        owner[parts] = members[pos].astype(np.int32)
        self._member_lag[members] = mlag


def _refine(owner: I32Array, lags: IntArray, enc: Encoded, threshold: float, candidates: int) -> None:
    n = enc.n_members
    flags = np.asarray(lags, dtype=np.float64)
    member_lag = np.bincount(owner, weights=flags, minlength=n)
    mean = float(member_lag.sum()) / n
    if mean <= 0:
        return
    tau = threshold * mean
    limit = mean + tau
    ptopic = enc.partition_topics()
    homogeneous = enc.n_classes == 1
    cls = enc.member_class
    ctop: BoolArray = enc.class_topics
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(n + 1))
    parts_of = [order[bounds[i] : bounds[i + 1]].tolist() for i in range(n)]
    frozen = np.zeros(n, dtype=np.bool_)
    steps_since_check = 0
    k = min(candidates + 1, n) - 1
    for _ in range(4 * (len(owner) + n)):  # a safety net: each applied step lowers sum(lag^2)
        masked = np.where(frozen, -np.inf, member_lag)
        a = int(np.argmax(masked))
        if masked[a] <= limit:
            if steps_since_check == 0 or not frozen.any():
                return  # a fixed point: nobody above the limit has a step in this very state
            frozen[:] = False  # steps happened since members were frozen: check them again
            steps_since_check = 0
            continue
        idle = np.argpartition(member_lag, k)[: k + 1]
        idle = idle[np.lexsort((idle, member_lag[idle]))]
        step = None
        for b in idle.tolist():
            if b != a:
                step = _best_step(a, b, parts_of, flags, member_lag, tau, homogeneous, cls, ctop, ptopic)
                if step is not None:
                    break
        if step is None:
            frozen[a] = True
            continue
        b, x, y = step
        parts_of[a].remove(x)
        parts_of[b].append(x)
        owner[x] = b
        member_lag[a] -= flags[x]
        member_lag[b] += flags[x]
        if y >= 0:
            parts_of[b].remove(y)
            parts_of[a].append(y)
            owner[y] = a
            member_lag[b] -= flags[y]
            member_lag[a] += flags[y]
        frozen[b] = False
        steps_since_check += 1


def _best_step(
    a: int,
    b: int,
    parts_of: list[list[int]],
    lags: np.ndarray,
    member_lag: np.ndarray,
    tau: float,
    homogeneous: bool,
    cls: I32Array,
    ctop: BoolArray,
    ptopic: IntArray,
) -> tuple[int, int, int] | None:
    """(b, partition a gives, partition b gives or -1) bringing max(lag a, lag b) closest to the midpoint,
    if it gains more than tau."""
    gap = float(member_lag[a] - member_lag[b])
    if gap <= 2 * tau:
        return None
    half = gap / 2
    xa = np.asarray(parts_of[a], dtype=np.int64)
    yb = np.asarray(parts_of[b], dtype=np.int64)
    same_class = homogeneous or cls[a] == cls[b]
    count_a, count_b = len(xa), len(yb)
    if not same_class:
        if count_a != count_b:
            return None
        xa = xa[ctop[cls[b], ptopic[xa]]]
        yb = yb[ctop[cls[a], ptopic[yb]]]
    best: tuple[float, int, int] | None = None
    la = lags[xa]
    if same_class and count_a == count_b + 1 and len(xa):
        ok = (la > tau) & (la < gap - tau)
        if ok.any():
            dist = np.where(ok, np.abs(la - half), np.inf)
            i = int(np.argmin(dist))
            best = (float(dist[i]), int(xa[i]), -1)
    if (same_class or count_a == count_b) and len(xa) and len(yb):
        srt = np.argsort(lags[yb], kind="stable")
        yb = yb[srt]
        lb = lags[yb]
        j = np.clip(np.searchsorted(lb, la - half), 1, len(lb)) - 1
        for jj in (j, np.minimum(j + 1, len(lb) - 1)):
            d = la - lb[jj]
            ok = (d > tau) & (d < gap - tau)
            if ok.any():
                dist = np.where(ok, np.abs(d - half), np.inf)
                i = int(np.argmin(dist))
                if best is None or dist[i] < best[0]:
                    best = (float(dist[i]), int(xa[i]), int(yb[jj[i]]))
    if best is None:
        return None
    return b, best[1], best[2]
