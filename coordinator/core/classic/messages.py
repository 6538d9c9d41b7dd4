"""Request and response values of the classic group protocol (JoinGroup 11, SyncGroup 14, Heartbeat 12,
LeaveGroup 13), as the core speaks them. The runtime translates them to and from protobuf.

Field names are Kafka's schema names. `None` means "null" in Kafka's schema (not sent). Protocols and member
metadata are opaque bytes here: their meaning belongs to the protocol type (see `clients/consumer_protocol.py`
for the "consumer" embedded protocol); the coordinator only compares and relays them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from groupcoord.coordinator.core.errors import Errors

# (protocol name, member metadata for that protocol), in the member's order of preference
Protocols = tuple[tuple[str, bytes], ...]

UNKNOWN_MEMBER_ID = ""  # Kafka's JoinGroupRequest.UNKNOWN_MEMBER_ID
UNKNOWN_GENERATION = -1


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int = -1  # <= 0: not sent, the session timeout applies (JoinGroup v0)
    instance_id: str | None = None  # static membership (KIP-345)
    reason: str = ""
    client_id: str = ""
    client_host: str = ""
    principal: str | None = None  # the authenticated caller (None: authentication off); see core/principals.py


@dataclass(frozen=True, slots=True)
class JoinGroupResponseMember:
    member_id: str
    instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error_code: Errors = Errors.NONE
    error_message: str = ""
    generation_id: int = UNKNOWN_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinGroupResponseMember, ...] = ()  # only for the leader
    skip_assignment: bool = False  # KIP-814: a static leader that rejoined must not recompute the assignment


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: Mapping[str, bytes] = field(default_factory=dict)  # only the leader sends these
    # The seed's "leader transmits an error": the leader could not compute the assignment. The generation is
    # invalidated and the error is propagated to the members waiting in SyncGroup, who then rejoin.
    error_code: Errors = Errors.NONE
    principal: str | None = None


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error_code: Errors = Errors.NONE
    error_message: str = ""
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    instance_id: str | None = None
    principal: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error_code: Errors = Errors.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    member_id: str  # empty: remove the static member `instance_id` (administrative removal, KIP-345)
    instance_id: str | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[MemberIdentity, ...]
    principal: str | None = None


@dataclass(frozen=True, slots=True)
class MemberResponse:
    member_id: str
    instance_id: str | None
    error_code: Errors = Errors.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error_code: Errors = Errors.NONE
    error_message: str = ""
    members: tuple[MemberResponse, ...] = ()
