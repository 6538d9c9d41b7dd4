"""What a classic group persists, and the states it names: the seed's phases with Kafka's names beside them.

`ClassicGroupMetadata` is Kafka's GroupMetadataValue plus the phase it was written in; replaying the last one
rebuilds the group (`membership.py`). The states and the table of Kafka's names are explained in `group.py`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from groupcoord.coordinator.core.classic.messages import Protocols
from groupcoord.coordinator.core.records import Tombstone

GROUP_TYPE = "classic"


class ClassicGroupState(enum.StrEnum):
    DOWN = "Down"
    INITIALIZE = "Initialize"
    STABLE = "Stable"
    JOINING = "Joining"
    AWAITING_SYNC = "AwaitingSync"


# Kafka's names (ClassicGroupState) for ours. Initialize has none: Kafka has no group state while a partition
# loads, it refuses the requests (COORDINATOR_LOAD_IN_PROGRESS), as we do. Kafka's Dead is never visible here.
KAFKA_STATE_NAMES: dict[ClassicGroupState, str] = {
    ClassicGroupState.DOWN: "Empty",
    ClassicGroupState.JOINING: "PreparingRebalance",
    ClassicGroupState.AWAITING_SYNC: "CompletingRebalance",
    ClassicGroupState.STABLE: "Stable",
}


@dataclass(frozen=True, slots=True)
class ClassicGroupMember:
    """One member, exactly as the group record persists it."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: Protocols
    assignment: bytes = b""
    principal: str | None = None  # who joined it (core/principals.py)

    def metadata(self, protocol_name: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        return b""

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among `candidates` (which it must support)."""
        return next(name for name, _ in self.protocols if name in candidates)


@dataclass(frozen=True, slots=True)
class ClassicGroupMetadata:
    """The whole group (Kafka's GroupMetadataValue) as of the end of a phase; `state` is that phase."""

    group_id: str
    protocol_type: str
    generation: int
    protocol_name: str | None
    leader_id: str | None
    state: str  # Down, AwaitingSync or Stable
    members: tuple[ClassicGroupMember, ...]


@dataclass(frozen=True, slots=True)
class ClassicGroupMetadataTombstone(Tombstone):
    group_id: str


CLASSIC_RECORD_TYPES: tuple[type, ...] = (ClassicGroupMetadata, ClassicGroupMetadataTombstone)
