"""A consumer group as an operation's records will leave it, read without applying them (issue 26: handlers
are pure).

A pure handler writes its records through `Staged.write`: the record goes into the operation's result (the
runtime replays it afterwards, `GroupCoordinatorShard.apply`) and the staged view notes what it changes, as
the record's replayer will (`consumer/replay.py`, `mixed/group.py`): members written or removed, targets,
epochs, classic members' metadata, regex resolutions. The rest of the operation reads the group through the
view (the member it updated, the epoch it bumped, the subscriptions once its member changed), as Kafka's
handlers read the local values they computed and `TargetAssignmentBuilder` takes the pending member changes.
The group itself is never changed here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core.consumer.group import (
    ConsumerGroup,
    ConsumerGroupMember,
    count_into,
    owned_partitions,
)
from groupcoord.coordinator.core.consumer.member_changes import with_assignment, with_metadata
from groupcoord.coordinator.core.consumer.target_store import TargetAssignment
from groupcoord.coordinator.core.modern.group import EMPTY_ASSIGNMENT_EPOCH
from groupcoord.coordinator.core.records import (
    ConsumerGroupClassicMemberMetadata,
    ConsumerGroupClassicMemberMetadataTombstone,
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupCurrentMemberAssignmentTombstone,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMemberMetadataTombstone,
    ConsumerGroupMetadata,
    ConsumerGroupMetadataTombstone,
    ConsumerGroupRegularExpression,
    ConsumerGroupRegularExpressionTombstone,
    ConsumerGroupTargetAssignmentMember,
    ConsumerGroupTargetAssignmentMemberTombstone,
    ConsumerGroupTargetAssignmentMetadata,
    Partitions,
)
from groupcoord.coordinator.core.results import Result

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard

OwnerLookup = Callable[[str, int], "str | None"]


class Staged:
    """`group` plus what the operation wrote so far (see the module docstring)."""

    __slots__ = ("_counts", "assignment_timestamp_ms", "classic", "deleted", "group", "group_epoch", "group_id",
                 "marks", "members", "metadata_hash", "resolved", "result", "shard", "spec_reset", "target",
                 "target_assignment_epoch", "writes")

    def __init__(self, shard: GroupCoordinatorShard, result: Result[Any], group: ConsumerGroup) -> None:
        self.shard = shard
        self.result = result
        self.group = group
        self.group_id = group.group_id
        self.members: dict[str, ConsumerGroupMember | None] = {}  # written members, None: removed
        self.writes: list[tuple[str, ConsumerGroupMember | None]] = []  # in order, for the members' order
        # the marks the records make on the group's spec rows (`ConsumerGroup.put_member` / `remove_member`)
        self.marks: list[tuple[str, bool | None]] = []  # (member id, True: (re)added, False: changed, None: gone)
        self.target: dict[str, Partitions | None] = {}
        self.classic: dict[str, Any | None] = {}
        self.resolved: dict[str, frozenset[str] | None] = {}
        self.group_epoch = group.group_epoch
        self.metadata_hash = group.metadata_hash
        self.target_assignment_epoch = group.target_assignment_epoch
        self.assignment_timestamp_ms = group.assignment_timestamp_ms
        self.deleted = False
        self.spec_reset = False  # a regex record was written: every spec row is rebuilt (`replay._replay_regex`)
        self._counts: tuple[dict[tuple[str, ...], int], dict[str, int], dict[str, int]] | None = None

    # --- writing ----------------------------------------------------------------------------------------
    def write(self, record: Any) -> None:
        self.shard._write(self.result, record)
        t = type(record)
        if t is ConsumerGroupMemberMetadata:
            self._put(with_metadata(self.member(record.member_id) or ConsumerGroupMember(record.member_id), record))
        elif t is ConsumerGroupCurrentMemberAssignment:
            self._put(with_assignment(self.member(record.member_id) or ConsumerGroupMember(record.member_id),
                                      record))
        elif t is ConsumerGroupMemberMetadataTombstone or t is ConsumerGroupCurrentMemberAssignmentTombstone:
            self._remove(record.member_id)
        elif t is ConsumerGroupTargetAssignmentMember:
            self.target[record.member_id] = record.partitions
        elif t is ConsumerGroupTargetAssignmentMemberTombstone:
            self.target[record.member_id] = None
        elif t is ConsumerGroupTargetAssignmentMetadata:
            self.target_assignment_epoch, self.assignment_timestamp_ms = record.assignment_epoch, record.timestamp_ms
        elif t is ConsumerGroupMetadata:
            self.group_epoch, self.metadata_hash = record.epoch, record.metadata_hash
        elif t is ConsumerGroupClassicMemberMetadata:
            self.classic[record.member_id] = record
        elif t is ConsumerGroupClassicMemberMetadataTombstone:
            self.classic[record.member_id] = None
        elif t is ConsumerGroupRegularExpression:
            self.resolved[record.regex] = frozenset(record.topics)
            self.spec_reset = True
        elif t is ConsumerGroupRegularExpressionTombstone:
            self.resolved[record.regex] = None
            self.spec_reset = True
        elif t is ConsumerGroupMetadataTombstone:
            self.deleted = True

    def _put(self, member: ConsumerGroupMember) -> None:
        mid = member.member_id
        old = self.member(mid)
        if old is None:
            self.marks.append((mid, True))
        elif (old.subscribed_topic_names != member.subscribed_topic_names or old.rack_id != member.rack_id
              or old.subscribed_topic_regex != member.subscribed_topic_regex
              or old.instance_id != member.instance_id):
            self.marks.append((mid, False))
        self.members[mid] = member
        self.writes.append((mid, member))
        self._counts = None

    def _remove(self, mid: str) -> None:
        self.classic[mid] = None
        if self.member(mid) is None:
            return
        self.marks.append((mid, None))
        self.members[mid] = None
        self.writes.append((mid, None))
        self._counts = None

    # --- reading ----------------------------------------------------------------------------------------
    def member(self, member_id: str) -> ConsumerGroupMember | None:
        members = self.members
        if member_id in members:
            return members[member_id]
        return self.group.members.get(member_id)

    def has_member(self, member_id: str) -> bool:
        return self.member(member_id) is not None

    def member_count(self) -> int:
        base = self.group.members
        n = len(base)
        for mid, m in self.members.items():
            n += (m is not None) - (mid in base)
        return n

    def post_members(self) -> dict[str, ConsumerGroupMember]:
        """The members once the records apply, in the group's order (a copy: O(members))."""
        out = dict(self.group.members)
        for mid, m in self.writes:
            if m is None:
                out.pop(mid, None)
            else:
                out[mid] = m
        return out

    def mark_dirty(self, dirty: dict[str, bool]) -> None:
        """Make on `dirty` (a copy of the group's `spec_dirty`) the marks the records will make."""
        for mid, mark in self.marks:
            if mark is True:
                dirty.pop(mid, None)
                dirty[mid] = True
            elif mark is False:
                dirty.setdefault(mid, False)
            else:
                dirty[mid] = True

    def static_members(self) -> Mapping[str, str]:
        """instance id -> member id once the records apply (`ConsumerGroup.static_members`)."""
        g = self.group
        if not self.writes:
            return g.static_members
        out = dict(g.static_members)
        now: dict[str, ConsumerGroupMember | None] = {}
        for mid, m in self.writes:
            old = now[mid] if mid in now else g.members.get(mid)
            if old is not None and old.instance_id and (m is None or old.instance_id != m.instance_id) \
                    and out.get(old.instance_id) == mid:
                del out[old.instance_id]
            if m is not None and m.instance_id:
                out[m.instance_id] = mid
            now[mid] = m
        return out

    def is_classic(self, member_id: str) -> bool:
        if member_id in self.classic:
            return self.classic[member_id] is not None
        return member_id in self.group.classic_members

    def classic_member(self, member_id: str) -> Any:
        if member_id in self.classic:
            return self.classic[member_id]
        return self.group.classic_members.get(member_id)

    def in_target(self, member_id: str) -> bool:
        if member_id in self.target:
            return self.target[member_id] is not None
        return member_id in self.group.target_assignment

    def target_of(self, member_id: str) -> Partitions | None:
        if member_id in self.target:
            return self.target[member_id]
        store = self.group.target_assignment
        return store.get(member_id)

    def target_for(self, member_id: str) -> Partitions:
        """`ConsumerGroup.target_for` once the records apply."""
        if self.target_assignment_epoch == 0:
            return {}
        return self.target_of(member_id) or {}

    @property
    def effective_target_epoch(self) -> int:
        return max(self.target_assignment_epoch, EMPTY_ASSIGNMENT_EPOCH)

    def target_store(self) -> TargetAssignment:
        """The target store once the records apply: the group's own when they set no target, else a copy."""
        store = self.group.target_assignment
        if not self.target:
            return store
        store = store.copy()
        for mid, partitions in self.target.items():
            if partitions is not None:
                store[mid] = partitions
            elif mid in store:
                del store[mid]
        return store

    def counts(self) -> tuple[Mapping[tuple[str, ...], int], Mapping[str, int], Mapping[str, int]]:
        """(subscription counts, assignor counts, regex subscribers) once the records apply."""
        g = self.group
        if not self.members:
            return g.subscription_counts, g.assignor_counts, g.regex_subscribers
        if self._counts is None:
            subs, assignors, regexes = dict(g.subscription_counts), dict(g.assignor_counts), dict(g.regex_subscribers)
            for mid, m in self.members.items():
                for member, delta in ((g.members.get(mid), -1), (m, 1)):
                    if member is None:
                        continue
                    count_into(subs, member.subscribed_topic_names, delta)
                    if member.server_assignor:
                        count_into(assignors, member.server_assignor, delta)
                    if member.subscribed_topic_regex:
                        count_into(regexes, member.subscribed_topic_regex, delta)
            self._counts = (subs, assignors, regexes)
        return self._counts

    def regexes(self) -> set[str]:
        return set(self.counts()[2])

    def resolved_regexes(self) -> set[str]:
        out = set(self.group.resolved_regexes)
        for regex, topics in self.resolved.items():
            if topics is None:
                out.discard(regex)
            else:
                out.add(regex)
        return out

    def resolved_topics(self, regex: str) -> frozenset[str]:
        if regex in self.resolved:
            return self.resolved[regex] or frozenset()
        return self.group.resolved_topics(regex)

    def subscribed_topics(self) -> set[str]:
        """`ConsumerGroup.subscribed_topics` once the records apply."""
        names: set[str] = set().union(*self.counts()[0])
        for regex in self.regexes():
            names.update(self.resolved_topics(regex))
        return names

    def owner_lookup(self) -> OwnerLookup:
        """Who holds a partition once the records apply (`ConsumerGroup.partition_owner`)."""
        base = self.group.partition_owner
        moved: dict[str, ConsumerGroupMember | None] = {}
        for mid, m in self.members.items():
            old = self.group.members.get(mid)
            if (old is None or m is None or old.assigned_partitions is not m.assigned_partitions
                    or old.partitions_pending_revocation is not m.partitions_pending_revocation):
                moved[mid] = m
        if not moved:
            return lambda t, p: base.get((t, p))
        owned: dict[tuple[str, int], str] = {}
        for mid, m in moved.items():
            if m is not None:
                for tp in owned_partitions(m):
                    owned[tp] = mid

        def lookup(t: str, p: int) -> str | None:
            tp = (t, p)
            holder = owned.get(tp)
            if holder is not None:
                return holder
            holder = base.get(tp)
            return None if holder in moved else holder

        return lookup
