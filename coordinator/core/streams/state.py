"""A streams group's state (KIP-1071), changed only by replaying its records (`apply_record`) and, for its
volatile fields, the volatile effects operations return (`apply_effect`), and its answers to the shard's generic
paths (the `Group` protocol: admin, offsets, retention, snapshots, loads, partition moves).

What a heartbeat does to it is `group.py`'s (`StreamsGroups`); this module holds no operation.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.group import STREAMS
from groupcoord.coordinator.core.limits import ECHO_MAX_CHARS
from groupcoord.coordinator.core.messages import DescribedGroup, DescribedMember, ListedGroup
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.core.modern.group import ModernGroup
from groupcoord.coordinator.core.results import ScheduleTimer, TimerOp
from groupcoord.coordinator.core.streams.records import (
    StreamsGroupCurrentMemberAssignment,
    StreamsGroupCurrentMemberAssignmentTombstone,
    StreamsGroupMemberMetadata,
    StreamsGroupMemberMetadataTombstone,
    StreamsGroupMetadata,
    StreamsGroupMetadataTombstone,
    StreamsGroupTargetAssignmentMember,
    StreamsGroupTargetAssignmentMemberTombstone,
    StreamsGroupTargetAssignmentMetadata,
    StreamsGroupTopologyRecord,
    StreamsGroupTopologyTombstone,
    Tasks,
)
from groupcoord.coordinator.core.streams.topology import ConfiguredTopology, StreamsTopology

STABLE, UNREVOKED, UNRELEASED = "STABLE", "UNREVOKED_TASKS", "UNRELEASED_TASKS"


class StreamsGroupState(enum.Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class StreamsOwner(Protocol):
    """What a streams group reads from the streams groups that hold it: its derived state and its settings."""

    def state(self, group_id: str) -> StreamsGroupState: ...

    def session_timeout_ms(self, group_id: str) -> int: ...


@dataclass(slots=True)
class StreamsGroup(ModernGroup):
    """The modern group's epochs, target epoch and timestamp and in-flight run (`modern/group.py`), plus what
    only streams groups keep: topology, tasks, static members. The volatile fields (marked, and the in-flight
    run) a failover may lose harmlessly. It answers the `Group` protocol (group.py) itself."""

    first_assignment_not_before_ms: int = 0
    last_assignment_configs: tuple[tuple[str, str], ...] = ()
    topology: StreamsTopology | None = None
    # dicts in a stored group; copy-on-write overlays in an operation's working view (working.py)
    members: MutableMapping[str, StreamsGroupMemberMetadata] = field(default_factory=dict)
    static_members: MutableMapping[str, str] = field(default_factory=dict)  # instance id -> member id
    current: MutableMapping[str, StreamsGroupCurrentMemberAssignment] = field(default_factory=dict)
    target: MutableMapping[str, StreamsGroupTargetAssignmentMember] = field(default_factory=dict)
    # volatile (set by the volatile effects below, or by the replay)
    owned_active: MutableMapping[str, Tasks] = field(default_factory=dict)
    shutdown_requested: bool = False
    # Moves whenever a member's tasks or endpoint may have changed: each replayed member or current-assignment
    # record moves it, so a load or a put-back moves it too (a member then fetches its endpoints once more).
    endpoint_epoch: int = 0
    # memo of the topology configured against the metadata image (topology, image, result), which a read fills
    configured_cache: tuple[object, object, ConfiguredTopology] | None = None
    owner: StreamsOwner | None = field(default=None, compare=False, repr=False)  # the StreamsGroups holding it

    group_type = STREAMS
    tracks_empty_since = False  # Kafka: streams offsets expire from their commit time (no GroupEmptySince)

    def persisted(self) -> tuple[object, ...]:
        """The replayed part, for replay-equality checks."""
        return (self.group_epoch, self.metadata_hash, self.first_assignment_not_before_ms,
                self.last_assignment_configs, self.topology,
                self.members, self.current, self.target, self.target_assignment_epoch, self.assignment_timestamp_ms)

    # --- the Group protocol (group.py), with Kafka 4.4's StreamsGroup rules -------------------------------
    def _owner(self) -> StreamsOwner:
        assert self.owner is not None, "a streams group answers for itself only inside StreamsGroups"
        return self.owner

    def describe(self) -> DescribedGroup:
        """Tasks show as assignments keyed by subtopology id; StreamsGroupDescribe has every detail."""
        members = []
        for mid in sorted(self.members):
            m, cur, tgt = self.members[mid], self.current.get(mid), self.target.get(mid)
            members.append(DescribedMember(
                member_id=mid, instance_id=m.instance_id, rack_id=m.rack_id,
                member_epoch=cur.member_epoch if cur else 0, state=cur.state if cur else "",
                subscribed_topic_names=(), subscribed_topic_regex=None,
                assignment=_by_subtopology(cur.active) if cur else {},
                target_assignment=_by_subtopology(tgt.active) if tgt and self.target_assignment_epoch else {},
                partitions_pending_revocation=_by_subtopology(cur.active_pending_revocation) if cur else {},
                client_id=m.client_id, client_host=m.client_host))
        return DescribedGroup(group_id=self.group_id, group_type=STREAMS,
                              group_state=self._owner().state(self.group_id).value, group_epoch=self.group_epoch,
                              assignment_epoch=self.target_assignment_epoch, assignor_name="sticky",
                              protocol_type=STREAMS, members=members,
                              assignment_timestamp_ms=self.assignment_timestamp_ms)

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, STREAMS, self._owner().state(self.group_id).value, STREAMS)

    def topics_in_use(self) -> set[str]:
        """Source and repartition source topics of the topology, while the group has members
        (Kafka's isSubscribedToTopic)."""
        if not self.members or self.topology is None:
            return set()
        out: set[str] = set()
        for s in self.topology.subtopologies:
            out.update(s.source_topics)
            out.update(t.name for t in s.repartition_source_topics)
        return out

    def _check_member_epoch(self, member_id: str, epoch: int) -> None:
        """Kafka's validateMemberEpoch: any mismatch, older or newer, is STALE_MEMBER_EPOCH."""
        if member_id not in self.members:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id[:ECHO_MAX_CHARS]} is not a member "
                                                             f"of group {self.group_id[:ECHO_MAX_CHARS]}.")
        cur = self.current.get(member_id)
        expected = cur.member_epoch if cur is not None else 0
        if epoch != expected:
            raise CoordinatorError(Errors.STALE_MEMBER_EPOCH, f"The received member epoch {epoch} does not match "
                                                              f"the expected member epoch {expected}.")

    def validate_offset_commit(self, member_id: str, instance_id: str | None, epoch: int,
                               partitions: list[tuple[str, int]],
                               image: MetadataImage) -> Mapping[tuple[str, int], Errors]:
        """An epoch -1 commit from outside the group is accepted only while the group has no members."""
        if epoch < 0 and not self.members:
            return {}
        self._check_member_epoch(member_id, epoch)
        return {}

    def validate_offset_fetch(self, member_id: str, member_epoch: int) -> None:
        self._check_member_epoch(member_id, member_epoch)

    def deletion_records(self) -> list[Any]:
        """The tombstones that delete an empty group (Kafka's createGroupTombstoneRecords)."""
        gid = self.group_id
        out: list[object] = [StreamsGroupTargetAssignmentMemberTombstone(gid, mid) for mid in self.target]
        if self.topology is not None:
            out.append(StreamsGroupTopologyTombstone(gid))
        out.append(StreamsGroupMetadataTombstone(gid))
        return out

    def snapshot_records(self) -> Iterator[Any]:
        gid = self.group_id
        yield StreamsGroupMetadata(gid, self.group_epoch, self.metadata_hash, self.first_assignment_not_before_ms,
                                   self.last_assignment_configs)
        if self.topology is not None:
            yield StreamsGroupTopologyRecord(gid, self.topology)
        yield from self.members.values()
        yield from self.current.values()
        yield from self.target.values()
        if self.target_assignment_epoch:
            yield StreamsGroupTargetAssignmentMetadata(gid, self.target_assignment_epoch, self.assignment_timestamp_ms)

    def timers_after_load(self, now: int) -> list[TimerOp]:
        """Timers are not state: after a load every member's session timer is armed anew, revoking members'
        rebalance timers too, and a group whose target is behind gets an assignment attempt at once."""
        gid = self.group_id
        session = self._owner().session_timeout_ms(gid)
        timers: list[TimerOp] = []
        for mid, m in self.members.items():
            timers.append(ScheduleTimer(session_key(gid, mid), now + session))
            cur = self.current.get(mid)
            if cur is not None and cur.state == UNREVOKED:
                timers.append(ScheduleTimer(rebalance_key(gid, mid), now + m.rebalance_timeout_ms))
        if self.members and self.target_assignment_epoch < self.group_epoch:
            timers.append(ScheduleTimer(assign_key(gid), now))
        return timers


