"""Count-first, then least-lag greedy placement, done in rounds instead of one partition at a time.

Handing partitions (in a fixed order) one by one to the member with (fewest placed so far, least lag,
lowest index) is the rule of the lag-based assignor (KAFKA-5337) and of lag-sticky's fill. Because the
count comes first, it proceeds in rounds: in each round every member still below its cap takes exactly
one partition, and within a round members are served in (lag at round start, index) order. So a round
is one stable argsort, and a topic with as many partitions as members takes one numpy call instead of a
heap operation per partition. With few members and many partitions rounds get short, and a heap is
cheaper; both give the same result.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

import numpy as np

from groupcoord.assignors._layout import IntArray

# reorder(slot members, partitions) -> partitions: used for rack matching inside a round
Reorder = Callable[[Sequence[int], Sequence[int]], list[int]]


def greedy_rounds(
    part_lags: IntArray,
    member_lag: np.ndarray,
    caps: IntArray | None = None,
    parts: IntArray | None = None,
    reorder: Reorder | None = None,
) -> IntArray:
    """Member position for each partition, in the given order. `member_lag` (float64) is updated in place.
    `caps[i]`: most partitions member i may take (None: unbounded). `parts`/`reorder`: optional global
    ids and a per-round reordering (rack matching) of them."""
    n, total = len(member_lag), len(part_lags)
    out = np.empty(total, dtype=np.int64)
    if total == 0:
        return out
    n_rounds = -(-total // n) if caps is None else int(caps.max())
    if n_rounds * (10 + 0.03 * n) > total and reorder is None:
        return _greedy_heap(part_lags, member_lag, caps)
    everyone = np.arange(n)
    pos = 0
    r = 0
    while pos < total:
        active = everyone if caps is None else np.flatnonzero(caps > r)
        order = active[np.argsort(member_lag[active], kind="stable")]
        k = min(len(order), total - pos)
        chosen = order[:k]
        if reorder is not None and parts is not None:
            seg = parts[pos : pos + k]
            perm = reorder(chosen.tolist(), seg.tolist())
            where = {g: i for i, g in enumerate(seg.tolist())}
            idx = np.asarray([where[g] for g in perm], dtype=np.int64)
            parts[pos : pos + k] = seg[idx]
            part_lags[pos : pos + k] = part_lags[pos : pos + k][idx]
        out[pos : pos + k] = chosen
        member_lag[chosen] += part_lags[pos : pos + k]
        pos += k
        r += 1
    return out


def _greedy_heap(part_lags: IntArray, member_lag: np.ndarray, caps: IntArray | None) -> IntArray:
    lags = member_lag.tolist()
    limit = caps.tolist() if caps is not None else None
    heap = [(0, lags[i], i) for i in range(len(lags)) if limit is None or limit[i] > 0]
    heapq.heapify(heap)
    out: list[int] = []
    for lag in part_lags.tolist():
        r, ml, i = heap[0]
        out.append(i)
        ml += lag
        lags[i] = ml
        if limit is None or r + 1 < limit[i]:
            heapq.heapreplace(heap, (r + 1, ml, i))
        else:
            heapq.heappop(heap)
    member_lag[:] = lags
    return np.asarray(out, dtype=np.int64)
