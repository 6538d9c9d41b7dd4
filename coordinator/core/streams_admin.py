"""Streams groups in the generic admin operations: ListGroups (type "streams"), DescribeGroups and
DeleteGroups. Tasks show as assignments keyed by subtopology id; StreamsGroupDescribe has every detail
(standby and warm-up tasks, topology, process ids)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator.core.errors import Errors
from coordinator.core.messages import DescribedGroup, DescribedMember, GroupResult, ListedGroup
from coordinator.core.results import Result
from coordinator.core.streams_group import StreamsGroups

if TYPE_CHECKING:
    from coordinator.core.shard import GroupCoordinatorShard


def _by_subtopology(tasks: frozenset[tuple[str, int]]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in out.items()}


def describe(streams: StreamsGroups, group_id: str) -> DescribedGroup:
    g = streams.groups[group_id]
    members = []
    for mid in sorted(g.members):
        m, cur, tgt = g.members[mid], g.current.get(mid), g.target.get(mid)
        members.append(DescribedMember(
            member_id=mid, instance_id=m.instance_id, rack_id=m.rack_id,
            member_epoch=cur.member_epoch if cur else 0, state=cur.state if cur else "",
            subscribed_topic_names=(), subscribed_topic_regex=None,
            assignment=_by_subtopology(cur.active) if cur else {},
            target_assignment=_by_subtopology(tgt.active) if tgt and g.target_epoch else {},
            partitions_pending_revocation=_by_subtopology(cur.active_pending_revocation) if cur else {},
            client_id=m.client_id, client_host=m.client_host))
    return DescribedGroup(group_id=group_id, group_type="streams", group_state=streams.state(group_id).value,
                          group_epoch=g.epoch, assignment_epoch=g.target_epoch, assignor_name="sticky",
                          protocol_type="streams", members=members,
                          assignment_timestamp_ms=g.target_timestamp_ms or 0)


class StreamsGroupView:
    """A streams group as a `GroupView` (group.py), for the generic admin operations."""

    group_type = "streams"

    def __init__(self, streams: StreamsGroups, group_id: str) -> None:
        self.streams = streams
        self.group_id = group_id

    def describe(self) -> DescribedGroup:
        return describe(self.streams, self.group_id)

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, "streams", self.streams.state(self.group_id).value, "streams")

    def is_empty(self) -> bool:
        return not self.streams.groups[self.group_id].members

    def member_count(self) -> int:
        return len(self.streams.groups[self.group_id].members)


def delete(shard: GroupCoordinatorShard, group_id: str, result: Result[Any]) -> GroupResult:
    """DeleteGroups for an empty streams group: its records and its committed offsets go."""
    res = shard.streams.delete_group(group_id)
    if res.response == Errors.NON_EMPTY_GROUP:
        return GroupResult(group_id, Errors.NON_EMPTY_GROUP, f"Group {group_id[:64]} still has members.")
    result.records.extend(res.records)
    from coordinator.core.records import OffsetCommitTombstone

    for (topic, p) in list(shard.offsets.committed(group_id)):
        shard._write(result, OffsetCommitTombstone(group_id, topic, p))
    return GroupResult(group_id)
