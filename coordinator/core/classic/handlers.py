"""The classic group protocol's handlers (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), taking the shard.

Each validates its request once, at the edge, finds the classic group (creating it on a first JoinGroup),
and drives the state machine of `classic/group.py`. Every handler is pure (issue 26: it mutates nothing): it runs
the transition on a private copy of the group, into which each record it writes is replayed, and returns that
copy as one volatile effect (`ClassicGroupReplaced`, `effects.py`) besides its records; a heartbeat returns only
the member's new session deadline (`ClassicSessionRearmed`). `GroupCoordinatorShard.apply` replays the records,
then the shard's group takes over the copy's state. JoinGroup and SyncGroup may park (`Result.parked`) and be
answered later through another operation's `completions`.

A group id is either classic or consumer (KIP-848), as in Kafka before mixed groups:

- a consumer group with no members is converted by a first JoinGroup (Kafka's online downgrade), as the shard
  converts an empty classic group for a ConsumerGroupHeartbeat (a non-empty one: `mixed/conversion.py`).
- classic requests for a group that does not exist get UNKNOWN_MEMBER_ID (the client drops its member id
  and joins afresh), except a first JoinGroup, which creates it.

A consumer group *with members* takes classic requests itself (Kafka 4.x's mixed groups): the requests are routed
to `mixed/group.py` first (`mixed/classic_requests.py`), and `_group_for_join` only sees empty consumer groups.
This package imports no other group type: it learns another type's groups by `group_type` alone.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core.classic.effects import (
    JOIN_TIMER,
    SESSION_TIMER,
    SYNC_TIMER,
    ClassicGroupReplaced,
    ClassicSessionRearmed,
    Effects,
    session_timer,
)
from groupcoord.coordinator.core.classic.group import ClassicGroup
from groupcoord.coordinator.core.classic.membership import ClassicGroupMembership
from groupcoord.coordinator.core.classic.messages import (
    UNKNOWN_MEMBER_ID,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from groupcoord.coordinator.core.classic.records import (
    ClassicGroupMember,
    ClassicGroupMetadata,
    ClassicGroupMetadataTombstone,
    ClassicGroupState,
)
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.group import CONSUMER, GroupTypeHooks
from groupcoord.coordinator.core.limits import ECHO_MAX_CHARS
from groupcoord.coordinator.core.principals import check_member_principal
from groupcoord.coordinator.core.records import ConsumerGroupMetadataTombstone
from groupcoord.coordinator.core.results import Result, TimerKey

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard

MixedJoin = Callable[["GroupCoordinatorShard", JoinGroupRequest, int], "Result[JoinGroupResponse | None] | None"]


def hooks(shard: GroupCoordinatorShard) -> GroupTypeHooks:
    """The classic group's records, volatile effects and timers, for the shard's constructor."""
    return GroupTypeHooks(
        {ClassicGroupMetadata: partial(_replay_metadata, shard),
         ClassicGroupMetadataTombstone: partial(_replay_tombstone, shard),
         ClassicGroupReplaced: partial(_replay_replaced, shard),
         ClassicSessionRearmed: partial(_replay_session_rearmed, shard)},
        {kind: partial(on_timer, shard) for kind in (SESSION_TIMER, JOIN_TIMER, SYNC_TIMER)})


# --- replay ------------------------------------------------------------------------------------------------------
def _replay_metadata(shard: GroupCoordinatorShard, r: ClassicGroupMetadata) -> None:
    group = shard.groups.get(r.group_id)
    if not isinstance(group, ClassicGroup):
        # A group that replay has to create is being loaded: Initialize until `timers_after_load` ends the load.
        # (A JoinGroup that creates a group returns it too, as `ClassicGroupReplaced`, whose state this one takes
        # over once `apply` has replayed the records.)
        group = ClassicGroup(r.group_id, state=ClassicGroupState.INITIALIZE)
        shard.groups[r.group_id] = group
    group.replay(r)


def _replay_tombstone(shard: GroupCoordinatorShard, r: ClassicGroupMetadataTombstone) -> None:
    if isinstance(shard.groups.get(r.group_id), ClassicGroup):
        del shard.groups[r.group_id]


def _replay_replaced(shard: GroupCoordinatorShard, e: ClassicGroupReplaced) -> None:
    group = shard.groups[e.group_id]  # a new group was created by replaying its first record, just before
    assert isinstance(group, ClassicGroup)
    group.take_over(e.group)


def _replay_session_rearmed(shard: GroupCoordinatorShard, e: ClassicSessionRearmed) -> None:
    group = shard.groups[e.group_id]
    assert isinstance(group, ClassicGroup)
    group.session_deadlines[e.member_id] = e.deadline_ms


def effects_for(shard: GroupCoordinatorShard, result: Result[Any], now: int,
                group: ClassicGroupMembership | None = None) -> Effects:
    """What a classic-group transition asks, collected into `result`; records go through `shard._write`. `group`
    is the private copy the transition runs on: each record is replayed into it as well (the rest of the
    transition reads what it wrote), and the caller returns it (`replaced`). A caller that writes nothing through
    it (the online upgrade only answers and cancels) needs no copy."""
    return Effects(now, partial(_write_into, shard, result, group), partial(shard.arm_timer, result),
                   partial(shard.cancel_timer, result),
                   result.completions, shard.config["group.initial.rebalance.delay.ms"])


def _write_into(shard: GroupCoordinatorShard, result: Result[Any], group: ClassicGroupMembership | None,
                record: ClassicGroupMetadata) -> None:
    assert group is not None, "a classic transition writes on a private copy of its group"
    shard._write(result, record)
    group.replay(record)


def replaced(shard: GroupCoordinatorShard, result: Result[Any], group_id: str,
             group: ClassicGroupMembership | None) -> Result[Any]:
    """End a pure operation on `group_id`: return `group` (the private copy it ran on, if it made one) as the
    group to install, and say whether the group has members afterwards (`Result.empty_after`, as retention's
    `note_membership` would have read it from the shard)."""
    if group is not None:
        result.memory.append(ClassicGroupReplaced(group_id, group))
    after = group if group is not None else shard.groups.get(group_id)
    result.empty_after = after.is_empty() if after is not None and after.tracks_empty_since else None
    return result


# --- lookup --------------------------------------------------------------------------------------------------------
def _existing_group(shard: GroupCoordinatorShard, group_id: str) -> ClassicGroup:
    if not group_id:
        raise CoordinatorError(Errors.INVALID_GROUP_ID, "group_id can't be empty.")
    group = shard.groups.get(group_id)
    if group is None:
        raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID,
                               f"Classic group {group_id} does not exist; join it without a member id.")
    if not isinstance(group, ClassicGroup):
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND,
                               f"Group {group_id} is a {group.group_type} group, not a classic group.")
    _check_loaded(group)
    return group


_NOT_CLASSIC = "The group is a streams group; classic members cannot join it."


def _refuse_streams(shard: GroupCoordinatorShard, group_id: str) -> None:
    """Kafka's classicGroupSync/Heartbeat/Leave treat a group of another type (streams) as not found."""
    if shard.holds_streams_group(group_id):
        raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Group {group_id[:ECHO_MAX_CHARS]} not found.")


