"""Mixed consumer groups: classic-protocol members in a KIP-848 consumer group, as Kafka 4.x runs them.

Theory of operation
-------------------
A consumer group (see `consumer/group.py`) may hold members that speak the classic protocol (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup with protocol type "consumer"): Kafka's `classicGroupJoinToConsumerGroup`,
`classicGroupSyncToConsumerGroup`, `classicGroupHeartbeatToConsumerGroup`, `classicGroupLeaveToConsumerGroup`.
Such a member is an ordinary `ConsumerGroupMember` plus a `ConsumerGroupClassicMemberMetadata` record (Kafka's
ClassicMemberMetadata: its session timeout and its JoinGroup protocols). The coordinator, not a leader,
assigns it: its subscription, rack and owned partitions are decoded from Kafka's ConsumerProtocol subscription
bytes (the first protocol's, as Kafka), the group's server assignor computes the target, and SyncGroup returns
the member's current assignment as ConsumerProtocol assignment bytes (in the member's own version).

- **JoinGroup** is the classic member's heartbeat with a full request: it updates the member (a new member or
  a changed subscription bumps the group epoch), may compute the target (KIP-1263: under the same batching
  and offload rules as a consumer heartbeat; an in-flight run or an interval not yet elapsed means no new
  target now, a consumer-protocol heartbeat triggers the next run), and reconciles the member with the owned
  partitions it reported. It is answered at once: generation = member epoch, no leader, no member list.
- **Revocation goes through a rejoin.** A member that must give partitions up stays at its epoch in
  UNREVOKED_PARTITIONS; its SyncGroup carries the assignment without them, the classic consumer revokes them
  and rejoins (KIP-429), and that JoinGroup's owned partitions acknowledge the revocation.
- **SyncGroup** answers REBALANCE_IN_PROGRESS when the member epoch is below the *target assignment* epoch and
  the member has nothing to revoke (KIP-1263: the target may lag the group epoch, so the group epoch would
  send members round for nothing); else the assignment.
- **Heartbeat** never runs the assignor (KIP-1263: only a consumer-protocol heartbeat triggers a batched or
  offloaded run). It answers REBALANCE_IN_PROGRESS when the member epoch is below the target assignment epoch
  (a newer target exists: an offloaded run completed, or a consumer member's heartbeat ran a batched one), when
  the member must revoke, or when partitions it waits for (UNRELEASED_PARTITIONS) have been released.
- **Sessions**: the member's session timeout is its JoinGroup's (Kafka), re-armed by each of its requests; an
  expired session fences it like a consumer member. As in Kafka, a member told to rejoin must send JoinGroup,
  and one that joined must send SyncGroup, within its rebalance timeout, or it is fenced.

The four handlers are pure, as the consumer heartbeat: records go into the result through `consumer/staged.py`,
which the rest of the request reads; the timeouts' handler too, a fence that downgrades the group included.
Online upgrade and downgrade (turning a classic group into a consumer group and back) live in
`mixed/conversion.py`.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import TYPE_CHECKING, Any, TypeGuard

from groupcoord.assignors.consumer_protocol import (
    ASSIGNMENT_VERSION,
    PROTOCOL_TYPE,
    Assignment,
    ProtocolDecodeError,
    Subscription,
    decode_subscription,
    decode_version,
    encode_assignment,
)
from groupcoord.coordinator.core.classic.messages import (
    UNKNOWN_MEMBER_ID,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
    Protocols,
    SyncGroupRequest,
    SyncGroupResponse,
)
from groupcoord.coordinator.core.consumer import assignment as consumer_assignment
from groupcoord.coordinator.core.consumer import heartbeat as consumer_heartbeat
from groupcoord.coordinator.core.consumer import replay as consumer_shard
from groupcoord.coordinator.core.consumer.group import (
    JOIN_TIMER,
    SYNC_TIMER,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    current_assignment_record,
    join_timer,
    member_metadata_record,
    session_timer,
    sync_timer,
)
from groupcoord.coordinator.core.consumer.reconciliation import reconcile
from groupcoord.coordinator.core.consumer.staged import Staged
from groupcoord.coordinator.core.consumer.target_assignment import subscribed_topic_ids
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.group import GroupTypeHooks
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.core.records import (
    ConsumerGroupClassicMemberMetadata,
    ConsumerGroupClassicMemberMetadataTombstone,
    ConsumerGroupTargetAssignmentMember,
)
from groupcoord.coordinator.core.results import Result

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard


MIXED_RECORD_TYPES: tuple[type, ...] = (ConsumerGroupClassicMemberMetadata,
                                        ConsumerGroupClassicMemberMetadataTombstone)


def hooks(shard: GroupCoordinatorShard) -> GroupTypeHooks:
    """Classic members' records and join/sync timers in consumer groups, for the shard's constructor."""
    return GroupTypeHooks(
        {ConsumerGroupClassicMemberMetadata: partial(_replay, shard),
         ConsumerGroupClassicMemberMetadataTombstone: partial(_replay_tombstone, shard)},
        {kind: partial(_on_timer, shard) for kind in (JOIN_TIMER, SYNC_TIMER)})


def _on_timer(shard: GroupCoordinatorShard, key: Any, now: int) -> Result[None]:
    """A classic member told to rejoin did not send JoinGroup, or one that joined did not send SyncGroup,
    within its rebalance timeout: fence it, as Kafka's join and sync timeouts do (a fence may downgrade the
    group: `mixed/conversion.py`)."""
    group = shard.groups.get(key[1])
    if not isinstance(group, ConsumerGroup):
        return Result(None, empty_after=consumer_shard.membership(group))
    member = group.members.get(key[2])
    if member is None or key[2] not in group.classic_members:
        return Result(None, empty_after=consumer_shard.membership(group))
    result: Result[None] = Result(None)
    shard.stats.members_fenced_rebalance += 1
    if not shard.maybe_downgrade(group, member.member_id, result, now):
        staged = Staged(shard, result, group)
        consumer_heartbeat.remove_member_records(shard, staged, member, bump_epoch=True)
        result.empty_after = staged.member_count() == 0
    return result


def _replay(shard: GroupCoordinatorShard, r: ConsumerGroupClassicMemberMetadata) -> None:
    consumer_shard.consumer_group(shard, r.group_id).classic_members[r.member_id] = r


def _replay_tombstone(shard: GroupCoordinatorShard, r: ConsumerGroupClassicMemberMetadataTombstone) -> None:
    group = shard.groups.get(r.group_id)
    if isinstance(group, ConsumerGroup):
        group.classic_members.pop(r.member_id, None)


# --- queries ---------------------------------------------------------------------------------------------------
def takes_classic_requests(group: Any) -> TypeGuard[ConsumerGroup]:
    """Kafka routes classic requests to a consumer group only when it has members; an empty one is converted
    to a classic group by a JoinGroup instead."""
    return isinstance(group, ConsumerGroup) and bool(group.members)


def session_timeout_ms(shard: GroupCoordinatorShard, group: ConsumerGroup | Staged, member_id: str) -> int:
    classic = group.classic_member(member_id) if isinstance(group, Staged) else group.classic_members.get(member_id)
    return classic.session_timeout_ms if classic is not None else shard.session_timeout_ms(group.group_id)


def owned_from_names(tps: tuple[tuple[str, int], ...], image: MetadataImage) -> dict[str, frozenset[int]]:
    """Topic-name partitions as the core keys them (topic id); topics that do not exist are dropped."""
    out: dict[str, set[int]] = {}
    for name, p in tps:
        t = image.by_name.get(name)
        if t is not None:
            out.setdefault(t.topic_id, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


def assignment_bytes(partitions: Any, image: MetadataImage, version: int) -> bytes:
    tps = tuple((image.by_id[t].name, p) for t, ps in partitions.items() if t in image.by_id for p in ps)
    return encode_assignment(Assignment(tps), min(max(version, 0), ASSIGNMENT_VERSION))


def decode_first_subscription(protocols: Protocols) -> Subscription:
    try:
        return decode_subscription(protocols[0][1])
    except (ProtocolDecodeError, IndexError):
        raise CoordinatorError(Errors.INCONSISTENT_GROUP_PROTOCOL,
                               "The JoinGroup metadata is not a ConsumerProtocol subscription.") from None


def _error(code: Errors, message: str) -> CoordinatorError:
    return CoordinatorError(code, message)


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None,
                    staged: Staged | None = None) -> ConsumerGroupMember:
    """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol (of the group as an
    operation's records so far leave it, when `staged` is given)."""
    member = staged.member(member_id) if staged is not None else group.members.get(member_id)
    if member is None:
        raise _error(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
    static_members = staged.static_members() if staged is not None else group.static_members
    if instance_id is not None and static_members.get(instance_id) != member_id:
        raise _error(Errors.FENCED_INSTANCE_ID, f"Instance {instance_id} is held by another member of "
                                                f"{group.group_id}.")
    classic = staged.is_classic(member_id) if staged is not None else member_id in group.classic_members
    if not classic:
        raise _error(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} of group {group.group_id} uses the consumer "
                                               "protocol, not the classic one.")
    return member


def _supports_protocols(group: ConsumerGroup, protocols: Protocols, member_id: str) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: share a protocol with every other classic member."""
    others = [m for mid, m in group.classic_members.items() if mid != member_id]
    names = {name for name, _ in protocols}
    for m in others:
        names &= {name for name, _ in m.protocols}
    return bool(names)


# --- JoinGroup -------------------------------------------------------------------------------------------------
def join(shard: GroupCoordinatorShard, group: ConsumerGroup, r: JoinGroupRequest,
         now: int) -> Result[JoinGroupResponse | None]:
    result: Result[JoinGroupResponse | None] = Result(None, empty_after=False)
    try:
        result.response = _join(shard, group, r, now, result)
    except CoordinatorError as e:  # raised before any record is written
        return Result(JoinGroupResponse(e.code, e.message, member_id=r.member_id))
    return result


def _join(shard: GroupCoordinatorShard, group: ConsumerGroup, r: JoinGroupRequest, now: int,
          result: Result[Any]) -> JoinGroupResponse:
    gid = group.group_id
    if r.protocol_type != PROTOCOL_TYPE or not _supports_protocols(group, r.protocols, r.member_id):
        raise _error(Errors.INCONSISTENT_GROUP_PROTOCOL,
                     f"Group {gid} is a consumer group: a classic member must use protocol type "
                     f"{PROTOCOL_TYPE!r} and share a protocol with its other classic members.")
    member_id = r.member_id
    if member_id == UNKNOWN_MEMBER_ID and r.instance_id is None:  # as Kafka: before the subscription is decoded
        return JoinGroupResponse(Errors.MEMBER_ID_REQUIRED, "Join again with the member id in this response "
                                 "(KIP-394).", member_id=shard.member_id_factory())
    subscription = decode_first_subscription(r.protocols)
    replaced: ConsumerGroupMember | None = None
    member: ConsumerGroupMember | None
    if r.instance_id is None:
        member = group.members.get(member_id)
        if member is not None and member_id not in group.classic_members:
            raise _error(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} of group {gid} uses the consumer protocol.")
    else:
        holder_id = group.static_members.get(r.instance_id)
        if member_id == UNKNOWN_MEMBER_ID:
            member_id = shard.member_id_factory()
            member = None
            replaced = group.members.get(holder_id) if holder_id is not None else None
        else:
            if holder_id is None:
                raise _error(Errors.UNKNOWN_MEMBER_ID, f"Instance {r.instance_id} is not a member of group {gid}.")
            if holder_id != member_id:
                raise _error(Errors.FENCED_INSTANCE_ID, f"Instance {r.instance_id} is held by another member of "
                                                        f"{gid}.")
            member = _classic_member(group, member_id, r.instance_id)
    if member is None and replaced is None and len(group.members) >= shard.config["group.consumer.max.size"]:
        raise _error(Errors.GROUP_MAX_SIZE_REACHED, f"Group {gid} reached its maximum size "
                                                    f"{shard.config['group.consumer.max.size']}.")
    owned = _owned(shard, subscription)

    # --- from here on, records are written (into `result`, read back through `staged`): nothing below raises ----
    staged = Staged(shard, result, group)
    is_new = False
    if replaced is not None:
        member = _replace_static_member(shard, staged, replaced, member_id)
    if member is None:
        member = ConsumerGroupMember(member_id)
        is_new = True
    rebalance_timeout_ms = r.rebalance_timeout_ms if r.rebalance_timeout_ms > 0 else r.session_timeout_ms
    updated = dataclasses.replace(
        member, instance_id=r.instance_id, rack_id=subscription.rack_id or None, client_id=r.client_id,
        client_host=r.client_host, subscribed_topic_names=tuple(sorted(set(subscription.topics))),
        subscribed_topic_regex=None, server_assignor=None, rebalance_timeout_ms=rebalance_timeout_ms)
    subscription_changed = (updated.subscribed_topic_names != member.subscribed_topic_names
                            or updated.subscribed_topic_regex != member.subscribed_topic_regex)
    bump = is_new or subscription_changed or updated.rack_id != member.rack_id
    if is_new or updated != member:
        staged.write(member_metadata_record(gid, updated))
    classic = ConsumerGroupClassicMemberMetadata(gid, member_id, r.session_timeout_ms, r.protocols)
    if staged.classic_member(member_id) != classic:
        staged.write(classic)
    member = staged.member(member_id)
    assert member is not None
    consumer_assignment.after_member_update(shard, staged, bump, subscription_changed, now)  # KIP-1263 too

    reconciled = _reconcile(shard, staged, member, owned, subscription_changed)
    if reconciled is not member:
        staged.write(current_assignment_record(gid, reconciled))
        consumer_heartbeat.maybe_arm_rebalance_timer(shard, gid, member, reconciled, now, result)
    _arm_session(shard, staged, member_id, now, result)
    shard.cancel_timer(result, join_timer(gid, member_id))
    shard.arm_timer(result, sync_timer(gid, member_id), now + rebalance_timeout_ms)
    return JoinGroupResponse(generation_id=reconciled.member_epoch, protocol_type=PROTOCOL_TYPE,
                             protocol_name=r.protocols[0][0], leader="", member_id=member_id)


def _owned(shard: GroupCoordinatorShard, subscription: Subscription) -> dict[str, frozenset[int]]:
    """The owned partitions the subscription reports, whatever its generation (as Kafka: what the client holds
    now; an eager member, generation -1, revoked everything before joining and reports nothing)."""
    return owned_from_names(subscription.owned_partitions, shard.metadata)


def _reconcile(shard: GroupCoordinatorShard, staged: Staged, member: ConsumerGroupMember,
               owned: dict[str, frozenset[int]], subscription_changed: bool) -> ConsumerGroupMember:
    target_epoch = staged.effective_target_epoch
    if member.state is MemberState.STABLE and member.member_epoch == target_epoch and not subscription_changed:
        return member
    return reconcile(member, target_epoch, staged.target_for(member.member_id),
                     subscribed_topic_ids(member, shard.metadata, staged.resolved_topics),
                     staged.owner_lookup(), owned, subscription_changed)


def _replace_static_member(shard: GroupCoordinatorShard, staged: Staged, old: ConsumerGroupMember,
                           new_id: str) -> ConsumerGroupMember:
    """A static member rejoins under a new member id: it inherits the old one's assignment and epoch, and the
    group epoch does not move (no rebalance), as a consumer-protocol static rejoin."""
    gid = staged.group_id
    target = staged.target_of(old.member_id)
    consumer_heartbeat.remove_member_records(shard, staged, old, bump_epoch=False)
    new = dataclasses.replace(old, member_id=new_id)
    staged.write(member_metadata_record(gid, new))
    staged.write(current_assignment_record(gid, new))
    if target is not None:
        staged.write(ConsumerGroupTargetAssignmentMember(gid, new_id, target))
    out = staged.member(new_id)
    assert out is not None
    return out


def _arm_session(shard: GroupCoordinatorShard, group: ConsumerGroup | Staged, member_id: str, now: int,
                 result: Result[Any]) -> None:
    shard.arm_timer(result, session_timer(group.group_id, member_id),
                    now + session_timeout_ms(shard, group, member_id))


# --- SyncGroup -------------------------------------------------------------------------------------------------
def sync(shard: GroupCoordinatorShard, group: ConsumerGroup, r: SyncGroupRequest,
         now: int) -> Result[SyncGroupResponse | None]:
    result: Result[SyncGroupResponse | None] = Result(None, empty_after=False)
    try:
        member = _classic_member(group, r.member_id, r.instance_id)
        _check_generation(group, member, r.generation_id)
        protocols = group.classic_members[member.member_id].protocols
        if (r.protocol_type is not None and r.protocol_type != PROTOCOL_TYPE) or \
                (r.protocol_name is not None and r.protocol_name != protocols[0][0]):
            raise _error(Errors.INCONSISTENT_GROUP_PROTOCOL,
                         f"SyncGroup names protocol {r.protocol_type}/{r.protocol_name}; member {member.member_id} "
                         f"joined with {PROTOCOL_TYPE}/{protocols[0][0]}.")
        if member.member_epoch < group.effective_target_epoch \
                and member.state is not MemberState.UNREVOKED_PARTITIONS:
            raise _error(Errors.REBALANCE_IN_PROGRESS, f"Group {group.group_id} has a newer target assignment; "
                                                       "rejoin.")
    except CoordinatorError as e:
        result.response = SyncGroupResponse(e.code, e.message)
        return result
    _arm_session(shard, group, member.member_id, now, result)
    shard.cancel_timer(result, sync_timer(group.group_id, member.member_id))
    try:
        version = decode_version(protocols[0][1])
    except ProtocolDecodeError:
        version = ASSIGNMENT_VERSION
    result.response = SyncGroupResponse(
        protocol_type=PROTOCOL_TYPE, protocol_name=protocols[0][0],
        assignment=assignment_bytes(member.assigned_sets(), shard.metadata, version))
    return result


def _check_generation(group: ConsumerGroup, member: ConsumerGroupMember, generation: int) -> None:
    if generation != member.member_epoch:
        raise _error(Errors.ILLEGAL_GENERATION, f"Generation {generation} is not member {member.member_id}'s epoch "
                                                f"{member.member_epoch} in group {group.group_id}; rejoin.")


# --- Heartbeat -------------------------------------------------------------------------------------------------
def heartbeat(shard: GroupCoordinatorShard, group: ConsumerGroup, r: HeartbeatRequest,
              now: int) -> Result[HeartbeatResponse]:
    result: Result[HeartbeatResponse] = Result(HeartbeatResponse(), empty_after=False)
    try:
        member = _classic_member(group, r.member_id, r.instance_id)
        _check_generation(group, member, r.generation_id)
    except CoordinatorError as e:
        result.response = HeartbeatResponse(e.code, e.message)
        return result
    _arm_session(shard, group, member.member_id, now, result)
    if must_rejoin(group, member):
        result.response = HeartbeatResponse(Errors.REBALANCE_IN_PROGRESS,
                                            f"Group {group.group_id} has a new assignment for you; rejoin.")
        key = join_timer(group.group_id, member.member_id)
        if key not in shard.timer_deadlines:  # Kafka's scheduleConsumerGroupJoinTimeoutIfAbsent
            shard.arm_timer(result, key, now + member.rebalance_timeout_ms)
    return result


def must_rejoin(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka's three conditions, the first as KIP-1263 states it: a newer *target* exists (not merely a newer
    group epoch); the member must revoke; or every partition it waits for (UNRELEASED_PARTITIONS) is free."""
    if member.member_epoch < group.effective_target_epoch or member.state is MemberState.UNREVOKED_PARTITIONS:
        return True
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return not _waiting_on_unreleased(group, member)
    return False


def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka's ConsumerGroup.waitingOnUnreleasedPartition: a target partition it lacks is still owned by
    another member."""
    owner = group.partition_owner
    for t, ps in group.target_for(member.member_id).items():
        current = member.assigned_partitions.get(t, {})
        for p in ps:
            if p not in current and owner.get((t, p)) not in (None, member.member_id):
                return True
    return False


# --- LeaveGroup ------------------------------------------------------------------------------------------------
def leave(shard: GroupCoordinatorShard, group: ConsumerGroup, r: LeaveGroupRequest,
          now: int) -> Result[LeaveGroupResponse]:
    """Kafka's classicGroupLeaveToConsumerGroup: each named classic member is removed (a static one too, by
    instance id), and the group epoch bumps."""
    result: Result[LeaveGroupResponse] = Result(LeaveGroupResponse())
    staged = Staged(shard, result, group)
    responses: list[MemberResponse] = []
    for identity in r.members:
        try:
            if identity.instance_id is not None:
                holder_id = staged.static_members().get(identity.instance_id)
                if holder_id is None:
                    raise _error(Errors.UNKNOWN_MEMBER_ID, f"Instance {identity.instance_id} is not a member of "
                                                           f"group {group.group_id}.")
                if identity.member_id and identity.member_id != holder_id:
                    raise _error(Errors.FENCED_INSTANCE_ID, f"Instance {identity.instance_id} is held by another "
                                                            "member.")
                member = _classic_member(group, holder_id, None, staged)
            else:
                member = _classic_member(group, identity.member_id, None, staged)
        except CoordinatorError as e:
            responses.append(MemberResponse(identity.member_id, identity.instance_id, e.code, e.message))
            continue
        consumer_heartbeat.remove_member_records(shard, staged, member, bump_epoch=True)
        shard.stats.members_left += 1
        responses.append(MemberResponse(member.member_id, identity.instance_id))
    result.response = LeaveGroupResponse(members=tuple(responses))
    result.empty_after = staged.member_count() == 0
    return result

