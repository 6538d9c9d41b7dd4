"""Share group (KIP-932) state: members, target assignment, share-partitions; replay and the group protocol.

Theory of operation
-------------------
A share group is a queue over Kafka topics: every member subscribed to a topic may be assigned the same
partitions (the `simple` assignor balances members over partitions as well), and the records of a partition
are handed out one range at a time under an acquisition lock (`share/partition.py`).

Epochs work as in consumer groups, without revocation: the *group epoch* bumps when a member joins, leaves,
is fenced, or changes its subscription or rack, or when the subscribed topics' metadata changes. The
*target assignment epoch* is the group epoch an assignment was computed for; KIP-1263 lets it lag (batching
by `share.assignment.interval.ms` from when the previous computation finished, runs offloaded to the
background executor with one run in flight per group) and reserves epoch 1 for the empty assignment before
the first computation (new groups start at epoch 2). There is no revoke-before-assign: a partition may have
several members anyway, so a member moves to the target epoch and its target partitions at its next
heartbeat, minus the topics it no longer subscribes to (KIP-1263's reconciliation rule).

States: EMPTY (no members), STABLE (members), DEAD (deleted). Nothing changes except by replaying records
(`share/records.py`), so replaying the log (or a snapshot) rebuilds the same state, and the volatile effects an
operation returns beside them for what no log keeps (the offloaded run in flight, `modern/group.py`; the metadata
image the hash was last checked against, `MetadataImageSeen`), applied by `GroupCoordinatorShard.apply`.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.messages import DescribedGroup, DescribedMember, ListedGroup
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.core.modern.group import ModernGroup
from groupcoord.coordinator.core.modern.replay import modern_replayers
from groupcoord.coordinator.core.principals import check_member_principal
from groupcoord.coordinator.core.results import ScheduleTimer, TimerKey, TimerOp
from groupcoord.coordinator.core.share.partition import Batch, RecordState, SharePartition
from groupcoord.coordinator.core.share.records import (
    Partitions,
    ShareGroupCurrentMemberAssignment,
    ShareGroupCurrentMemberAssignmentTombstone,
    ShareGroupMemberMetadata,
    ShareGroupMemberMetadataTombstone,
    ShareGroupMetadata,
    ShareGroupMetadataTombstone,
    ShareGroupTargetAssignmentMember,
    ShareGroupTargetAssignmentMemberTombstone,
    ShareGroupTargetAssignmentMetadata,
    SharePartitionState,
    SharePartitionStateTombstone,
)

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard

GROUP_TYPE = "share"
ASSIGNOR_NAME = "simple"
SESSION_TIMER = "share-session"
LOCK_TIMER = "share-lock"


class ShareGroupState(enum.StrEnum):
    EMPTY = "EMPTY"
    STABLE = "STABLE"
    DEAD = "DEAD"


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    principal: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned_partitions: Partitions = field(default_factory=dict)


def subscribed_topic_names(members: Iterable[ShareGroupMember]) -> set[str]:
    """Every topic some member of `members` subscribes to."""
    out: set[str] = set()
    for m in members:
        out.update(m.subscribed_topic_names)
    return out


@dataclass(frozen=True, slots=True)
class MetadataImageSeen:
    """A volatile effect (`Result.memory`): share group `group_id`'s metadata hash was checked against `image`
    (a heartbeat recomputes the hash only when the image changed since)."""

    group_id: str
    image: MetadataImage


def session_timer(group_id: str, member_id: str) -> TimerKey:
    return (SESSION_TIMER, group_id, member_id)


def lock_timer(group_id: str, topic_id: str, partition: int) -> TimerKey:
    return (LOCK_TIMER, group_id, topic_id, str(partition))


@dataclass(slots=True, eq=False)
class ShareGroup(ModernGroup):
    owner: Any = field(default=None, repr=False)  # ShareConfigs: the session timeout for timers after a load
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target_assignment: dict[str, Partitions] = field(default_factory=dict)
    partitions: dict[tuple[str, int], SharePartition] = field(default_factory=dict)

    group_type = GROUP_TYPE

    def target_for(self, member_id: str) -> Partitions:
        return self.target_assignment.get(member_id, {}) if self.target_assignment_epoch else {}

    def state(self) -> ShareGroupState:
        if self.deleted:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(self) -> set[str]:
        return subscribed_topic_names(self.members.values())

    # --- the protocol the shard and admin use for every non-consumer group type --------------------------
    def describe(self) -> DescribedGroup:
        members = [
            DescribedMember(
                member_id=m.member_id, instance_id=None, rack_id=m.rack_id, member_epoch=m.member_epoch,
                state="STABLE", subscribed_topic_names=m.subscribed_topic_names, subscribed_topic_regex=None,
                assignment=dict(m.assigned_partitions), target_assignment=dict(self.target_for(m.member_id)),
                partitions_pending_revocation={}, client_id=m.client_id, client_host=m.client_host)
            for m in sorted(self.members.values(), key=lambda m: m.member_id)
        ]
        return DescribedGroup(group_id=self.group_id, group_type=GROUP_TYPE, group_state=self.state().value,
                              group_epoch=self.group_epoch, assignment_epoch=self.target_assignment_epoch,
                              assignor_name=ASSIGNOR_NAME, protocol_type=GROUP_TYPE, members=members,
                              assignment_timestamp_ms=self.assignment_timestamp_ms)

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, GROUP_TYPE, self.state().value, GROUP_TYPE)

    def should_expire(self) -> bool:
        """As Kafka's ShareGroup: an empty share group is not deleted by the offsets retention check (its
        delivery state would go with it); DeleteGroups deletes it."""
        return False

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               partitions: list[tuple[str, int]],
                               image: MetadataImage) -> dict[tuple[str, int], Errors]:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is not a consumer group.")

    def validate_offset_delete(self) -> None:
        """Kafka's ShareGroup.validateOffsetDelete: a share group has no committed offsets to delete."""
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is not a consumer group.")

    def deletion_records(self) -> list[Any]:
        gid = self.group_id
        out: list[Any] = [SharePartitionStateTombstone(gid, t, p) for (t, p) in sorted(self.partitions)]
        out.extend(ShareGroupTargetAssignmentMemberTombstone(gid, m) for m in sorted(self.target_assignment))
        for m in sorted(self.members):
            out.append(ShareGroupCurrentMemberAssignmentTombstone(gid, m))
            out.append(ShareGroupMemberMetadataTombstone(gid, m))
        out.append(ShareGroupMetadataTombstone(gid))
        return out

    def snapshot_records(self) -> Iterator[Any]:
        gid = self.group_id
        yield ShareGroupMetadata(gid, self.group_epoch, self.metadata_hash)
        for m in self.members.values():
            yield member_record(gid, m)
            yield assignment_record(gid, m)
        for mid, parts in self.target_assignment.items():
            yield ShareGroupTargetAssignmentMember(gid, mid, parts)
        if self.target_assignment_epoch:
            yield ShareGroupTargetAssignmentMetadata(gid, self.target_assignment_epoch, self.assignment_timestamp_ms)
        for (t, p), sp in self.partitions.items():
            yield partition_record(gid, t, p, sp)

    def timers_after_load(self, now: int) -> list[TimerOp]:
        """Every member's session timer anew, and a lock-expiry timer per partition holding locks."""
        session_ms = self.owner.session_timeout_ms(self.group_id) if self.owner is not None else 45000
        timers: list[TimerOp] = [ScheduleTimer(session_timer(self.group_id, mid), now + session_ms)
                                 for mid in self.members]
        for (t, p), sp in self.partitions.items():
            deadline = sp.next_lock_deadline()
            if deadline is not None:
                timers.append(ScheduleTimer(lock_timer(self.group_id, t, p), deadline))
        return timers


