"""The server-side assignor interface (KIP-848's `ConsumerGroupPartitionAssignor`, in Python).

An assignor is a pure function of immutable snapshots: a `GroupSpec` (members, their subscriptions and
current target assignment), a `TopicDescriber` (partition counts and racks) and, for lag-aware assignors,
a `LagSnapshot`. It returns a new `GroupAssignment` and never touches coordinator state, I/O or clocks,
which is what lets the coordinator run it on a background executor and lets us benchmark and
property-test it in isolation.

Topic ids are the coordinator's stable topic UUIDs as strings. Partitions are ints.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from groupcoord.assignors.compact import CompactAssignment

TopicId = str
MemberId = str
# topic id -> partitions (one member's view): a dict, or a compact read-only mapping such as
# `uniform_runs.MemberView` that builds its sets when read
MemberAssignment = Mapping[TopicId, frozenset[int]]
# member -> topic id -> partitions: a dict, or a `CompactAssignment` (an owner array, members derived on read)
GroupAssignment = Mapping[MemberId, MemberAssignment]


class AssignorError(Exception):
    """The assignor cannot produce an assignment for this input (the coordinator keeps the old target)."""


class SubscriptionType(enum.Enum):
    """KIP-848: HOMOGENEOUS when every member subscribes to the same topics, else HETEROGENEOUS."""

    HOMOGENEOUS = "HOMOGENEOUS"
    HETEROGENEOUS = "HETEROGENEOUS"


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member as the assignor sees it."""

    subscribed_topic_ids: frozenset[TopicId]
    assigned_partitions: MemberAssignment = field(default_factory=dict)  # current target assignment
    rack_id: str | None = None
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    members: Mapping[MemberId, MemberSpec]
    subscription_type: SubscriptionType
    # The members' current assignment as one owner array, when the caller has it: each member's
    # `assigned_partitions` is then this assignment's view of it (members it lacks hold nothing), and array
    # assignors read the array instead of re-encoding every member's partitions.
    current: CompactAssignment | None = None

    @staticmethod
    def of(members: Mapping[MemberId, MemberSpec], current: CompactAssignment | None = None) -> GroupSpec:
        """Build a spec, deriving the subscription type from the members' subscriptions."""
        subs = {m.subscribed_topic_ids for m in members.values()}
        kind = SubscriptionType.HOMOGENEOUS if len(subs) <= 1 else SubscriptionType.HETEROGENEOUS
        return GroupSpec(members=members, subscription_type=kind, current=current)


@runtime_checkable
class TopicDescriber(Protocol):
    """Read-only view of topic metadata (KIP-848's `SubscribedTopicDescriber`)."""

    def partition_count(self, topic_id: TopicId) -> int:
        """Number of partitions, or -1 when the topic is unknown."""
        ...

    def partition_racks(self, topic_id: TopicId, partition: int) -> frozenset[str]:
        """Racks of the partition's replicas; empty when unknown."""
        ...


@dataclass(frozen=True, slots=True)
class StaticTopicDescriber:
    """A `TopicDescriber` over plain dicts; the coordinator's metadata image also satisfies the protocol."""

    partition_counts: Mapping[TopicId, int]
    racks: Mapping[TopicId, tuple[frozenset[str], ...]] = field(default_factory=dict)

    def partition_count(self, topic_id: TopicId) -> int:
        return self.partition_counts.get(topic_id, -1)

    def partition_racks(self, topic_id: TopicId, partition: int) -> frozenset[str]:
        racks = self.racks.get(topic_id)
        if racks is None or partition >= len(racks):
            return frozenset()
        return racks[partition]


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """What a lag-aware assignor needs to know about one partition."""

    end_offset: int
    committed_offset: int | None  # None: the group has committed nothing for this partition
    log_start_offset: int = 0


@dataclass(frozen=True, slots=True)
class LagSnapshot:
    """Offsets per (topic id, partition), plus the group's `auto.offset.reset` (earliest|latest|none)."""

    offsets: Mapping[tuple[TopicId, int], PartitionOffsets]
    auto_offset_reset: str = "latest"

    def lag(self, topic_id: TopicId, partition: int) -> int:
        """Lag per KAFKA-5337: end - committed (never negative); uncommitted counts 0 under `latest`,
        else the whole retained log (end - log start). Unknown partitions have lag 0."""
        po = self.offsets.get((topic_id, partition))
        if po is None:
            return 0
        if po.committed_offset is None:
            if self.auto_offset_reset == "latest":
                return 0
            return max(0, po.end_offset - po.log_start_offset)
        return max(0, po.end_offset - max(po.committed_offset, po.log_start_offset))


EMPTY_LAG = LagSnapshot(offsets={})


class ServerAssignor(Protocol):
    """A server-side (KIP-848) assignor. Implementations must be deterministic and side-effect free."""

    @property
    def name(self) -> str: ...

    def assign(
        self, group: GroupSpec, topics: TopicDescriber, lag: LagSnapshot | None = None
    ) -> GroupAssignment:
        """Return member -> topic id -> partitions for every member in `group.members`
        (members with nothing assigned may map to an empty dict)."""
        ...
