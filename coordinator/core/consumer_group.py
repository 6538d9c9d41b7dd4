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

A member reconciles towards its target in steps (see `reconciliation.py`): it first revokes the partitions
it must give up (UNREVOKED_PARTITIONS, still at its old epoch); only when the client reports they are gone
does it move to the target epoch, receiving the target partitions that are free; partitions still owned by
another member are withheld (UNRELEASED_PARTITIONS) until that member revokes them. `partition_owner` maps
every partition to the one member that holds it (assigned or pending revocation), so no partition is ever
given to two members at once: the central safety property.

Group state is derived: EMPTY (no members), ASSIGNING (group epoch > target epoch), RECONCILING (some member
not yet STABLE at the target epoch), STABLE. DEAD marks a deleted group.

Nothing here changes except through `replay_*` of records (see `shard.py`), so replaying the log rebuilds it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coordinator.core.records import PartitionEpochs, Partitions

EMPTY_ASSIGNMENT_EPOCH = 1  # KIP-1263: epoch 1 is reserved for the empty target assignment
FIRST_GROUP_EPOCH = 2


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


LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


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
class InflightAssignment:
    """An offloaded assignor run (not persisted: a failover simply runs the assignor again)."""

    run_id: int
    assignment_epoch: int
    instance_ids: Mapping[str, str]  # member id -> instance id at the time of the run
    assignor_name: str = ""


@dataclass(slots=True)
class RegexResolutionInflight:
    """A background resolution of the group's regexes (not persisted: a failover resolves them again)."""

    run_id: int
    image: object  # the metadata image it resolves against


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target_assignment: dict[str, Partitions] = field(default_factory=dict)
    target_assignment_epoch: int = 0  # 0: nothing computed yet (the empty assignment at epoch 1 applies)
    assignment_timestamp_ms: int = 0  # KIP-1263: when the last computation finished; 0 = unknown
    partition_owner: dict[tuple[str, int], str] = field(default_factory=dict)
    inflight: InflightAssignment | None = None
    last_assignor: str = ""
    deleted: bool = False
    metadata_image_seen: object = None  # the metadata image the metadata hash was last checked against
    # member id -> (member, target, image, MemberSpec): lets build_spec reuse unchanged members' specs
    spec_cache: dict[str, tuple[Any, Any, Any, Any]] = field(default_factory=dict)
    # KIP-848: subscribed regex -> the topic names it resolved to (replayed from records), and when
    resolved_regexes: dict[str, frozenset[str]] = field(default_factory=dict)
    regex_resolved_ms: dict[str, int] = field(default_factory=dict)
    regex_inflight: RegexResolutionInflight | None = None
    regex_image_seen: object = None  # the metadata image the last resolution ran against
    regex_refreshed_ms: int = 0  # when the last resolution finished (not persisted: refresh after a load)
    regex_subscribers: dict[str, int] = field(default_factory=dict)  # regex -> members subscribed to it
    # Mixed groups: member id -> its ConsumerGroupClassicMemberMetadata (see mixed_group.py), for the members
    # that speak the classic protocol (JoinGroup/SyncGroup/Heartbeat) in this consumer group.
    classic_members: dict[str, Any] = field(default_factory=dict)

    @property
    def effective_target_epoch(self) -> int:
        return max(self.target_assignment_epoch, EMPTY_ASSIGNMENT_EPOCH)

    def target_for(self, member_id: str) -> Partitions:
        if self.target_assignment_epoch == 0:
            return {}
        return self.target_assignment.get(member_id, {})

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
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
        return names

    def regexes(self) -> set[str]:
        return set(self.regex_subscribers)

    def resolved_topics(self, regex: str) -> frozenset[str]:
        """What `regex` resolved to; nothing until its first resolution lands."""
        return self.resolved_regexes.get(regex, frozenset())

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
        self._update_owners(old, member)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        self.classic_members.pop(member_id, None)
        if old is None:
            return
        if old.instance_id and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        self._count_regex(old, -1)
        self._update_owners(old, None)

    def _count_regex(self, member: ConsumerGroupMember | None, delta: int) -> None:
        regex = member.subscribed_topic_regex if member is not None else None
        if not regex:
            return
        n = self.regex_subscribers.get(regex, 0) + delta
        if n > 0:
            self.regex_subscribers[regex] = n
        else:
            self.regex_subscribers.pop(regex, None)

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


def _owned(member: ConsumerGroupMember) -> list[tuple[str, int]]:
    out = [(t, p) for t, parts in member.assigned_partitions.items() for p in parts]
    out.extend((t, p) for t, parts in member.partitions_pending_revocation.items() for p in parts)
    return out
