"""The shard's whole state as records (for snapshots), and what to arm after a load.

Replaying `snapshot_records(shard)` into an empty shard rebuilds the same state, so a snapshot can replace
the log that led to it. Timers are not state: after a load every member's session timer is armed anew
(a member that died while the coordinator was down is fenced one session timeout later) and rebalance
timers for members still revoking.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from coordinator.core.consumer_group import ConsumerGroup, MemberState
from coordinator.core.records import (
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMetadata,
    ConsumerGroupRegularExpression,
    ConsumerGroupTargetAssignmentMember,
    ConsumerGroupTargetAssignmentMetadata,
    GroupConfig,
    GroupEmptySince,
)
from coordinator.core.results import Result


def snapshot_records(shard: Any) -> Iterator[Any]:
    for group_id, configs in shard.group_configs.items():
        yield GroupConfig(group_id, dict(configs))
    for group in list(shard.groups.values()):
        if isinstance(group, ConsumerGroup):
            gid = group.group_id
            yield ConsumerGroupMetadata(gid, group.group_epoch, group.metadata_hash)
            for regex, topics in group.resolved_regexes.items():
                yield ConsumerGroupRegularExpression(gid, regex, tuple(sorted(topics)),
                                                     group.regex_resolved_ms.get(regex, 0))
            for m in group.members.values():
                yield ConsumerGroupMemberMetadata(
                    gid, m.member_id, m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names,
                    m.subscribed_topic_regex, m.server_assignor, m.rebalance_timeout_ms, m.principal)
                if m.member_id in group.classic_members:
                    yield group.classic_members[m.member_id]
                yield ConsumerGroupCurrentMemberAssignment(
                    gid, m.member_id, m.member_epoch, m.previous_member_epoch, m.state.value, m.assigned_partitions,
                    m.partitions_pending_revocation)
            for member_id, partitions in group.target_assignment.items():
                yield ConsumerGroupTargetAssignmentMember(gid, member_id, partitions)
            if group.target_assignment_epoch:
                yield ConsumerGroupTargetAssignmentMetadata(gid, group.target_assignment_epoch,
                                                            group.assignment_timestamp_ms)
        else:
            yield from group.snapshot_records()
    for group_id in shard.offsets.group_ids():
        yield from shard.offsets.committed(group_id).values()
    for group_id, since in shard.empty_since.items():
        yield GroupEmptySince(group_id, since)
    streams = getattr(shard, "streams", None)
    if streams is not None:
        yield from streams.snapshot_records()


def timers_after_load(shard: Any, now: int, group_ids: frozenset[str] | None = None) -> Result[None]:
    """The timers to arm after a load: every group's, plus the offset-retention check; with `group_ids`, only
    those groups' (a rollback rebuilds a few groups while every other timer is armed already)."""
    from coordinator.core.retention import ensure_timer
    from coordinator.core.shard import rebalance_timer, session_timer

    result: Result[None] = Result(None)
    if group_ids is None and (shard.groups or shard.offsets):
        ensure_timer(shard, now, result)
    groups = shard.groups.values() if group_ids is None else [g for k, g in shard.groups.items() if k in group_ids]
    for group in groups:
        if isinstance(group, ConsumerGroup):
            session_ms = shard.session_timeout_ms(group.group_id)
            for m in group.members.values():
                classic = group.classic_members.get(m.member_id)  # a classic member's own session timeout
                ms = classic.session_timeout_ms if classic is not None else session_ms
                shard.arm_timer(result, session_timer(group.group_id, m.member_id), now + ms)
                if m.state is MemberState.UNREVOKED_PARTITIONS:
                    shard._rebalance_timer_epochs[(group.group_id, m.member_id)] = m.member_epoch
                    shard.arm_timer(result, rebalance_timer(group.group_id, m.member_id), now + m.rebalance_timeout_ms)
        else:
            after_load = getattr(group, "timers_after_load", None)
            if after_load is not None:
                result.timers.extend(after_load(now))
    streams = getattr(shard, "streams", None)
    if streams is not None:
        result.timers.extend(streams.timers_after_load(now, group_ids))
    return result