def _member_of_generation(shard: GroupCoordinatorShard, r: SyncGroupRequest | HeartbeatRequest) -> ClassicGroup:
    """SyncGroup's and Heartbeat's checks: a loaded classic group, the member in it, its current generation."""
    _refuse_streams(shard, r.group_id)
    group = _existing_group(shard, r.group_id)
    group.validate_member(r.member_id, r.instance_id, r.principal)
    if r.generation_id != group.generation:
        raise CoordinatorError(Errors.ILLEGAL_GENERATION,
                               f"Generation {r.generation_id} is not group {group.group_id}'s current "
                               f"generation {group.generation}; rejoin.")
    return group


def _check_loaded(group: ClassicGroup) -> None:
    if group.state is ClassicGroupState.INITIALIZE:
        raise CoordinatorError(Errors.COORDINATOR_LOAD_IN_PROGRESS,
                               f"Group {group.group_id} is still loading after a coordinator failover; retry.")


def _group_for_join(shard: GroupCoordinatorShard, r: JoinGroupRequest, result: Result[Any]) -> ClassicGroup:
    """A private copy of the request's classic group, or a new one (its first record already written)."""
    group = shard.groups.get(r.group_id)  # any type: a group id has one type
    if isinstance(group, ClassicGroup):
        _check_loaded(group)
        return group.copy()
    if group is not None and group.group_type != CONSUMER:
        raise CoordinatorError(Errors.INCONSISTENT_GROUP_PROTOCOL,
                               f"Group {r.group_id} is a {group.group_type} group; classic "
                               "members cannot join it.")
    if group is not None:  # an empty consumer group (one with members went to mixed/group.py's join)
        if r.member_id != UNKNOWN_MEMBER_ID:
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND,
                                   f"Group {r.group_id} is an empty consumer group; join without a member id.")
        shard._write(result, ConsumerGroupMetadataTombstone(r.group_id))  # Kafka's online downgrade
    elif r.member_id != UNKNOWN_MEMBER_ID:
        raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID,
                               f"Classic group {r.group_id} does not exist; join it without a member id.")
    created = ClassicGroup(r.group_id)
    # Persist that the group exists and is classic (Kafka writes an empty GroupMetadataValue too).
    _write_into(shard, result, created,
                ClassicGroupMetadata(r.group_id, "", 0, None, None, ClassicGroupState.DOWN.value, ()))
    return created