def _by_subtopology(tasks: frozenset[tuple[str, int]]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in out.items()}


def apply_record(groups: MutableMapping[str, StreamsGroup], rec: object, owner: StreamsOwner | None = None) -> None:
    """Replay one record (the only way streams group state changes)."""
    gid: str = rec.group_id  # type: ignore[attr-defined]
    if isinstance(rec, StreamsGroupMetadataTombstone):
        groups.pop(gid, None)
        return
    g = groups.get(gid)
    if g is None:
        g = groups[gid] = StreamsGroup(gid, owner=owner)
    if isinstance(rec, _ENDPOINT_INPUTS):
        g.endpoint_epoch += 1
    if isinstance(rec, StreamsGroupMetadata):
        g.group_epoch, g.metadata_hash = rec.epoch, rec.metadata_hash
        g.first_assignment_not_before_ms = rec.first_assignment_not_before_ms
        g.last_assignment_configs = rec.last_assignment_configs
    elif isinstance(rec, StreamsGroupTopologyRecord):
        g.topology = rec.topology
    elif isinstance(rec, StreamsGroupTopologyTombstone):
        g.topology = None
    elif isinstance(rec, StreamsGroupMemberMetadata):
        _drop_static(g, rec.member_id)
        g.members[rec.member_id] = rec
        if rec.instance_id is not None:
            g.static_members[rec.instance_id] = rec.member_id
    elif isinstance(rec, StreamsGroupMemberMetadataTombstone):
        _drop_static(g, rec.member_id)
        g.members.pop(rec.member_id, None)
        g.owned_active.pop(rec.member_id, None)
    elif isinstance(rec, StreamsGroupTargetAssignmentMember):
        g.target[rec.member_id] = rec
    elif isinstance(rec, StreamsGroupTargetAssignmentMemberTombstone):
        g.target.pop(rec.member_id, None)
    elif isinstance(rec, StreamsGroupTargetAssignmentMetadata):
        g.target_assignment_epoch, g.assignment_timestamp_ms = rec.assignment_epoch, rec.timestamp_ms
    elif isinstance(rec, StreamsGroupCurrentMemberAssignment):
        g.current[rec.member_id] = rec
    elif isinstance(rec, StreamsGroupCurrentMemberAssignmentTombstone):
        g.current.pop(rec.member_id, None)
    else:
        raise TypeError(f"not a streams group record: {type(rec).__name__}")


