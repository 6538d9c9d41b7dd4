"""`uniform`: KIP-848's default server assignor.

Balanced within one partition per eligible member, then as sticky as possible; a balanced assignment is
returned unchanged. Homogeneous groups get Kafka 4.4's answer (`uniform_homogeneous`: Kafka's
UniformHomogeneousAssignmentBuilder, racks ignored as there); heterogeneous groups balance per
subscription class (see `_balance`), rack-aware. A subscription to a topic that does not exist is an
error, as in Kafka.

Homogeneous groups starting from nothing, or from a result of this assignor fed back as it was returned,
take `uniform_runs`: the same rules in time proportional to the members and the partitions that move.
"""

from __future__ import annotations

from assignors._balance import Policy, balance, contiguous_fill
from assignors._layout import decode, encode_group
from assignors.api import AssignorError, GroupAssignment, GroupSpec, LagSnapshot, SubscriptionType, TopicDescriber
from assignors.rack import RackInfo
from assignors.uniform_homogeneous import assign_homogeneous
from assignors.uniform_runs import fresh, incremental


def assign_general(group: GroupSpec, topics: TopicDescriber) -> GroupAssignment:
    """The array path: any input (stale, invalid or hand-made assignments, racks, several classes)."""
    enc = encode_group(group, topics)
    if enc.n_members == 0:
        return {}
    rack = RackInfo.build([s.rack_id for s in enc.specs], topics, enc.topic_ids, enc.base)
    policy = Policy(fill=rack.contiguous_fill if rack else contiguous_fill)
    owner = balance(enc.owner, enc.member_class, enc.class_topics, enc.counts, policy)
    return decode(enc, owner)


class UniformAssignor:
    """KIP-848 `uniform`. Lag is ignored."""

    name = "uniform"

    def assign(
        self, group: GroupSpec, topics: TopicDescriber, lag: LagSnapshot | None = None
    ) -> GroupAssignment:
        out = incremental(group, topics)
        if out is None:
            out = fresh(group, topics)
        if out is not None:
            return out
        if group.subscription_type is SubscriptionType.HOMOGENEOUS:
            return assign_homogeneous(group, topics)
        for t in {t for s in group.members.values() for t in s.subscribed_topic_ids}:
            if topics.partition_count(t) < 0:
                raise AssignorError("members are subscribed to a topic that does not exist in the topic metadata")
        return assign_general(group, topics)
