"""`roundrobin` (client-side, classic protocol): Kafka's RoundRobinAssignor, for completeness.

All partitions in (topic, partition) order are dealt to members in member-id order, skipping members not
subscribed to the partition's topic. Balanced when subscriptions are equal; neither sticky nor
rack-aware, and eager only, as in Kafka. Registered under Kafka's protocol name "roundrobin"
(`get_classic_assignor("round-robin")` finds it too).
"""

from __future__ import annotations

from collections.abc import Mapping

from groupcoord.assignors.api import PartitionOffsets
from groupcoord.assignors.classic import EAGER, ClassicAssignment, ClassicSubscription


class RoundRobinAssignor:
    name = "roundrobin"
    supported_protocols: tuple[str, ...] = (EAGER,)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, ClassicSubscription],
        lag: Mapping[tuple[str, int], PartitionOffsets] | None = None,
        auto_offset_reset: str = "latest",
    ) -> ClassicAssignment:
        members = sorted(subscriptions)
        out: ClassicAssignment = {m: [] for m in members}
        if not members:
            return out
        topic_sets = [frozenset(subscriptions[m].topics) for m in members]
        topics = sorted(frozenset().union(*topic_sets))
        n = len(members)
        cursor = 0
        for t in topics:
            for p in range(max(0, partitions_per_topic.get(t, 0))):
                while t not in topic_sets[cursor]:
                    cursor = (cursor + 1) % n
                out[members[cursor]].append((t, p))
                cursor = (cursor + 1) % n
        return out
