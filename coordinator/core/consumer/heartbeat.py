"""ConsumerGroupHeartbeat (KIP-848): join, heartbeat, leave and static membership of consumer groups.

The rules are Kafka's GroupMetadataManager.consumerGroupHeartbeat: validate once at the edge; find or create
the group (converting an empty classic group, or upgrading a classic one: `mixed/conversion.py`); fence stale
epochs and foreign instance ids; write the member's records when its subscription or metadata changed and
bump the group epoch; compute the target (KIP-1263 batching and offload: `consumer/assignment.py`); reconcile
the member towards it (`consumer/reconciliation.py`) and arm its session and rebalance timers. The handlers are
pure: records go into the result through `Staged.write`, and what the rest of the heartbeat reads (the member
it updated, the epoch it bumped) is read through that staged view; the runtime applies the result afterwards.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core import retention
from groupcoord.coordinator.core.consumer import assignment as consumer_assignment
from groupcoord.coordinator.core.consumer import regex_subscriptions as regex_subscriptions
from groupcoord.coordinator.core.consumer.effects import RebalanceTimerEpoch, emit
from groupcoord.coordinator.core.consumer.group import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    MEMBER_TOMBSTONES,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    current_assignment_record,
    join_timer,
    member_metadata_record,
    rebalance_timer,
    session_timer,
    sync_timer,
)
from groupcoord.coordinator.core.consumer.reconciliation import reconcile
from groupcoord.coordinator.core.consumer.staged import Staged
from groupcoord.coordinator.core.consumer.target_assignment import cached_subscribed_topic_ids
from groupcoord.coordinator.core.consumer.topic_regex import compile_topic_regex
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.group import CLASSIC, CONSUMER, GroupView, not_this_type
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from groupcoord.coordinator.core.modern.group import FIRST_GROUP_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, check_member_epoch
from groupcoord.coordinator.core.modern.heartbeat import HeartbeatSteps
from groupcoord.coordinator.core.principals import check_member_principal, principal_may_act
from groupcoord.coordinator.core.records import (
    ConsumerGroupClassicMemberMetadataTombstone,
    ConsumerGroupMetadata,
    ConsumerGroupTargetAssignmentMember,
)
from groupcoord.coordinator.core.results import Result, TimerKey

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard


_NO_RESPONSE_YET = ConsumerGroupHeartbeatResponse()  # a result's response until the end of the heartbeat sets it


def heartbeat(shard: GroupCoordinatorShard, request: ConsumerGroupHeartbeatRequest,
              now: int) -> Result[ConsumerGroupHeartbeatResponse]:
    return _STEPS.run(shard, request, now)


def _validated(shard: GroupCoordinatorShard, r: ConsumerGroupHeartbeatRequest) -> None:
    _validate(shard, r)
    if shard.holds_streams_group(r.group_id):  # Kafka's getOrMaybeCreateConsumerGroup
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, not_this_type(r.group_id, CONSUMER))


def _refused(shard: GroupCoordinatorShard, r: ConsumerGroupHeartbeatRequest,
             e: CoordinatorError) -> ConsumerGroupHeartbeatResponse:
    shard.stats.count_heartbeat(e.code)
    return ConsumerGroupHeartbeatResponse(error_code=e.code, error_message=e.message, member_id=r.member_id,
                                          member_epoch=r.member_epoch)


def _answered(shard: GroupCoordinatorShard, r: ConsumerGroupHeartbeatRequest, now: int,
              result: Result[ConsumerGroupHeartbeatResponse]) -> None:
    shard.stats.count_heartbeat(result.response.error_code)
    retention.note_membership(shard, r.group_id, now, result)


_STABLE = MemberState.STABLE


def steady(shard: GroupCoordinatorShard, group_id: str, member_id: str, member_epoch: int, principal: str | None,
           now: int) -> tuple[tuple[int, int], TimerKey, int] | None:
    """The steady heartbeat (issue 30, step 6): a request carrying only the group id, the member id and an
    epoch (no subscription, rack, assignor, instance, owned partitions or rebalance timeout) from a known
    consumer-protocol member at its current epoch, stable at the group's target, in a group with nothing to
    compute (target at the group epoch, metadata seen, no regex subscription) and nothing to note for
    retention. `heartbeat` writes nothing for it and only re-arms the member's session deadline: this changes
    nothing (as every handler), without a Result, and returns what differs in its response from the request,
    `(heartbeat_interval_ms, session_timeout_ms)` (error NONE, the request's member id and epoch, no
    assignment), with the session timer's key and new deadline for the runtime to re-arm and note
    (`GroupCoordinatorShard.note_deadline`). Any other case returns None: the caller runs `heartbeat`. The
    caller has checked that the request carries no other field (tests/core/test_steady_heartbeat.py drives
    both paths with the same sequences and compares replies and state)."""
    if member_epoch <= 0:
        return None
    group = shard.groups.get(group_id)
    if type(group) is not ConsumerGroup:
        return None
    member = group.members.get(member_id)
    if (member is None or member.member_epoch != member_epoch or member.state is not _STABLE
            or member_epoch != group.effective_target_epoch or group.group_epoch > group.target_assignment_epoch
            or group.metadata_image_seen is not shard.metadata or group.regex_subscribers
            or member_id in group.classic_members or group_id in shard.empty_since
            or not principal_may_act(member.principal, principal)
            or not group_id.strip() or not member_id.strip()):
        return None
    session_timeout_ms = shard.session_timeout_ms(group_id)
    shard.stats.heartbeats_by_error["NONE"] += 1
    return (shard.heartbeat_interval_ms(group_id), session_timeout_ms), session_timer(group_id, member_id), \
        now + session_timeout_ms


def _validate(shard: GroupCoordinatorShard, r: ConsumerGroupHeartbeatRequest) -> None:
    def invalid(msg: str) -> CoordinatorError:
        return CoordinatorError(Errors.INVALID_REQUEST, msg)

    # As Kafka's throwIfEmptyString: blank (all whitespace) is empty.
    if not r.group_id.strip():
        raise invalid("group_id can't be empty.")
    if r.instance_id is not None and not r.instance_id.strip():
        raise invalid("instance_id can't be empty when set.")
    if r.rack_id is not None and not r.rack_id.strip():
        raise invalid("rack_id can't be empty when set.")
    if r.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid(f"member_epoch {r.member_epoch} is invalid: use 0 to join, -1 to leave, "
                      "-2 for a static member's temporary leave, or the epoch you were given.")
    if r.member_epoch != 0 and not r.member_id.strip():
        raise invalid("member_id can't be empty unless member_epoch is 0 (joining).")
    if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and r.instance_id is None:
        raise invalid("member_epoch -2 (static leave) requires instance_id.")
    if r.subscribed_topic_names is not None and r.subscribed_topic_regex is not None:
        raise invalid("subscribed_topic_names and subscribed_topic_regex can't both be set.")
    if r.subscribed_topic_names is not None and any(not n for n in r.subscribed_topic_names):
        raise invalid("subscribed_topic_names can't contain an empty topic name.")
    if r.rebalance_timeout_ms is not None and r.rebalance_timeout_ms <= 0:
        raise invalid("rebalance_timeout_ms must be positive.")
    if r.member_epoch == 0:
        if r.rebalance_timeout_ms is None:
            raise invalid("rebalance_timeout_ms must be provided when joining (member_epoch 0).")
        if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
            raise invalid("subscribed_topic_names or subscribed_topic_regex must be provided when joining.")
        if r.topic_partitions:
            raise invalid("topic_partitions must be empty when joining (member_epoch 0).")
    if r.topic_partitions is not None:
        for topic_id, parts in r.topic_partitions.items():
            if not topic_id:
                raise invalid("topic_partitions can't contain an empty topic id.")
            if any(p < 0 for p in parts):
                raise invalid(f"topic_partitions has a negative partition for topic {topic_id}.")
    if r.server_assignor is not None and r.server_assignor not in shard.config["group.consumer.assignors"]:
        raise CoordinatorError(
            Errors.UNSUPPORTED_ASSIGNOR,
            f"server_assignor {r.server_assignor!r} is not supported; supported: "
            f"{', '.join(shard.config['group.consumer.assignors'])}.")
    if r.subscribed_topic_regex is not None:
        if not r.subscribed_topic_regex:
            raise invalid("subscribed_topic_regex can't be empty when set.")
        compile_topic_regex(r.subscribed_topic_regex)


def _existing_group(shard: GroupCoordinatorShard, group_id: str) -> ConsumerGroup:
    group = shard.groups.get(group_id)
    if group is None:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} does not exist.")
    if not isinstance(group, ConsumerGroup):
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
    return group


def _get_or_create_group(shard: GroupCoordinatorShard, group_id: str, create: bool,
                         request: ConsumerGroupHeartbeatRequest, result: Result[Any], now: int) -> Staged:
    """The group the heartbeat works on, as its records will leave it: a new group (or one replacing an empty
    classic group) is a fresh one that its first record creates (`consumer/replay.py`)."""
    group = shard.groups.get(group_id)  # any type: a group id has one type
    if group is None or (not isinstance(group, ConsumerGroup) and create and _is_empty_classic(group)):
        if not create:
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} does not exist.")
        # an empty classic group is converted (Kafka's online upgrade): the first record replaces it
        return Staged(shard, result, ConsumerGroup(group_id, timers=shard))
    if not isinstance(group, ConsumerGroup):
        if create:  # Kafka's online upgrade (mixed/conversion.py); raises when refused
            return shard.upgrade_classic_group(group, request, result, now)
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND,
                               f"Group {group_id} is a {group.group_type} group"
                               f"{' with members' if not _is_empty_classic(group) else ''}, not a consumer group.")
    return Staged(shard, result, group)


def _heartbeat(shard: GroupCoordinatorShard, r: ConsumerGroupHeartbeatRequest,
               now: int) -> Result[ConsumerGroupHeartbeatResponse]:
    result: Result[ConsumerGroupHeartbeatResponse] = Result(_NO_RESPONSE_YET)
    joining = r.member_epoch == 0
    staged = _get_or_create_group(shard, r.group_id, joining, r, result, now)
    group = staged.group
    gid = group.group_id
    member_id = r.member_id
    member = staged.member(member_id) if member_id else None
    if member is not None:
        check_member_principal(member.principal, r.principal, member_id, gid)
    lost_response = False

    if joining:
        if not member_id:
            member_id = shard.member_id_factory()
            member = None
        member, is_new = _join_member(shard, staged, r, member_id, member, now)
        if staged.is_classic(member_id):  # a classic member moving to the consumer protocol
            staged.write(ConsumerGroupClassicMemberMetadataTombstone(gid, member_id))
    else:
        if r.instance_id is not None:  # as Kafka: the instance is checked before the member id
            holder_id = group.static_members.get(r.instance_id)
            if holder_id is None:
                raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID,
                                       f"Instance {r.instance_id} is not a member of group {gid}.")
            if holder_id != member_id:
                raise CoordinatorError(Errors.FENCED_INSTANCE_ID,
                                       f"Instance {r.instance_id} is held by another member of {gid}.")
        if member is None or staged.is_classic(member_id):
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID,
                                   f"Member {member_id} is not a consumer-protocol member of group {gid}.")
        lost_response = check_member_epoch(r.member_epoch, member.member_epoch, member.previous_member_epoch,
                                           partial(_owns_only_assigned, member, r))
        is_new = False

    # Subscription / metadata updates.
    updated = _updated_member(member, r)
    subscription_changed = (updated.subscribed_topic_names != member.subscribed_topic_names
                            or updated.subscribed_topic_regex != member.subscribed_topic_regex)
    bump = is_new or subscription_changed or updated.rack_id != member.rack_id \
        or updated.server_assignor != member.server_assignor
    if is_new or updated is not member:
        staged.write(member_metadata_record(gid, updated))
        member = staged.member(member_id)
        assert member is not None
    consumer_assignment.after_member_update(shard, staged, bump, subscription_changed, now)

    # Reconcile the member towards its target (steady state: nothing to do).
    target_epoch = staged.effective_target_epoch
    reconciled = member
    if member.state is not MemberState.STABLE or member.member_epoch != target_epoch or subscription_changed:
        subscribed = cached_subscribed_topic_ids(group, member, shard.metadata, staged.resolved_topics)
        reconciled = reconcile(
            member, target_epoch, staged.target_for(member_id), subscribed,
            staged.owner_lookup(), r.topic_partitions, subscription_changed,
        )
        if reconciled is not member:
            staged.write(current_assignment_record(gid, reconciled))
            maybe_arm_rebalance_timer(shard, gid, member, reconciled, now, result)
    session_timeout_ms = shard.session_timeout_ms(gid)
    shard.arm_timer(result, session_timer(gid, member_id), now + session_timeout_ms)
    result.empty_after = False

    send_assignment = (
        joining or lost_response or _is_full_request(r)
        or (reconciled is not member and reconciled.assigned_partitions is not member.assigned_partitions
            and reconciled.assigned_sets() != member.assigned_sets())  # `is`: an epoch-only bump keeps them
    )
    result.response = ConsumerGroupHeartbeatResponse(
        member_id=member_id,
        member_epoch=reconciled.member_epoch,
        heartbeat_interval_ms=shard.heartbeat_interval_ms(gid),
        assignment=reconciled.assigned_sets() if send_assignment else None,
        session_timeout_ms=session_timeout_ms,
    )
    return result


def _join_member(shard: GroupCoordinatorShard, staged: Staged, r: ConsumerGroupHeartbeatRequest, member_id: str,
                 member: ConsumerGroupMember | None, now: int) -> tuple[ConsumerGroupMember, bool]:
    """The joining member as the records written so far leave it, and whether it is new to the group."""
    group = staged.group
    if r.instance_id is not None:
        holder_id = group.static_members.get(r.instance_id)
        holder = group.members.get(holder_id) if holder_id else None
        if holder is not None:
            if holder_id != member_id:
                check_member_principal(holder.principal, r.principal, r.instance_id, group.group_id)
            # As Kafka: an active holder (not at -2) blocks every join with epoch 0, its own member id too.
            if holder.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise CoordinatorError(
                    Errors.UNRELEASED_INSTANCE_ID,
                    f"Static member {r.instance_id} of group {group.group_id} is still held by active member "
                    f"{holder_id}; it must leave (epoch -2) or time out first.")
            return _replace_static_member(shard, staged, holder, member_id, r), False
    if member is None:
        if staged.member_count() >= shard.config["group.consumer.max.size"]:
            raise CoordinatorError(Errors.GROUP_MAX_SIZE_REACHED,
                                   f"Group {group.group_id} reached its maximum size "
                                   f"{shard.config['group.consumer.max.size']}.")
        return ConsumerGroupMember(member_id, principal=r.principal), True
    # A known member rejoining with epoch 0 lost its state: it owns nothing now, so release everything
    # it held and let it reconcile from scratch (its target assignment is kept).
    if member.assigned_partitions or member.partitions_pending_revocation or member.member_epoch != 0:
        fresh = dataclasses.replace(member, member_epoch=0, previous_member_epoch=-1,
                                    state=MemberState.STABLE, assigned_partitions={},
                                    partitions_pending_revocation={})
        staged.write(current_assignment_record(group.group_id, fresh))
        shard.cancel_timer(staged.result, rebalance_timer(group.group_id, member_id))
    out = staged.member(member_id)
    assert out is not None
    return out, False


def _replace_static_member(shard: GroupCoordinatorShard, staged: Staged, old: ConsumerGroupMember, new_id: str,
                           r: ConsumerGroupHeartbeatRequest) -> ConsumerGroupMember:
    """A static member rejoins after a temporary leave (under a new member id or its own): as in Kafka, a
    copy at epoch 0 inherits the old member's assignment and target, reconciles from there, and the group
    epoch does not move (no rebalance)."""
    gid = staged.group_id
    target = staged.target_of(old.member_id)
    remove_member_records(shard, staged, old, bump_epoch=False)
    new = dataclasses.replace(old, member_id=new_id, member_epoch=0, previous_member_epoch=0)
    staged.write(member_metadata_record(gid, new))
    staged.write(current_assignment_record(gid, new))
    if target is not None:
        staged.write(ConsumerGroupTargetAssignmentMember(gid, new_id, target))
    out = staged.member(new_id)
    assert out is not None
    return out


def _owns_only_assigned(member: ConsumerGroupMember, r: ConsumerGroupHeartbeatRequest) -> bool:
    """A client at its previous epoch is tolerated if it owns nothing it was not assigned."""
    assigned = member.assigned_partitions
    return r.topic_partitions is not None and all(
        not ps or set(ps) <= set(assigned.get(t, ())) for t, ps in r.topic_partitions.items())


def _updated_member(m: ConsumerGroupMember, r: ConsumerGroupHeartbeatRequest) -> ConsumerGroupMember:
    changes: dict[str, Any] = {}
    if r.instance_id is not None and r.instance_id != m.instance_id:
        changes["instance_id"] = r.instance_id
    if r.rack_id is not None and r.rack_id != m.rack_id:
        changes["rack_id"] = r.rack_id
    if r.rebalance_timeout_ms is not None and r.rebalance_timeout_ms != m.rebalance_timeout_ms:
        changes["rebalance_timeout_ms"] = r.rebalance_timeout_ms
    if r.server_assignor is not None and r.server_assignor != m.server_assignor:
        changes["server_assignor"] = r.server_assignor
    if r.subscribed_topic_names is not None:
        names = tuple(sorted(set(r.subscribed_topic_names)))
        if names != m.subscribed_topic_names or m.subscribed_topic_regex is not None:
            changes["subscribed_topic_names"] = names
            changes["subscribed_topic_regex"] = None
    if r.subscribed_topic_regex is not None and (
        r.subscribed_topic_regex != m.subscribed_topic_regex or m.subscribed_topic_names
    ):
        changes["subscribed_topic_regex"] = r.subscribed_topic_regex
        changes["subscribed_topic_names"] = ()
    if r.member_epoch == 0:
        if r.client_id != m.client_id:
            changes["client_id"] = r.client_id
        if r.client_host != m.client_host:
            changes["client_host"] = r.client_host
    return dataclasses.replace(m, **changes) if changes else m


def maybe_arm_rebalance_timer(shard: GroupCoordinatorShard, group_id: str, before: ConsumerGroupMember,
                              after: ConsumerGroupMember, now: int, result: Result[Any]) -> None:
    key = (group_id, after.member_id)
    if after.state is MemberState.UNREVOKED_PARTITIONS:
        if before.state is not MemberState.UNREVOKED_PARTITIONS or before.member_epoch != after.member_epoch:
            emit(shard, result, RebalanceTimerEpoch(group_id, after.member_id, after.member_epoch))
            shard.arm_timer(result, rebalance_timer(*key), now + after.rebalance_timeout_ms)
    elif before.state is MemberState.UNREVOKED_PARTITIONS:
        emit(shard, result, RebalanceTimerEpoch(group_id, after.member_id, None))
        shard.cancel_timer(result, rebalance_timer(*key))


def _leave(shard: GroupCoordinatorShard, r: ConsumerGroupHeartbeatRequest,
           now: int) -> Result[ConsumerGroupHeartbeatResponse]:
    group = _existing_group(shard, r.group_id)
    member = group.members.get(r.member_id)
    if r.instance_id is not None:
        holder_id = group.static_members.get(r.instance_id)
        if holder_id is None:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID,
                                   f"Instance {r.instance_id} is not a member of group {r.group_id}.")
        if holder_id != r.member_id:
            raise CoordinatorError(Errors.FENCED_INSTANCE_ID,
                                   f"Instance {r.instance_id} is held by another member of {r.group_id}.")
    if member is None:
        raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID,
                               f"Member {r.member_id} is not a member of group {r.group_id}.")
    check_member_principal(member.principal, r.principal, r.member_id, r.group_id)
    temporary = r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
    result: Result[ConsumerGroupHeartbeatResponse] = Result(ConsumerGroupHeartbeatResponse())
    if temporary:
        # Temporary leave: keep the member (and its assignment) for a rejoin under a new member id;
        # the session timeout still removes it if it never comes back.
        left = dataclasses.replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                   previous_member_epoch=member.member_epoch)
        shard._write(result, current_assignment_record(group.group_id, left))
        shard.arm_timer(result, session_timer(group.group_id, member.member_id),
                        now + shard.session_timeout_ms(group.group_id))
        shard.cancel_timer(result, rebalance_timer(group.group_id, member.member_id))
        result.empty_after = False
    elif not shard.maybe_downgrade(group, member.member_id, result, now):
        staged = Staged(shard, result, group)
        remove_member_records(shard, staged, member, bump_epoch=True)
        result.empty_after = staged.member_count() == 0
    if not temporary:
        shard.stats.members_left += 1
    result.response = ConsumerGroupHeartbeatResponse(member_id=member.member_id, member_epoch=r.member_epoch,
                                                     heartbeat_interval_ms=0)
    return result


def remove_member_records(shard: GroupCoordinatorShard, staged: Staged, member: ConsumerGroupMember,
                          bump_epoch: bool) -> None:
    """A member leaves or is fenced (or a static member is replaced): its records go, its timers are
    cancelled; with `bump_epoch` the group epoch moves so the target is recomputed without it."""
    gid, mid, result = staged.group_id, member.member_id, staged.result
    if staged.is_classic(mid):
        staged.write(ConsumerGroupClassicMemberMetadataTombstone(gid, mid))
        shard.cancel_timer(result, join_timer(gid, mid))
        shard.cancel_timer(result, sync_timer(gid, mid))
    MEMBER_TOMBSTONES.remove(staged.write, gid, mid, staged.in_target(mid))
    shard.cancel_timer(result, session_timer(gid, mid))
    shard.cancel_timer(result, rebalance_timer(gid, mid))
    emit(shard, result, RebalanceTimerEpoch(gid, mid, None))
    if bump_epoch:
        regex_subscriptions.drop_unused(staged)
        new_hash = consumer_assignment.subscription_hash(shard, staged)
        staged.write(ConsumerGroupMetadata(gid, max(staged.group_epoch + 1, FIRST_GROUP_EPOCH), new_hash))


def _is_empty_classic(group: GroupView) -> bool:
    """An empty classic group is converted by a first heartbeat; a share group never is (Kafka: one type per
    group id)."""
    return group.group_type == CLASSIC and group.is_empty()


def _is_full_request(r: ConsumerGroupHeartbeatRequest) -> bool:
    return (r.rebalance_timeout_ms is not None
            and (r.subscribed_topic_names is not None or r.subscribed_topic_regex is not None)
            and r.topic_partitions is not None)


_STEPS = HeartbeatSteps(_validated, lambda r: r.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH,
                                                                 LEAVE_GROUP_STATIC_MEMBER_EPOCH),
                        _leave, _heartbeat, _refused, _answered)
