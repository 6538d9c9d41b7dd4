"""How a consumer member's records change the member: `with_metadata` and `with_assignment`, the one definition
that replay (`consumer/replay.py`) and the staged view of a pure handler (`consumer/staged.py`) both use, so an
operation reads a member exactly as replaying its record will leave it. (Building those records from a member is
`consumer/group.py`'s, which the group's snapshot needs.)"""

from __future__ import annotations

import dataclasses

from groupcoord.coordinator.core.consumer.group import ConsumerGroupMember, MemberState
from groupcoord.coordinator.core.records import ConsumerGroupCurrentMemberAssignment, ConsumerGroupMemberMetadata


def with_metadata(old: ConsumerGroupMember, r: ConsumerGroupMemberMetadata) -> ConsumerGroupMember:
    """`old` as a member-metadata record leaves it (replay and `consumer/staged.py` alike)."""
    return dataclasses.replace(
        old, instance_id=r.instance_id, rack_id=r.rack_id, client_id=r.client_id, client_host=r.client_host,
        subscribed_topic_names=r.subscribed_topic_names, subscribed_topic_regex=r.subscribed_topic_regex,
        server_assignor=r.server_assignor, rebalance_timeout_ms=r.rebalance_timeout_ms, principal=r.principal,
    )


def with_assignment(old: ConsumerGroupMember, r: ConsumerGroupCurrentMemberAssignment) -> ConsumerGroupMember:
    """`old` as a current-assignment record leaves it."""
    return dataclasses.replace(
        old, member_epoch=r.member_epoch, previous_member_epoch=r.previous_member_epoch,
        state=MemberState(r.state), assigned_partitions=r.assigned_partitions,
        partitions_pending_revocation=r.partitions_pending_revocation,
    )
