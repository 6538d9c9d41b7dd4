"""Online upgrade and downgrade between a classic group and a consumer group (KIP-848's migration path).

Kafka's `GroupMetadataManager.convertToConsumerGroup` / `ConsumerGroup.fromClassicGroup` and
`convertToClassicGroup` / `ClassicGroup.fromConsumerGroup`, under `group.consumer.migration.policy`
(BIDIRECTIONAL, UPGRADE, DOWNGRADE, DISABLED; case-insensitive):

- **Upgrade.** The first consumer-protocol heartbeat to a non-empty classic group converts it, keeping every
  member and its assignment: each classic member becomes a consumer-group member (with its classic metadata,
  so it goes on speaking JoinGroup/SyncGroup/Heartbeat, see `mixed/group.py`) at member epoch = the classic
  generation, STABLE, owning what its last SyncGroup gave it, and that assignment is the target at epoch =
  generation. The joining member then bumps the group epoch and the server assignor moves partitions through
  the usual revoke-then-assign reconciliation. Refused (GROUP_ID_NOT_FOUND, as Kafka) when the policy forbids
  it, the protocol type is not "consumer", a member's subscription is not Kafka's ConsumerProtocol, an
  assignment carries user data (a custom assignor's state the server assignor cannot keep), or the group would
  exceed `group.consumer.max.size`. groupcoord also waits (same error, the client retries) while the classic
  group is rebalancing or a member has not yet synced: only then is every member's assignment exactly what it
  owns (the records clear assignments when a join phase completes), so no partition can be handed out twice.
- **Downgrade.** When the last consumer-protocol member leaves or is fenced and classic members remain, the
  group becomes a classic group instead of removing that member: generation = the group epoch, the remaining
  members with their protocols and current assignments, then a rebalance (Joining), so the classic members
  rejoin and elect a leader. Refused when the policy forbids it or the group would exceed `group.max.size`.

Conversions are records: tombstones for the old group's records, then the new group's records, in one
operation, so replay reaches the same group. Both are pure (issue 26): an upgrade's records go into the heartbeat's
result, and the heartbeat reads the consumer group they make through `consumer/staged.py`; a downgrade builds
the classic group privately, as every classic operation does, and returns it (`ClassicGroupReplaced`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groupcoord.assignors.consumer_protocol import (
    PROTOCOL_TYPE,
    ProtocolDecodeError,
    decode_assignment,
    decode_subscription,
    decode_version,
)
from groupcoord.coordinator.core.classic import effects as classic_effects
from groupcoord.coordinator.core.classic import handlers as classic_handlers
from groupcoord.coordinator.core.classic.group import ClassicGroup
from groupcoord.coordinator.core.classic.messages import JoinGroupResponse, SyncGroupResponse
from groupcoord.coordinator.core.classic.records import (
    ClassicGroupMember,
    ClassicGroupMetadataTombstone,
    ClassicGroupState,
)
from groupcoord.coordinator.core.consumer import assignment as consumer_assignment
from groupcoord.coordinator.core.consumer import heartbeat as consumer_heartbeat
from groupcoord.coordinator.core.consumer.effects import ImageSeen, emit
from groupcoord.coordinator.core.consumer.group import (
    ConsumerGroup,
    MemberState,
    session_timer,
)
from groupcoord.coordinator.core.consumer.staged import Staged
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest
from groupcoord.coordinator.core.mixed import group as mixed_group
from groupcoord.coordinator.core.records import (
    ConsumerGroupClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMetadata,
    ConsumerGroupMetadataTombstone,
    ConsumerGroupRegularExpressionTombstone,
    ConsumerGroupTargetAssignmentMember,
    ConsumerGroupTargetAssignmentMetadata,
)
from groupcoord.coordinator.core.results import Result

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard


def migration_policy(shard: GroupCoordinatorShard) -> str:
    return str(shard.config["group.consumer.migration.policy"]).lower()


def _refuse(group_id: str, why: str) -> CoordinatorError:
    return CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {group_id} to a consumer "
                                                       f"group: {why}.")


# --- upgrade ---------------------------------------------------------------------------------------------------
def upgrade(shard: GroupCoordinatorShard, classic: Any, request: ConsumerGroupHeartbeatRequest,
            result: Result[Any], now: int) -> Staged:
    """Convert a non-empty classic group for a joining consumer-protocol member, or raise (nothing written).
    Pure: returns the consumer group as the conversion's records (in `result`) will leave it; the first of its
    records creates it (`consumer/replay.py`), replacing the classic group the tombstone drops."""
    if not isinstance(classic, ClassicGroup):
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a consumer group.")
    gid = classic.group_id
    members = _validate_upgrade(shard, classic, request)
    fx = classic_handlers.effects_for(shard, result, now)
    message = f"Group {gid} was upgraded to a consumer group; rejoin."
    for token in classic.awaiting_join.values():
        fx.answer(token, JoinGroupResponse(Errors.REBALANCE_IN_PROGRESS, message))
    for token in classic.awaiting_sync.values():
        fx.answer(token, SyncGroupResponse(Errors.REBALANCE_IN_PROGRESS, message))
    for key in [*(classic_effects.session_timer(gid, m) for m in classic.session_deadlines),
                classic_effects.join_timer(gid), classic_effects.sync_timer(gid)]:
        fx.cancel(key)
    shard._write(result, ClassicGroupMetadataTombstone(gid))
    staged = Staged(shard, result, ConsumerGroup(gid, timers=shard, metadata_image_seen=shard.metadata))
    epoch = classic.generation
    for m, subscription, owned in members:
        staged.write(ConsumerGroupMemberMetadata(
            gid, m.member_id, m.instance_id, subscription.rack_id or None, m.client_id, m.client_host,
            tuple(sorted(set(subscription.topics))), None, None, m.rebalance_timeout_ms))
        staged.write(ConsumerGroupClassicMemberMetadata(gid, m.member_id, m.session_timeout_ms, m.protocols))
        staged.write(ConsumerGroupTargetAssignmentMember(gid, m.member_id, owned))
        staged.write(ConsumerGroupCurrentMemberAssignment(
            gid, m.member_id, epoch, epoch, MemberState.STABLE.value,
            {t: dict.fromkeys(ps, epoch) for t, ps in owned.items()}, {}))
    # Timestamp 0: when the previous computation finished is unknown, so the next one runs at once (KIP-1263).
    staged.write(ConsumerGroupTargetAssignmentMetadata(gid, epoch, 0))
    staged.write(ConsumerGroupMetadata(gid, epoch, consumer_assignment.subscription_hash(shard, staged)))
    emit(shard, result, ImageSeen(gid, shard.metadata))

    for m, _, _ in members:
        shard.arm_timer(result, session_timer(gid, m.member_id), now + m.session_timeout_ms)
    shard.stats.groups_upgraded += 1
    return staged


def _validate_upgrade(shard: GroupCoordinatorShard, classic: ClassicGroup,
                      request: ConsumerGroupHeartbeatRequest) -> list[tuple[ClassicGroupMember, Any, Any]]:
    """Kafka's validateOnlineUpgrade and fromClassicGroup's checks, before anything is written."""
    gid = classic.group_id
    if classic.state is ClassicGroupState.INITIALIZE:
        raise CoordinatorError(Errors.COORDINATOR_LOAD_IN_PROGRESS, f"Group {gid} is still loading; retry.")
    if migration_policy(shard) not in ("bidirectional", "upgrade"):
        raise _refuse(gid, "group.consumer.migration.policy does not allow upgrades")
    if classic.protocol_type != PROTOCOL_TYPE:
        raise _refuse(gid, f"its protocol type is not {PROTOCOL_TYPE!r}")
    if len(classic.members) >= shard.config["group.consumer.max.size"]:
        raise _refuse(gid, "it would exceed group.consumer.max.size")
    if classic.state is not ClassicGroupState.STABLE or classic.pending_sync or classic.awaiting_sync:
        raise _refuse(gid, "it is rebalancing; retry once its members have synced")
    if request.instance_id is not None and request.instance_id in classic.static_members:
        raise CoordinatorError(Errors.UNRELEASED_INSTANCE_ID,
                               f"Static member {request.instance_id} of classic group {gid} has not left yet.")
    out = []
    for m in classic.members.values():
        try:
            subscription = decode_subscription(m.metadata(classic.protocol_name))
            assignment = decode_assignment(m.assignment)
        except ProtocolDecodeError:
            raise _refuse(gid, "the embedded consumer protocol is malformed") from None
        if assignment.user_data:
            raise _refuse(gid, "an unsupported custom assignor is in use (its assignment carries user data); "
                               "switch to a built-in assignor first")
        out.append((m, subscription, mixed_group.owned_from_names(assignment.partitions, shard.metadata)))
    return out


# --- downgrade -------------------------------------------------------------------------------------------------
def downgrade_applies(shard: GroupCoordinatorShard, group: ConsumerGroup, leaving_member_id: str) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMembers: whether the group becomes a classic group when
    `leaving_member_id` leaves (changes nothing)."""
    if len(group.classic_members) + 1 < len(group.members):
        return False  # a consumer-protocol member other than the leaving one stays (checked without a pass)
    remaining = [m for mid, m in group.members.items() if mid != leaving_member_id]
    if not remaining or any(m.member_id not in group.classic_members for m in remaining):
        return False
    if migration_policy(shard) not in ("bidirectional", "downgrade"):
        return False
    return len(remaining) <= shard.config["group.max.size"]