# --- JoinGroup -----------------------------------------------------------------------------------------------------
def join_group(shard: GroupCoordinatorShard, request: JoinGroupRequest, now: int, token: int,
               mixed_join: MixedJoin) -> Result[JoinGroupResponse | None]:
    """`mixed_join` takes the request first when a consumer group with members holds the id (mixed groups sit
    above both types: `mixed/classic_requests.py`), after the checks every JoinGroup gets."""
    result: Result[JoinGroupResponse | None] = Result(None)
    group: ClassicGroup | None = None
    try:
        _validate_join(shard, request)
        if shard.holds_streams_group(request.group_id):  # Kafka: "Group exists but it's not a consumer group"
            result.response = JoinGroupResponse(Errors.INCONSISTENT_GROUP_PROTOCOL, _NOT_CLASSIC, member_id="")
            return replaced(shard, result, request.group_id, None)
        mixed = mixed_join(shard, request, now)
        if mixed is not None:
            return mixed
        group = _group_for_join(shard, request, result)
        response = _join(shard, group, request, token, effects_for(shard, result, now, group))
    except CoordinatorError as e:
        result.response = JoinGroupResponse(e.code, e.message, member_id=request.member_id)
        return replaced(shard, result, request.group_id, group)
    if response is None:
        result.parked = True
    else:
        result.response = response
    return replaced(shard, result, request.group_id, group)


def _validate_join(shard: GroupCoordinatorShard, r: JoinGroupRequest) -> None:
    if not r.group_id:
        raise CoordinatorError(Errors.INVALID_GROUP_ID, "group_id can't be empty.")
    low, high = shard.config["group.min.session.timeout.ms"], shard.config["group.max.session.timeout.ms"]
    if not low <= r.session_timeout_ms <= high:
        raise CoordinatorError(Errors.INVALID_SESSION_TIMEOUT,
                               f"session_timeout_ms {r.session_timeout_ms} is outside [{low}, {high}] "
                               "(group.min.session.timeout.ms, group.max.session.timeout.ms).")
    if r.instance_id is not None and not r.instance_id:
        raise CoordinatorError(Errors.INVALID_REQUEST, "group_instance_id can't be empty when set.")
    if not r.protocol_type or not r.protocols:
        raise CoordinatorError(Errors.INCONSISTENT_GROUP_PROTOCOL,
                               "A JoinGroup must name its protocol type and at least one protocol.")
    names = [name for name, _ in r.protocols]
    if len(set(names)) != len(names) or not all(names):
        raise CoordinatorError(Errors.INVALID_REQUEST, f"protocol names must be non-empty and distinct: {names}.")


