"""Consumer group (KIP-848) state: the group, its members, target assignment and partition ownership.

Theory of operation
-------------------
Three epochs order everything. The *group epoch* bumps whenever the inputs of the assignment change: a
member joins, leaves or is fenced, a subscription changes, or the metadata of a subscribed topic changes.
The *target assignment epoch* is the group epoch an assignment was computed for; KIP-1263 lets it lag
behind the group epoch (batching by `assignment.interval.ms`, runs offloaded to the background executor),
and before the first computation the target is the empty assignment at epoch 1 (new groups start at
group epoch 2). Each member's *member epoch* is the target epoch it has reconciled to. Always
member epoch <= target assignment epoch <= group epoch.

A member reconciles towards its target in steps (see `consumer/reconciliation.py`): it first revokes the partitions
it must give up (UNREVOKED_PARTITIONS, still at its old epoch); only when the client reports they are gone
does it move to the target epoch, receiving the target partitions that are free; partitions still owned by
another member are withheld (UNRELEASED_PARTITIONS) until that member revokes them. `partition_owner` maps
every partition to the one member that holds it (assigned or pending revocation), so no partition is ever
given to two members at once: the central safety property.

Group state is derived: EMPTY (no members), ASSIGNING (group epoch > target epoch), RECONCILING (some member
not yet STABLE at the target epoch), STABLE. DEAD marks a deleted group.

Nothing here changes except through the replay of records (see `shard.py`), so replaying the log rebuilds it,
and of the volatile effects operations return for what no record keeps (`consumer/effects.py`).
The group answers the generic paths (admin, offsets, retention, snapshots, loads) through the `Group` protocol
(`group.py`); its timers are the shard's (`ConsumerTimers`), whose deadlines the heartbeat path re-arms.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from groupcoord.coordinator.core.consumer.target_store import TargetAssignment
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.messages import DescribedGroup, DescribedMember, ListedGroup
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.core.modern.group import MemberTombstones, ModernGroup
from groupcoord.coordinator.core.records import (
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
    PartitionEpochs,
    Partitions,
)
from groupcoord.coordinator.core.results import Result, TimerKey, TimerOp


class MemberState(enum.StrEnum):
    STABLE = "STABLE"
    UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"
    UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"
    UNKNOWN = "UNKNOWN"


class ConsumerGroupState(enum.StrEnum):
    EMPTY = "EMPTY"
    ASSIGNING = "ASSIGNING"
    RECONCILING = "RECONCILING"
    STABLE = "STABLE"
    DEAD = "DEAD"


LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
GROUP_TYPE = "consumer"
MEMBER_TOMBSTONES = MemberTombstones(ConsumerGroupCurrentMemberAssignmentTombstone,
                                     ConsumerGroupTargetAssignmentMemberTombstone, ConsumerGroupMemberMetadataTombstone)
JOIN_TIMER = "classic-member-join"  # Kafka's consumer-group join timeout of a classic member (mixed/group.py)
SYNC_TIMER = "classic-member-sync"  # ... and its sync timeout


def session_timer(group_id: str, member_id: str) -> TimerKey:
    return ("session", group_id, member_id)


def rebalance_timer(group_id: str, member_id: str) -> TimerKey:
    return ("rebalance", group_id, member_id)


def join_timer(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (JOIN_TIMER, group_id, member_id)


def sync_timer(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (SYNC_TIMER, group_id, member_id)


class ConsumerTimers(Protocol):
    """The shard's timer bookkeeping (the shard implements it): a fired timer checks its deadline there, and a
    rebalance timer the member epoch it was armed for, as Kafka's timer callbacks check the member."""

    rebalance_timer_epochs: dict[tuple[str, str], int]

    def session_timeout_ms(self, group_id: str) -> int: ...

    def arm_timer(self, result: Result[Any], key: TimerKey, deadline_ms: int) -> None: ...


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 0
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned_partitions: PartitionEpochs = field(default_factory=dict)
    partitions_pending_revocation: Partitions = field(default_factory=dict)
    principal: str | None = None  # who joined it (core/principals.py)

    def assigned_sets(self) -> dict[str, frozenset[int]]:
        return {t: frozenset(p) for t, p in self.assigned_partitions.items() if p}