def member_record(gid: str, m: ShareGroupMember) -> ShareGroupMemberMetadata:
    return ShareGroupMemberMetadata(gid, m.member_id, m.rack_id, m.client_id, m.client_host,
                                    m.subscribed_topic_names, m.principal)


def assignment_record(gid: str, m: ShareGroupMember) -> ShareGroupCurrentMemberAssignment:
    return ShareGroupCurrentMemberAssignment(gid, m.member_id, m.member_epoch, m.previous_member_epoch,
                                             m.assigned_partitions)


def partition_record(gid: str, topic_id: str, partition: int, sp: SharePartition) -> SharePartitionState:
    return SharePartitionState(gid, topic_id, partition, sp.start_offset, sp.next_offset, tuple(
        (b.first, b.last, int(b.state), b.delivery_count, b.member_id, b.lock_deadline_ms) for b in sp.batches))


# --- replay ----------------------------------------------------------------------------------------------------
def replayers(shard: GroupCoordinatorShard, owner: Any) -> dict[type, Callable[[Any], None]]:
    """The share group's record replayers, and its volatile effect's (`owner`: the settings its groups read)."""
    def group(gid: str) -> ShareGroup:
        g = shard.groups.get(gid)
        if not isinstance(g, ShareGroup):
            g = ShareGroup(gid, owner=owner)
            shard.groups[gid] = g
        return g

    def existing(gid: str) -> ShareGroup | None:
        g = shard.groups.get(gid)
        return g if isinstance(g, ShareGroup) else None

    def tombstone(r: ShareGroupMetadataTombstone) -> None:
        g = existing(r.group_id)
        if g is not None:
            del shard.groups[r.group_id]
            g.deleted = True

    def member(r: ShareGroupMemberMetadata) -> None:
        g = group(r.group_id)
        old = g.members.get(r.member_id) or ShareGroupMember(r.member_id)
        g.members[r.member_id] = dataclasses.replace(
            old, rack_id=r.rack_id, client_id=r.client_id, client_host=r.client_host,
            subscribed_topic_names=r.subscribed_topic_names, principal=r.principal)

    def remove_member(r: ShareGroupMemberMetadataTombstone | ShareGroupCurrentMemberAssignmentTombstone) -> None:
        g = existing(r.group_id)
        if g is not None:
            g.members.pop(r.member_id, None)

    def current(r: ShareGroupCurrentMemberAssignment) -> None:
        g = group(r.group_id)
        old = g.members.get(r.member_id) or ShareGroupMember(r.member_id)
        g.members[r.member_id] = dataclasses.replace(
            old, member_epoch=r.member_epoch, previous_member_epoch=r.previous_member_epoch,
            assigned_partitions=r.assigned_partitions)

    def partition(r: SharePartitionState) -> None:
        batches = tuple(Batch(f, la, RecordState(s), c, m, d) for f, la, s, c, m, d in r.batches)
        group(r.group_id).partitions[(r.topic_id, r.partition)] = SharePartition(r.start_offset, r.next_offset,
                                                                                  batches)

    def partition_tombstone(r: SharePartitionStateTombstone) -> None:
        g = existing(r.group_id)
        if g is not None:
            g.partitions.pop((r.topic_id, r.partition), None)

    def image_seen(e: MetadataImageSeen) -> None:
        g = existing(e.group_id)
        if g is not None:
            g.metadata_image_seen = e.image

    out = modern_replayers(group, existing, attrgetter("target_assignment"), ShareGroupMetadata,
                           ShareGroupTargetAssignmentMember, ShareGroupTargetAssignmentMemberTombstone,
                           ShareGroupTargetAssignmentMetadata)
    out.update({
        ShareGroupMetadataTombstone: tombstone, ShareGroupMemberMetadata: member,
        ShareGroupMemberMetadataTombstone: remove_member, ShareGroupCurrentMemberAssignment: current,
        ShareGroupCurrentMemberAssignmentTombstone: remove_member, SharePartitionState: partition,
        SharePartitionStateTombstone: partition_tombstone, MetadataImageSeen: image_seen,
    })
    return out


def share_group(shard: GroupCoordinatorShard, group_id: str, create: bool) -> ShareGroup:
    """The share group `group_id` names, for every share operation (`share/handlers.py`, `share/acquisition.py`):
    a group id has one type, so a group of another type is GROUP_ID_NOT_FOUND, as a missing one unless `create`."""
    group = shard.groups.get(group_id)  # any type: a group id has one type
    if isinstance(group, ShareGroup):
        return group
    if group is not None:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
    if not create:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    return ShareGroup(group_id, owner=shard.share_configs)  # not in `shard.groups`: its first record creates it


def share_member(shard: GroupCoordinatorShard, group_id: str, member_id: str,
                 principal: str | None) -> tuple[ShareGroup, ShareGroupMember]:
    """An existing member of an existing share group, sent by the principal that joined it."""
    group = share_group(shard, group_id, create=False)
    member = group.members.get(member_id)
    if member is None:
        raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
    check_member_principal(member.principal, principal, member_id, group_id)
    return group, member