def _join(shard: GroupCoordinatorShard, group: ClassicGroup, r: JoinGroupRequest, token: int,
          fx: Effects) -> JoinGroupResponse | None:
    rebalance_timeout_ms = r.rebalance_timeout_ms if r.rebalance_timeout_ms > 0 else r.session_timeout_ms
    max_size = shard.config["group.max.size"]
    if not group.accepts_joining_member(r.member_id, max_size):
        if r.member_id in group.members:
            group.remove_member(r.member_id, fx, "the group is over group.max.size")
        return JoinGroupResponse(Errors.GROUP_MAX_SIZE_REACHED,
                                 f"Group {r.group_id} already has group.max.size={max_size} members.")
    inconsistent = CoordinatorError(
        Errors.INCONSISTENT_GROUP_PROTOCOL,
        f"Protocol type {r.protocol_type!r} with protocols {[n for n, _ in r.protocols]} is incompatible with "
        f"group {r.group_id} (protocol type {group.protocol_type!r}; every member must share a protocol).")

    if r.member_id == UNKNOWN_MEMBER_ID:
        replaced = group.static_members.get(r.instance_id) if r.instance_id is not None else None
        if not group.supports_protocols(r.protocol_type, r.protocols, replaced):
            raise inconsistent
        member_id = shard.member_id_factory()
        if r.instance_id is None:
            group.require_member_id(member_id, r.session_timeout_ms, fx)
            return JoinGroupResponse(Errors.MEMBER_ID_REQUIRED,
                                     "Join again with the member id in this response (KIP-394).", member_id=member_id)
        if replaced is not None:
            check_member_principal(group.members[replaced].principal, r.principal, r.instance_id or "", r.group_id)
            return group.replace_static_member(r.instance_id, member_id, r.protocol_type, r.protocols,
                                               rebalance_timeout_ms, r.session_timeout_ms, r.client_host, token, fx)
        group.add_member(_new_member(r, member_id, rebalance_timeout_ms), r.protocol_type, token, fx)
        return None

    if r.member_id in group.pending_members and r.instance_id is None:
        if not group.supports_protocols(r.protocol_type, r.protocols):
            raise inconsistent
        group.add_member(_new_member(r, r.member_id, rebalance_timeout_ms), r.protocol_type, token, fx)
        return None
    group.validate_member(r.member_id, r.instance_id, r.principal)
    if not group.supports_protocols(r.protocol_type, r.protocols, r.member_id):
        raise inconsistent
    return group.rejoin(r.member_id, r.protocol_type, r.protocols, rebalance_timeout_ms, r.session_timeout_ms,
                        token, fx)


def _new_member(r: JoinGroupRequest, member_id: str, rebalance_timeout_ms: int) -> ClassicGroupMember:
    return ClassicGroupMember(member_id, r.instance_id, r.client_id, r.client_host, rebalance_timeout_ms,
                              r.session_timeout_ms, r.protocols, principal=r.principal)