@dataclass(slots=True)
class RegexResolutionInflight:
    """A background resolution of the group's regexes (not persisted: a failover resolves them again)."""

    run_id: int
    image: object  # the metadata image it resolves against


class SpecCache:
    """The assignor's view of a group's members (`target_assignment.snapshot_spec`), memoised: member id ->
    (subscribed topic ids, rack, instance id) as of `image`; how many rows share each subscription; members
    changed since, True for those added or removed (None: rebuild every row); the last snapshot's serial
    (`SpecLineage`). Derived from the members: a group rebuilt from the log starts without it (every row is
    built anew), and taking a snapshot fills it (`SpecTaken`). Not state: tests/purity.py skips it."""

    __slots__ = ("dirty", "image", "rows", "serial", "subscriptions")

    def __init__(self) -> None:
        self.rows: dict[str, Any] = {}
        self.subscriptions: dict[frozenset[str], int] = {}
        self.dirty: dict[str, bool] | None = None
        self.image: object = None
        self.serial: int | None = None


@dataclass(slots=True)
class ConsumerGroup(ModernGroup):
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target_assignment: TargetAssignment = field(default_factory=TargetAssignment)  # arrays, not frozensets
    partition_owner: dict[tuple[str, int], str] = field(default_factory=dict)
    last_assignor: str = ""
    # The assignor's view of the members, a memo of them kept up to date as they change so that snapshotting
    # the group for a run costs what changed (`SpecCache`, read as `spec_rows` ... `spec_serial` below).
    spec_cache: SpecCache = field(default_factory=SpecCache, compare=False, repr=False)
    # members added since the last assignor run started (None: unknown, e.g. after a load): with the run's
    # delta they are all the members that may lack a target when it completes (`target_records`)
    added_since_run: dict[str, None] | None = field(default=None, compare=False, repr=False)
    # members removed since then (None: unknown): the run's result names no one else who may be gone, so
    # applying it looks at these instead of at every member (`reconcile_result_with_group`)
    removed_since_run: dict[str, None] | None = field(default=None, compare=False, repr=False)
    # members per subscribed-names tuple and per server assignor: the group's subscribed names and the
    # assignor vote without a pass over every member
    subscription_counts: dict[tuple[str, ...], int] = field(default_factory=dict, compare=False, repr=False)
    assignor_counts: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    # (metadata image, (subscribed names, regex, resolved names) -> topic ids): members subscribing alike share
    # one frozenset, computed once per image
    subscription_cache: tuple[object, dict[Any, frozenset[str]]] = field(
        default_factory=lambda: (None, {}), compare=False, repr=False)
    # KIP-848: subscribed regex -> the topic names it resolved to (replayed from records), and when
    resolved_regexes: dict[str, frozenset[str]] = field(default_factory=dict)
    regex_resolved_ms: dict[str, int] = field(default_factory=dict)
    regex_inflight: RegexResolutionInflight | None = None
    regex_image_seen: object = None  # the metadata image the last resolution ran against
    regex_refreshed_ms: int = 0  # when the last resolution finished (not persisted: refresh after a load)
    regex_subscribers: dict[str, int] = field(default_factory=dict)  # regex -> members subscribed to it
    # Mixed groups: member id -> its ConsumerGroupClassicMemberMetadata (see mixed/group.py), for the members
    # that speak the classic protocol (JoinGroup/SyncGroup/Heartbeat) in this consumer group.
    classic_members: dict[str, Any] = field(default_factory=dict)
    timers: ConsumerTimers | None = field(default=None, repr=False, compare=False)

    group_type = GROUP_TYPE

    @property
    def spec_rows(self) -> dict[str, Any]:
        return self.spec_cache.rows

    @spec_rows.setter
    def spec_rows(self, rows: dict[str, Any]) -> None:
        self.spec_cache.rows = rows

    @property
    def spec_subscriptions(self) -> dict[frozenset[str], int]:
        return self.spec_cache.subscriptions

    @spec_subscriptions.setter
    def spec_subscriptions(self, subscriptions: dict[frozenset[str], int]) -> None:
        self.spec_cache.subscriptions = subscriptions

    @property
    def spec_dirty(self) -> dict[str, bool] | None:
        return self.spec_cache.dirty

    @spec_dirty.setter
    def spec_dirty(self, dirty: dict[str, bool] | None) -> None:
        self.spec_cache.dirty = dirty

    @property
    def spec_image(self) -> object:
        return self.spec_cache.image

    @spec_image.setter
    def spec_image(self, image: object) -> None:
        self.spec_cache.image = image

    @property
    def spec_serial(self) -> int | None:
        return self.spec_cache.serial

    @spec_serial.setter
    def spec_serial(self, serial: int | None) -> None:
        self.spec_cache.serial = serial

    def target_for(self, member_id: str) -> Partitions:
        if self.target_assignment_epoch == 0 or member_id not in self.target_assignment:
            return {}
        return self.target_assignment[member_id]

    def state(self) -> ConsumerGroupState:
        if self.deleted:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.target_assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        target = self.effective_target_epoch
        for m in self.members.values():
            if m.member_epoch != target or m.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_topic_names(self) -> set[str]:
        # members mostly subscribe alike: one union per distinct subscription, not per member
        return set().union(*self.subscription_counts)

    def regexes(self) -> set[str]:
        return set(self.regex_subscribers)

    def resolved_topics(self, regex: str) -> frozenset[str]:
        """What `regex` resolved to; nothing until its first resolution lands."""
        return self.resolved_regexes.get(regex, frozenset())

    def subscribed_topics(self) -> set[str]:
        """Topic names subscribed by name or through a resolved regex."""
        names = self.subscribed_topic_names()
        for regex in self.regexes():
            names.update(self.resolved_topics(regex))
        return names

    # --- the Group protocol (group.py) ------------------------------------------------------------------
    def describe(self) -> DescribedGroup:
        members = [
            DescribedMember(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                state=m.state.value, subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex, assignment=m.assigned_sets(),
                target_assignment=dict(self.target_for(m.member_id)),
                partitions_pending_revocation=dict(m.partitions_pending_revocation),
                client_id=m.client_id, client_host=m.client_host,
            )
            for m in sorted(self.members.values(), key=lambda m: m.member_id)
        ]
        return DescribedGroup(
            group_id=self.group_id, group_type=GROUP_TYPE, group_state=self.state().value,
            group_epoch=self.group_epoch, assignment_epoch=self.target_assignment_epoch,
            assignor_name=self.last_assignor, protocol_type=GROUP_TYPE, members=members,
            assignment_timestamp_ms=self.assignment_timestamp_ms,
        )

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, GROUP_TYPE, self.state().value, GROUP_TYPE)

    def topics_in_use(self) -> set[str] | None:
        """Kafka's ConsumerGroup: offsets of topics no member subscribes to may expire and be deleted."""
        return self.subscribed_topics()

    def validate_offset_commit(self, member_id: str, instance_id: str | None, epoch: int,
                               partitions: list[tuple[str, int]],
                               image: MetadataImage) -> dict[tuple[str, int], Errors]:
        """KIP-848: the member epoch; KIP-1251: an older epoch is fine for a partition the member has held since
        that epoch, and for one it still holds pending revocation (it is the only holder; its assignment epoch is
        not persisted here, so any older epoch is accepted for it: see the README's "Differences from Kafka")."""
        if not member_id and epoch < 0:
            if self.members:
                raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID,
                                       f"Group {self.group_id} has members; commits from outside it are rejected.")
            return {}
        member = self.members.get(member_id)
        if member is None:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not in group {self.group_id}.")
        if epoch > member.member_epoch:
            raise CoordinatorError(Errors.STALE_MEMBER_EPOCH,
                                   f"Commit epoch {epoch} is newer than member epoch {member.member_epoch}.")
        if epoch == member.member_epoch:
            return {}
        errors: dict[tuple[str, int], Errors] = {}
        for name, p in partitions:
            t = image.by_name.get(name)
            if t is None:
                errors[(name, p)] = Errors.STALE_MEMBER_EPOCH
                continue
            since = member.assigned_partitions.get(t.topic_id, {}).get(p)
            if since is None and p in member.partitions_pending_revocation.get(t.topic_id, ()):
                continue
            if since is None or since > epoch:
                errors[(name, p)] = Errors.STALE_MEMBER_EPOCH
        return errors

    def validate_offset_fetch(self, member_id: str, member_epoch: int) -> None:
        if not member_id:
            return
        member = self.members.get(member_id)
        if member is None:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not in group {self.group_id}.")
        if member_epoch != member.member_epoch:
            raise CoordinatorError(Errors.STALE_MEMBER_EPOCH,
                                   f"Member epoch {member_epoch} does not match the current {member.member_epoch}.")

    def deletion_records(self) -> list[Any]:
        gid = self.group_id
        out: list[Any] = [ConsumerGroupTargetAssignmentMemberTombstone(gid, mid) for mid in self.target_assignment]
        for mid in self.members:
            out.append(ConsumerGroupCurrentMemberAssignmentTombstone(gid, mid))
            out.append(ConsumerGroupMemberMetadataTombstone(gid, mid))
        out.extend(ConsumerGroupRegularExpressionTombstone(gid, regex) for regex in sorted(self.resolved_regexes))
        out.append(ConsumerGroupMetadataTombstone(gid))
        return out

    def snapshot_records(self) -> Iterator[Any]:
        gid = self.group_id
        yield ConsumerGroupMetadata(gid, self.group_epoch, self.metadata_hash)
        for regex, topics in self.resolved_regexes.items():
            resolved_ms = self.regex_resolved_ms.get(regex, 0)
            yield ConsumerGroupRegularExpression(gid, regex, tuple(sorted(topics)), resolved_ms)
        for m in self.members.values():
            yield member_metadata_record(gid, m)
            if m.member_id in self.classic_members:
                yield self.classic_members[m.member_id]
            yield current_assignment_record(gid, m)
        for member_id, partitions in self.target_assignment.items():
            yield ConsumerGroupTargetAssignmentMember(gid, member_id, partitions)
        if self.target_assignment_epoch:
            yield ConsumerGroupTargetAssignmentMetadata(gid, self.target_assignment_epoch, self.assignment_timestamp_ms)

    def timers_after_load(self, now: int) -> list[TimerOp]:
        """Every member's session timer anew (a classic member's own session timeout), and a rebalance timer
        for each member still revoking."""
        timers = self.timers
        assert timers is not None, "a consumer group is created by the shard, which gives it its timers"
        result: Result[None] = Result(None)
        gid = self.group_id
        session_ms = timers.session_timeout_ms(gid)
        for m in self.members.values():
            classic = self.classic_members.get(m.member_id)
            ms = classic.session_timeout_ms if classic is not None else session_ms
            timers.arm_timer(result, session_timer(gid, m.member_id), now + ms)
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                timers.rebalance_timer_epochs[(gid, m.member_id)] = m.member_epoch
                timers.arm_timer(result, rebalance_timer(gid, m.member_id), now + m.rebalance_timeout_ms)
        return result.timers

    # --- replay helpers: the only mutators ------------------------------------------------------------
    def put_member(self, member: ConsumerGroupMember) -> None:
        old = self.members.get(member.member_id)
        if (old is not None and old.instance_id and old.instance_id != member.instance_id
                and self.static_members.get(old.instance_id) == member.member_id):
            del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id:
            self.static_members[member.instance_id] = member.member_id
        if old is None or old.subscribed_topic_regex != member.subscribed_topic_regex:
            self._count_regex(old, -1)
            self._count_regex(member, 1)
        if old is None or old.subscribed_topic_names != member.subscribed_topic_names \
                or old.server_assignor != member.server_assignor:
            self._count_subscription(old, -1)
            self._count_subscription(member, 1)
        if old is None and self.added_since_run is not None:
            self.added_since_run[member.member_id] = None
        dirty = self.spec_dirty
        if dirty is not None:
            if old is None:  # appended to `members`: its row goes last too, in the order members came
                dirty.pop(member.member_id, None)
                dirty[member.member_id] = True
            elif (old.subscribed_topic_names != member.subscribed_topic_names or old.rack_id != member.rack_id
                  or old.subscribed_topic_regex != member.subscribed_topic_regex
                  or old.instance_id != member.instance_id):
                dirty.setdefault(member.member_id, False)
        self._update_owners(old, member)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        self.classic_members.pop(member_id, None)
        if old is None:
            return
        if self.removed_since_run is not None:
            self.removed_since_run[member_id] = None
        if old.instance_id and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        self._count_regex(old, -1)
        self._count_subscription(old, -1)
        if self.spec_dirty is not None:
            self.spec_dirty[member_id] = True
        self._update_owners(old, None)

    def _count_subscription(self, member: ConsumerGroupMember | None, delta: int) -> None:
        if member is None:
            return
        count_into(self.subscription_counts, member.subscribed_topic_names, delta)
        if member.server_assignor:
            count_into(self.assignor_counts, member.server_assignor, delta)

    def _count_regex(self, member: ConsumerGroupMember | None, delta: int) -> None:
        regex = member.subscribed_topic_regex if member is not None else None
        if regex:
            count_into(self.regex_subscribers, regex, delta)

    def _update_owners(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None) -> None:
        if old is not None and new is not None and (
            old.assigned_partitions is new.assigned_partitions
            and old.partitions_pending_revocation is new.partitions_pending_revocation
        ):
            return
        owner = self.partition_owner
        if old is not None:
            for tp in _owned(old):
                if owner.get(tp) == old.member_id:
                    del owner[tp]
        if new is not None:
            for tp in _owned(new):
                owner[tp] = new.member_id