_ENDPOINT_INPUTS = (StreamsGroupCurrentMemberAssignment, StreamsGroupCurrentMemberAssignmentTombstone,
                    StreamsGroupMemberMetadata)


@dataclass(frozen=True, slots=True)
class ShutdownRequested:
    """A volatile effect (`Result.memory`): a member of `group_id` asked the application to shut down."""

    group_id: str


@dataclass(frozen=True, slots=True)
class OwnedActive:
    """A volatile effect: `member_id` of `group_id` reported the active tasks it owns."""

    group_id: str
    member_id: str
    tasks: Tasks


def apply_effect(groups: Mapping[str, StreamsGroup], effect: ShutdownRequested | OwnedActive) -> None:
    """Apply one of streams groups' own volatile effects (an offloaded run's are every modern type's)."""
    g = groups.get(effect.group_id)
    if g is None:
        return
    if isinstance(effect, OwnedActive):
        g.owned_active[effect.member_id] = effect.tasks
    else:
        g.shutdown_requested = True


def _drop_static(g: StreamsGroup, member_id: str) -> None:
    old = g.members.get(member_id)
    if old is not None and old.instance_id is not None and g.static_members.get(old.instance_id) == member_id:
        del g.static_members[old.instance_id]


def session_key(group_id: str, member_id: str) -> tuple[str, ...]:
    return ("streams-session", group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> tuple[str, ...]:
    return ("streams-rebalance", group_id, member_id)


def assign_key(group_id: str) -> tuple[str, ...]:
    return ("streams-assign", group_id)


class StreamsGroupsIn(MutableMapping[str, StreamsGroup]):
    """The streams groups of a store every group type shares (the shard's `groups`): a group id has one type, so
    this view sees only the ids a streams group holds, and adds or drops groups in that one store."""

    def __init__(self, store: MutableMapping[str, Any]) -> None:
        self._store = store

    def __getitem__(self, group_id: str) -> StreamsGroup:
        group = self._store[group_id]
        if not isinstance(group, StreamsGroup):
            raise KeyError(group_id)
        return group

    def __setitem__(self, group_id: str, group: StreamsGroup) -> None:
        self._store[group_id] = group

    def __delitem__(self, group_id: str) -> None:
        self[group_id]  # noqa: B018 (KeyError unless a streams group holds the id)
        del self._store[group_id]

    def __iter__(self) -> Iterator[str]:
        return (gid for gid, g in list(self._store.items()) if isinstance(g, StreamsGroup))

    def __len__(self) -> int:
        return sum(1 for _ in self)
