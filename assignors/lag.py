"""`lag`: the lag-based assignor of KAFKA-5337 (grantneale/kafka-lag-based-assignor), faithfully.

Topic by topic: partitions in decreasing lag (ties: lower partition first), each to the subscribed member
with the fewest partitions *of that topic*, then the least lag assigned *from that topic*, then the
smaller member id. Lag is `LagSnapshot.lag`: end - committed, never negative; no committed offset counts
0 under `auto.offset.reset=latest`, else the retained log (end - log start). Because its state is per
topic, topics with fewer partitions than members pile onto the lowest member ids; `lag-sticky` is the
cross-topic answer to that. Not sticky.
"""

from __future__ import annotations

import numpy as np

from groupcoord.assignors._greedy import greedy_rounds
from groupcoord.assignors._layout import IntArray, encode_group, fill_assignment, lag_vector
from groupcoord.assignors.api import GroupAssignment, GroupSpec, LagSnapshot, MemberAssignment, TopicDescriber


class LagAssignor:
    name = "lag"

    def assign(
        self, group: GroupSpec, topics: TopicDescriber, lag: LagSnapshot | None = None
    ) -> GroupAssignment:
        enc = encode_group(group, topics, with_owner=False)
        out: dict[str, MemberAssignment] = {m: {} for m in enc.member_ids}
        if enc.n_members == 0 or enc.n_partitions == 0:
            return out
        lags = lag_vector(lag, enc.tindex, enc.counts, enc.base)
        owner = np.full(enc.n_partitions, -1, dtype=np.int64)
        subscribers: dict[bytes, IntArray] = {}
        for t in range(len(enc.topic_ids)):
            column = enc.class_topics[:, t]
            key = column.tobytes()
            subs = subscribers.get(key)
            if subs is None:
                subs = np.flatnonzero(column[enc.member_class])
                subscribers[key] = subs
            lo, hi = int(enc.base[t]), int(enc.base[t + 1])
            seg = lags[lo:hi]
            order = np.argsort(-seg, kind="stable")  # decreasing lag, then lower partition
            pos = greedy_rounds(seg[order], np.zeros(len(subs), dtype=np.float64))
            owner[lo + order] = subs[pos]
        parts = np.arange(enc.n_partitions, dtype=np.int64)
        fill_assignment(out, enc.member_ids, enc.topic_ids, enc.base, parts, owner)
        return out
