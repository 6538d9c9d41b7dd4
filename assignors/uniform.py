"""`uniform`: KIP-848's default server assignor, giving Kafka 4.4's assignment.

Balanced within one partition per eligible member, then as sticky as possible; a balanced assignment is
returned unchanged. Homogeneous groups follow Kafka's UniformHomogeneousAssignmentBuilder
(`uniform_homogeneous`), heterogeneous ones its UniformHeterogeneousAssignmentBuilder
(`uniform_heterogeneous`): same visiting orders and tie-breaks, so the same partitions stay and move.
Racks are ignored, as in Kafka 4.4. A subscription to a topic that does not exist is an error, as in Kafka.

Homogeneous groups starting from nothing, or from a result of this assignor fed back as it was returned,
take `uniform_runs`: the same rules in time proportional to the members and the partitions that move.
Those whose current assignment is the coordinator's owner array take `uniform_compact`: the same result
as the general path, reading only the members that release or receive partitions.
"""

from __future__ import annotations

from groupcoord.assignors.api import GroupAssignment, GroupSpec, LagSnapshot, SubscriptionType, TopicDescriber
from groupcoord.assignors.uniform_compact import assign_homogeneous_compact
from groupcoord.assignors.uniform_heterogeneous import assign_heterogeneous
from groupcoord.assignors.uniform_homogeneous import assign_homogeneous
from groupcoord.assignors.uniform_runs import fresh, incremental


class UniformAssignor:
    """KIP-848 `uniform`. Lag is ignored."""

    name = "uniform"

    def assign(
        self, group: GroupSpec, topics: TopicDescriber, lag: LagSnapshot | None = None
    ) -> GroupAssignment:
        if group.subscription_type is not SubscriptionType.HOMOGENEOUS:
            return assign_heterogeneous(group, topics)
        out = None
        if group.current is not None:  # the coordinator's input: read the owner array, not every member
            out = assign_homogeneous_compact(group, topics)
        if out is None:
            out = incremental(group, topics)
        if out is None:
            out = fresh(group, topics)
        return assign_homogeneous(group, topics) if out is None else out