def owned_partitions(member: ConsumerGroupMember) -> list[tuple[str, int]]:
    return _owned(member)


def _owned(member: ConsumerGroupMember) -> list[tuple[str, int]]:
    out = [(t, p) for t, parts in member.assigned_partitions.items() for p in parts]
    out.extend((t, p) for t, parts in member.partitions_pending_revocation.items() for p in parts)
    return out


def member_metadata_record(group_id: str, m: ConsumerGroupMember) -> ConsumerGroupMemberMetadata:
    return ConsumerGroupMemberMetadata(
        group_id, m.member_id, m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names,
        m.subscribed_topic_regex, m.server_assignor, m.rebalance_timeout_ms, m.principal)


def current_assignment_record(group_id: str, m: ConsumerGroupMember) -> ConsumerGroupCurrentMemberAssignment:
    return ConsumerGroupCurrentMemberAssignment(
        group_id, m.member_id, m.member_epoch, m.previous_member_epoch, m.state.value, m.assigned_partitions,
        m.partitions_pending_revocation)


def count_into(counts: dict[Any, int], key: Any, delta: int) -> None:
    """Add `delta` to `counts[key]`, dropping keys that reach 0."""
    n = counts.get(key, 0) + delta
    if n > 0:
        counts[key] = n
    else:
        counts.pop(key, None)