# --- SyncGroup -----------------------------------------------------------------------------------------------------
def sync_group(shard: GroupCoordinatorShard, request: SyncGroupRequest, now: int,
               token: int) -> Result[SyncGroupResponse | None]:
    result: Result[SyncGroupResponse | None] = Result(None)
    work: ClassicGroup | None = None
    try:
        group = _member_of_generation(shard, request)
        if _inconsistent(request.protocol_type, group.protocol_type) \
                or _inconsistent(request.protocol_name, group.protocol_name):
            raise CoordinatorError(Errors.INCONSISTENT_GROUP_PROTOCOL,
                                   f"SyncGroup names protocol {request.protocol_type}/{request.protocol_name}; the "
                                   f"group's is {group.protocol_type}/{group.protocol_name}.")
        work = group.copy()
        response = work.sync(request, token, effects_for(shard, result, now, work))
    except CoordinatorError as e:
        result.response = SyncGroupResponse(e.code, e.message)
        return replaced(shard, result, request.group_id, work)
    if response is None:
        result.parked = True
    else:
        result.response = response
    return replaced(shard, result, request.group_id, work)


def _inconsistent(sent: str | None, group_value: str | None) -> bool:
    return sent is not None and group_value is not None and sent != group_value


# --- Heartbeat -----------------------------------------------------------------------------------------------------
def heartbeat(shard: GroupCoordinatorShard, request: HeartbeatRequest, now: int) -> Result[HeartbeatResponse]:
    """Re-arms the member's session without copying the group: its new deadline is the only change."""
    result: Result[HeartbeatResponse] = Result(HeartbeatResponse())
    try:
        group = _member_of_generation(shard, request)
    except CoordinatorError as e:
        result.response = HeartbeatResponse(e.code, e.message)
        return replaced(shard, result, request.group_id, None)
    code, deadline = group.heartbeat(request.member_id, now)
    shard.arm_timer(result, session_timer(group.group_id, request.member_id), deadline)
    result.memory.append(ClassicSessionRearmed(group.group_id, request.member_id, deadline))
    if code is Errors.REBALANCE_IN_PROGRESS:
        result.response = HeartbeatResponse(code, f"Group {group.group_id} is rebalancing; rejoin.")
    return replaced(shard, result, request.group_id, None)


# --- LeaveGroup ----------------------------------------------------------------------------------------------------
def leave_group(shard: GroupCoordinatorShard, request: LeaveGroupRequest, now: int) -> Result[LeaveGroupResponse]:
    result: Result[LeaveGroupResponse] = Result(LeaveGroupResponse())
    try:
        if not request.members:
            raise CoordinatorError(Errors.INVALID_REQUEST, "LeaveGroup needs at least one member.")
        _refuse_streams(shard, request.group_id)
        group = _existing_group(shard, request.group_id)
    except CoordinatorError as e:
        # A missing group (UNKNOWN_MEMBER_ID) fails each member, not the request, as Kafka answers it.
        top = Errors.NONE if e.code is Errors.UNKNOWN_MEMBER_ID else e.code
        result.response = LeaveGroupResponse(top, "" if top is Errors.NONE else e.message, tuple(
            MemberResponse(m.member_id, m.instance_id, e.code, e.message) for m in request.members))
        return replaced(shard, result, request.group_id, None)
    work = group.copy()
    left = work.leave(request.members, effects_for(shard, result, now, work), request.principal)
    result.response = LeaveGroupResponse(members=left)
    return replaced(shard, result, request.group_id, work)


# --- timers --------------------------------------------------------------------------------------------------------
def on_timer(shard: GroupCoordinatorShard, key: TimerKey, now: int) -> Result[None]:
    """A session, join (the initial delay's too) or sync timer fired: its transition, on a private copy."""
    group = shard.groups.get(key[1])
    if not isinstance(group, ClassicGroup) or group.state is ClassicGroupState.INITIALIZE:
        return Result(None)  # the group is gone, converted, or not yet loaded (its timers are armed after the load)
    result: Result[None] = Result(None)
    work = group.copy()
    fx = effects_for(shard, result, now, work)
    if key[0] == SESSION_TIMER:
        work.on_session_timeout(key[2], fx)
    elif key[0] == JOIN_TIMER:
        work.on_join_timeout(fx)
    else:
        work.on_sync_timeout(fx)
    return replaced(shard, result, key[1], work)
