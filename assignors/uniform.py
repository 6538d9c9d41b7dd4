"""`uniform`: KIP-848's default server assignor.

Balanced within one partition per eligible member, then as sticky as possible; a balanced assignment is
returned unchanged. Homogeneous groups take the seed's constrained path (keep owned up to quota, fill from
unassigned, never steal); heterogeneous groups balance per subscription class (see `_balance`). Unowned
partitions go out in consecutive runs, so each member's result has few topic entries. With rack ids,
partitions being handed out go to same-rack members where possible; owned partitions are kept whatever
their racks, since a move costs more than a cross-rack fetch.

Homogeneous groups starting from nothing, or from a result of this assignor fed back as it was returned,
take `uniform_runs`: the same rules in time proportional to the members and the partitions that move.
"""

from __future__ import annotations

from assignors._balance import Policy, balance, contiguous_fill
from assignors._layout import decode, encode_group
from assignors.api import GroupAssignment, GroupSpec, LagSnapshot, TopicDescriber
from assignors.rack import RackInfo
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
        return assign_general(group, topics) if out is None else out
