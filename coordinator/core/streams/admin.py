"""Streams groups in the generic admin operations: ListGroups (type "streams"), DescribeGroups and
DeleteGroups. Tasks show as assignments keyed by subtopology id; StreamsGroupDescribe has every detail
(standby and warm-up tasks, topology, process ids)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.group import GroupMember
from groupcoord.coordinator.core.limits import ECHO_MAX_CHARS
from groupcoord.coordinator.core.messages import DescribedGroup, DescribedMember, GroupResult, ListedGroup
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.core.records import OffsetCommitTombstone
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.streams.group import StreamsGroups

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard


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
    """A streams group as an `OffsetGroup` (group.py), for the generic admin and offset operations, with
    Kafka 4.4's StreamsGroup rules: validateOffsetCommit / validateOffsetFetch check the streams member's
    epoch (any mismatch is STALE_MEMBER_EPOCH, older or newer: its validateMemberEpoch), an epoch -1 commit
    from outside the group is accepted only while the group has no members, OffsetDelete has no group-level
    check, the topology's source topics count as subscribed while the group has members
    (isSubscribedToTopic), and offsets expire from their commit time (offsetExpirationCondition: no
    GroupEmptySince is written for streams groups)."""

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

    @property
    def members(self) -> Mapping[str, GroupMember]:
        return self.streams.groups[self.group_id].members

    def should_expire(self) -> bool:
        return True

    def topics_in_use(self) -> set[str]:
        """Source and repartition source topics of the topology, while the group has members."""
        g = self.streams.groups[self.group_id]
        if not g.members or g.topology is None:
            return set()
        out: set[str] = set()
        for s in g.topology.subtopologies:
            out.update(s.source_topics)
            out.update(t.name for t in s.repartition_source_topics)
        return out

    def _check_member_epoch(self, member_id: str, epoch: int) -> None:
        g = self.streams.groups[self.group_id]
        if member_id not in g.members:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id[:ECHO_MAX_CHARS]} is not a member "
                                                             f"of group {self.group_id[:ECHO_MAX_CHARS]}.")
        cur = g.current.get(member_id)
        expected = cur.member_epoch if cur is not None else 0
        if epoch != expected:
            raise CoordinatorError(Errors.STALE_MEMBER_EPOCH, f"The received member epoch {epoch} does not match "
                                                              f"the expected member epoch {expected}.")

    def validate_offset_commit(self, member_id: str, instance_id: str | None, epoch: int,
                               partitions: list[tuple[str, int]],
                               image: MetadataImage) -> Mapping[tuple[str, int], Errors]:
        if epoch < 0 and not self.streams.groups[self.group_id].members:
            return {}
        self._check_member_epoch(member_id, epoch)
        return {}

    def validate_offset_fetch(self, member_id: str, member_epoch: int) -> None:
        self._check_member_epoch(member_id, member_epoch)

    def validate_offset_delete(self) -> None:
        """No group-level check (Kafka's StreamsGroup.validateOffsetDelete is empty)."""

    def deletion_records(self) -> list[Any]:
        return self.streams.deletion_records(self.group_id)


def delete(shard: GroupCoordinatorShard, group_id: str, result: Result[Any]) -> GroupResult:
    """DeleteGroups for an empty streams group: its records and its committed offsets go."""
    res = shard.streams.delete_group(group_id)
    if res.response == Errors.NON_EMPTY_GROUP:
        return GroupResult(group_id, Errors.NON_EMPTY_GROUP, f"Group {group_id[:64]} still has members.")
    result.records.extend(res.records)
    for (topic, p) in list(shard.offsets.committed(group_id)):
        shard._write(result, OffsetCommitTombstone(group_id, topic, p))
    return GroupResult(group_id)