def maybe_downgrade(shard: GroupCoordinatorShard, group: ConsumerGroup, leaving_member_id: str,
                    result: Result[Any], now: int) -> bool:
    """Kafka's convertToClassicGroup, when `downgrade_applies`: True when the group became a classic group
    without `leaving_member_id` (which must then not be removed separately). Pure, as a classic operation is:
    the classic group is built privately, its record replayed into it, and returned as the group to install
    (`ClassicGroupReplaced`) after the consumer group's tombstones and its own record are applied."""
    if not downgrade_applies(shard, group, leaving_member_id):
        return False
    remaining = [m for mid, m in group.members.items() if mid != leaving_member_id]
    gid = group.group_id
    classic_members = []
    for m in remaining:
        meta = group.classic_members[m.member_id]
        try:
            version = decode_version(meta.protocols[0][1])
        except ProtocolDecodeError:
            version = 0
        # groupcoord keeps the *current* assignment (what each member owns; Kafka writes the target): a
        # rebalance follows at once, so the bytes only matter if the group is read before it completes.
        classic_members.append(ClassicGroupMember(
            m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms, meta.session_timeout_ms,
            meta.protocols, mixed_group.assignment_bytes(m.assigned_sets(), shard.metadata, version)))
    _write_consumer_group_tombstones(shard, group, result)
    classic = ClassicGroup(gid, protocol_type=PROTOCOL_TYPE)
    for cm in classic_members:
        classic._put(cm)
    protocol = classic.select_protocol()
    classic.leader_id = classic_members[0].member_id
    fx = classic_handlers.effects_for(shard, result, now, classic)  # created live (not loading): it becomes Stable
    fx.write(classic._record(ClassicGroupState.STABLE, group.group_epoch, protocol, classic_members))
    for cm in classic_members:
        classic._arm_session(cm.member_id, now + cm.session_timeout_ms, fx)
    classic._prepare_rebalance(fx)  # Kafka: a downgrade triggered by a leaving member rebalances the group
    classic_handlers.replaced(shard, result, gid, classic)
    shard.stats.groups_downgraded += 1
    return True


def _write_consumer_group_tombstones(shard: GroupCoordinatorShard, group: ConsumerGroup, result: Result[Any]) -> None:
    gid = group.group_id
    staged = Staged(shard, result, group)
    for member in list(group.members.values()):  # the same tombstones and cancellations as a member's removal
        consumer_heartbeat.remove_member_records(shard, staged, member, bump_epoch=False)
    for regex in list(group.resolved_regexes):
        staged.write(ConsumerGroupRegularExpressionTombstone(gid, regex))
    staged.write(ConsumerGroupMetadataTombstone(gid))
