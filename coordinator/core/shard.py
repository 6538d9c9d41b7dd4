"""The group coordinator shard: every group operation, as a pure function of (state, request, now).

Each handler validates its request, computes records, applies them through `replay` (the only way state
changes, so replaying the log rebuilds the same state) and returns a `Result`: the response, the records
the runtime must persist before answering, timers to arm or cancel, and assignor runs to offload.
The shard never reads a clock, opens a socket or starts a thread: `now` is a parameter, member ids come
from an injected factory, and lag comes from an injected non-blocking provider.

The consumer-group (KIP-848) heartbeat, with KIP-1263's batching and offload, is implemented here; the
classic protocol, offsets and administration live in their own modules and share the group namespace.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from assignors.api import AssignorError, LagSnapshot, PartitionOffsets
from assignors.registry import get_server_assignor
from coordinator.core import (
    admin,
    classic_handlers,
    group_conversion,
    mixed_group,
    offsets,
    regex_subscriptions,
    retention,
    share_handlers,
    streams_shard,
)
from coordinator.core.classic_messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.core.config import GROUP_CONFIG_DEFS, BrokerConfig
from coordinator.core.consumer_group import (
    FIRST_GROUP_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    InflightAssignment,
    MemberState,
)
from coordinator.core.errors import CoordinatorError, Errors
from coordinator.core.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedGroup,
    DescribedGroupConfig,
    GroupResult,
    ListedGroup,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionError,
)
from coordinator.core.metadata import EMPTY_IMAGE, MetadataImage
from coordinator.core.offsets import OffsetStore
from coordinator.core.principals import check_member_principal
from coordinator.core.reconciliation import reconcile
from coordinator.core.records import (
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
    GroupConfig,
    GroupEmptySince,
    GroupEmptySinceTombstone,
    OffsetCommit,
    OffsetCommitTombstone,
)
from coordinator.core.results import CancelTimer, Result, ScheduleTimer, TimerKey
from coordinator.core.stats import CoreStats
from coordinator.core.target_assignment import (
    AssignorCompletion,
    AssignorRun,
    build_spec,
    choose_assignor,
    reconcile_result_with_group,
    subscribed_topic_ids,
    target_records,
)
from coordinator.core.topic_regex import RegexResolutionCompletion, compile_topic_regex

LAG_AWARE_ASSIGNORS = frozenset({"lag", "lag-sticky"})
R = TypeVar("R", bound=Result[Any])


class LagProvider(Protocol):
    """Non-blocking: returns the last known (log start, end) offsets per (topic name, partition)."""

    def offsets(self, topic_partitions: list[tuple[str, int]]) -> Mapping[tuple[str, int], tuple[int, int]]: ...


def session_timer(group_id: str, member_id: str) -> TimerKey:
    return ("session", group_id, member_id)


def rebalance_timer(group_id: str, member_id: str) -> TimerKey:
    return ("rebalance", group_id, member_id)


class GroupCoordinatorShard:
    """All groups of one coordinator shard. Not thread-safe by design: the runtime feeds it one op at a time."""

    def __init__(
        self,
        config: BrokerConfig,
        member_id_factory: Callable[[], str],
        metadata: MetadataImage = EMPTY_IMAGE,
        lag_provider: LagProvider | None = None,
    ) -> None:
        self.config = config
        self.member_id_factory = member_id_factory
        self.metadata = metadata
        self.lag_provider = lag_provider
        self.groups: dict[str, Any] = {}  # ConsumerGroup or the classic group type
        self.offsets = OffsetStore()
        self.group_configs: dict[str, dict[str, Any]] = {}
        self.stats = CoreStats()
        self._run_ids = itertools.count(1)
        self._rebalance_timer_epochs: dict[tuple[str, str], int] = {}
        # The deadline each consumer-group timer is armed for. The runtime pops a due timer and queues its
        # operation; a heartbeat queued before it may re-arm the timer meanwhile, so the operation checks
        # this deadline when it runs, as Kafka's timer callbacks check the member's current deadline.
        self.timer_deadlines: dict[TimerKey, int] = {}
        self.empty_since: dict[str, int] = {}  # group id -> when it last became empty (GroupEmptySince records)
        self.retention_pending: list[str] = []  # groups the running retention check has still to visit
        self._replayers: dict[type, Callable[[Any], None]] = {
            ConsumerGroupMetadata: self._replay_group_metadata,
            ConsumerGroupMetadataTombstone: self._replay_group_tombstone,
            ConsumerGroupMemberMetadata: self._replay_member_metadata,
            ConsumerGroupMemberMetadataTombstone: self._replay_member_tombstone,
            ConsumerGroupTargetAssignmentMember: self._replay_target_member,
            ConsumerGroupTargetAssignmentMemberTombstone: self._replay_target_member_tombstone,
            ConsumerGroupTargetAssignmentMetadata: self._replay_target_metadata,
            ConsumerGroupCurrentMemberAssignment: self._replay_current_assignment,
            ConsumerGroupCurrentMemberAssignmentTombstone: self._replay_current_assignment_tombstone,
            OffsetCommit: self.offsets.replay_commit,
            OffsetCommitTombstone: self.offsets.replay_tombstone,
            GroupConfig: self._replay_group_config,
            ConsumerGroupRegularExpression: self._replay_regex,
            ConsumerGroupRegularExpressionTombstone: self._replay_regex_tombstone,
            GroupEmptySince: self._replay_empty_since,
            GroupEmptySinceTombstone: self._replay_empty_since_tombstone,
        }
        classic_handlers.install(self)
        mixed_group.install(self)
        share_handlers.install(self)
        streams_shard.install(self)

    # =====================================================================================================
    # Records
    # =====================================================================================================
    def register_replayer(self, record_type: type, fn: Callable[[Any], None]) -> None:
        """Lets other group types (the classic protocol) plug their records into the same replay path."""
        self._replayers[record_type] = fn

    def replay(self, record: Any) -> None:
        self._replayers[type(record)](record)

    def _write(self, result: Result[Any], record: Any) -> None:
        if type(record) is ConsumerGroupMetadata:
            self.stats.rebalances += 1
        self.replay(record)
        result.records.append(record)

    def _replay_group_metadata(self, r: ConsumerGroupMetadata) -> None:
        group = self.groups.get(r.group_id)
        if not isinstance(group, ConsumerGroup):
            group = ConsumerGroup(r.group_id)
            self.groups[r.group_id] = group
        group.group_epoch = r.epoch
        group.metadata_hash = r.metadata_hash

    def _replay_group_tombstone(self, r: ConsumerGroupMetadataTombstone) -> None:
        group = self.groups.pop(r.group_id, None)
        if isinstance(group, ConsumerGroup):
            group.deleted = True

    def _consumer_group(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            group = ConsumerGroup(group_id)
            self.groups[group_id] = group
        return group

    def _replay_member_metadata(self, r: ConsumerGroupMemberMetadata) -> None:
        group = self._consumer_group(r.group_id)
        old = group.members.get(r.member_id) or ConsumerGroupMember(r.member_id)
        group.put_member(dataclasses.replace(
            old, instance_id=r.instance_id, rack_id=r.rack_id, client_id=r.client_id, client_host=r.client_host,
            subscribed_topic_names=r.subscribed_topic_names, subscribed_topic_regex=r.subscribed_topic_regex,
            server_assignor=r.server_assignor, rebalance_timeout_ms=r.rebalance_timeout_ms, principal=r.principal,
        ))

    def _replay_member_tombstone(self, r: ConsumerGroupMemberMetadataTombstone) -> None:
        group = self.groups.get(r.group_id)
        if isinstance(group, ConsumerGroup):
            group.remove_member(r.member_id)

    def _replay_target_member(self, r: ConsumerGroupTargetAssignmentMember) -> None:
        self._consumer_group(r.group_id).target_assignment[r.member_id] = r.partitions

    def _replay_target_member_tombstone(self, r: ConsumerGroupTargetAssignmentMemberTombstone) -> None:
        group = self.groups.get(r.group_id)
        if isinstance(group, ConsumerGroup):
            group.target_assignment.pop(r.member_id, None)

    def _replay_target_metadata(self, r: ConsumerGroupTargetAssignmentMetadata) -> None:
        group = self._consumer_group(r.group_id)
        group.target_assignment_epoch = r.assignment_epoch
        group.assignment_timestamp_ms = r.timestamp_ms

    def _replay_current_assignment(self, r: ConsumerGroupCurrentMemberAssignment) -> None:
        group = self._consumer_group(r.group_id)
        old = group.members.get(r.member_id) or ConsumerGroupMember(r.member_id)
        group.put_member(dataclasses.replace(
            old, member_epoch=r.member_epoch, previous_member_epoch=r.previous_member_epoch,
            state=MemberState(r.state), assigned_partitions=r.assigned_partitions,
            partitions_pending_revocation=r.partitions_pending_revocation,
        ))

    def _replay_current_assignment_tombstone(self, r: ConsumerGroupCurrentMemberAssignmentTombstone) -> None:
        group = self.groups.get(r.group_id)
        if isinstance(group, ConsumerGroup):
            group.remove_member(r.member_id)

    def _replay_regex(self, r: ConsumerGroupRegularExpression) -> None:
        group = self._consumer_group(r.group_id)
        group.resolved_regexes[r.regex] = frozenset(r.topics)
        group.regex_resolved_ms[r.regex] = r.timestamp_ms
        group.spec_cache.clear()  # members' subscribed topic ids depend on the resolution

    def _replay_regex_tombstone(self, r: ConsumerGroupRegularExpressionTombstone) -> None:
        group = self.groups.get(r.group_id)
        if isinstance(group, ConsumerGroup):
            group.resolved_regexes.pop(r.regex, None)
            group.regex_resolved_ms.pop(r.regex, None)
            group.spec_cache.clear()

    def _replay_empty_since(self, r: GroupEmptySince) -> None:
        self.empty_since[r.group_id] = r.timestamp_ms

    def _replay_empty_since_tombstone(self, r: GroupEmptySinceTombstone) -> None:
        self.empty_since.pop(r.group_id, None)

    def _replay_group_config(self, r: GroupConfig) -> None:
        if r.configs:
            self.group_configs[r.group_id] = dict(r.configs)
        else:
            self.group_configs.pop(r.group_id, None)

    # =====================================================================================================
    # Configs
    # =====================================================================================================
    def group_config(self, group_id: str, name: str) -> Any:
        """The group's override of `name`, or its schema default (None = not set)."""
        overrides = self.group_configs.get(group_id)
        if overrides is not None and name in overrides:
            return overrides[name]
        return GROUP_CONFIG_DEFS[name].default

    def session_timeout_ms(self, group_id: str) -> int:
        v = self.group_config(group_id, "consumer.session.timeout.ms")
        return int(v if v is not None else self.config["group.consumer.session.timeout.ms"])

    def heartbeat_interval_ms(self, group_id: str) -> int:
        v = self.group_config(group_id, "consumer.heartbeat.interval.ms")
        return int(v if v is not None else self.config["group.consumer.heartbeat.interval.ms"])

    def assignment_interval_ms(self, group_id: str) -> int:
        """KIP-1263: the group's consumer.assignment.interval.ms unless -1, else the broker's."""
        v = self.group_config(group_id, "consumer.assignment.interval.ms")
        if v is None or v == -1:
            return int(self.config["group.consumer.assignment.interval.ms"])
        return int(v)

    def offload_enabled(self, group_id: str) -> bool:
        v = self.group_config(group_id, "consumer.assignor.offload.enable")
        return bool(self.config["group.consumer.assignor.offload.enable"] if v is None else v)

    # =====================================================================================================
    # Metadata
    # =====================================================================================================
    def _subscription_hash(self, group: ConsumerGroup) -> int:
        names = group.subscribed_topic_names()
        for rx in group.regexes():
            names.update(group.resolved_topics(rx))
        return self.metadata.topics_hash(names)

    def on_metadata_update(self, image: MetadataImage, now: int) -> Result[None]:
        """New topic metadata: bump the epoch of every consumer group whose subscribed topics changed, so the
        next heartbeat recomputes its target assignment."""
        self.metadata = image
        result: Result[None] = Result(None)
        for group in list(self.groups.values()):
            if not isinstance(group, ConsumerGroup) or not group.members:
                continue
            self._maybe_resolve_regexes(group, now, result)
            new_hash = self._subscription_hash(group)
            if new_hash != group.metadata_hash:
                self._write(result, ConsumerGroupMetadata(group.group_id, group.group_epoch + 1, new_hash))
                self.stats.metadata_bumps += 1
        return result

    # =====================================================================================================
    # ConsumerGroupHeartbeat
    # =====================================================================================================
    def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, now: int
    ) -> Result[ConsumerGroupHeartbeatResponse]:
        try:
            self._validate_heartbeat(request)
            if streams_shard.holds(self, request.group_id):  # Kafka's getOrMaybeCreateConsumerGroup
                raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND,
                                       streams_shard.not_this_type(request.group_id, "consumer"))
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                result = self._leave(request, now)
            else:
                result = self._heartbeat(request, now)
        except CoordinatorError as e:
            self.stats.count_heartbeat(e.code)
            return Result(ConsumerGroupHeartbeatResponse(
                error_code=e.code, error_message=e.message, member_id=request.member_id,
                member_epoch=request.member_epoch))
        self.stats.count_heartbeat(result.response.error_code)
        retention.note_membership(self, request.group_id, now, result)
        return result

    def _validate_heartbeat(self, r: ConsumerGroupHeartbeatRequest) -> None:
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
        if r.server_assignor is not None and r.server_assignor not in self.config["group.consumer.assignors"]:
            raise CoordinatorError(
                Errors.UNSUPPORTED_ASSIGNOR,
                f"server_assignor {r.server_assignor!r} is not supported; supported: "
                f"{', '.join(self.config['group.consumer.assignors'])}.")
        if r.subscribed_topic_regex is not None:
            if not r.subscribed_topic_regex:
                raise invalid("subscribed_topic_regex can't be empty when set.")
            compile_topic_regex(r.subscribed_topic_regex)

    def _existing_consumer_group(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} does not exist.")
        if not isinstance(group, ConsumerGroup):
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return group

    def _get_or_create_group(self, group_id: str, create: bool, request: ConsumerGroupHeartbeatRequest,
                             result: Result[Any], now: int) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None or (not isinstance(group, ConsumerGroup) and create and _is_empty_classic(group)):
            if not create:
                raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} does not exist.")
            if group is not None:  # an empty classic group is converted (Kafka's online upgrade)
                self.groups.pop(group_id)
            group = ConsumerGroup(group_id)
            self.groups[group_id] = group
            return group
        if not isinstance(group, ConsumerGroup):
            if create:  # Kafka's online upgrade (group_conversion.py); raises when refused
                return group_conversion.upgrade(self, group, request, result, now)
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND,
                                   f"Group {group_id} is a {getattr(group, 'group_type', 'classic')} group"
                                   f"{' with members' if not _is_empty_classic(group) else ''}, not a consumer group.")
        return group

    def _heartbeat(self, r: ConsumerGroupHeartbeatRequest, now: int) -> Result[ConsumerGroupHeartbeatResponse]:
        result: Result[ConsumerGroupHeartbeatResponse] = Result(ConsumerGroupHeartbeatResponse())
        joining = r.member_epoch == 0
        group = self._get_or_create_group(r.group_id, joining, r, result, now)
        member_id = r.member_id
        member = group.members.get(member_id) if member_id else None
        if member is not None:
            check_member_principal(member.principal, r.principal, member_id, group.group_id)
        lost_response = False

        if joining:
            if not member_id:
                member_id = self.member_id_factory()
                member = None
            member = self._join_member(group, r, member_id, member, result, now)
            if member_id in group.classic_members:  # a classic member moving to the consumer protocol
                self._write(result, mixed_group.ConsumerGroupClassicMemberMetadataTombstone(group.group_id, member_id))
        else:
            if r.instance_id is not None:  # as Kafka: the instance is checked before the member id
                holder_id = group.static_members.get(r.instance_id)
                if holder_id is None:
                    raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID,
                                           f"Instance {r.instance_id} is not a member of group {group.group_id}.")
                if holder_id != member_id:
                    raise CoordinatorError(Errors.FENCED_INSTANCE_ID,
                                           f"Instance {r.instance_id} is held by another member of {group.group_id}.")
            if member is None or member_id in group.classic_members:
                raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID,
                                       f"Member {member_id} is not a consumer-protocol member of group "
                                       f"{group.group_id}.")
            lost_response = self._check_member_epoch(member, r)

        # Subscription / metadata updates.
        is_new = member_id not in group.members
        updated = self._updated_member(member, r)
        subscription_changed = (updated.subscribed_topic_names != member.subscribed_topic_names
                                or updated.subscribed_topic_regex != member.subscribed_topic_regex)
        bump = is_new or subscription_changed or updated.rack_id != member.rack_id \
            or updated.server_assignor != member.server_assignor
        if is_new or updated is not member:
            self._write(result, _member_metadata_record(group.group_id, updated))
            member = group.members[member_id]
        if subscription_changed:
            self._drop_unused_regexes(group, result)
        self._maybe_resolve_regexes(group, now, result)
        if bump or group.metadata_image_seen is not self.metadata:
            new_hash = self._subscription_hash(group)
            group.metadata_image_seen = self.metadata
            if bump or new_hash != group.metadata_hash:
                new_epoch = max(group.group_epoch + 1, FIRST_GROUP_EPOCH)
                self._write(result, ConsumerGroupMetadata(group.group_id, new_epoch, new_hash))

        if group.group_epoch > group.target_assignment_epoch:
            self._maybe_compute_target(group, now, result)

        # Reconcile the member towards its target (steady state: nothing to do).
        target_epoch = group.effective_target_epoch
        reconciled = member
        if member.state is not MemberState.STABLE or member.member_epoch != target_epoch or subscription_changed:
            subscribed = subscribed_topic_ids(member, self.metadata, group.resolved_topics)
            owner = group.partition_owner
            reconciled = reconcile(
                member, target_epoch, group.target_for(member_id), subscribed,
                lambda t, p: owner.get((t, p)), r.topic_partitions, subscription_changed,
            )
            if reconciled is not member:
                self._write(result, _current_assignment_record(group.group_id, reconciled))
                self._maybe_arm_rebalance_timer(group, member, reconciled, now, result)
        self.arm_timer(result, session_timer(group.group_id, member_id), now + self.session_timeout_ms(group.group_id))

        send_assignment = (
            joining or lost_response or _is_full_request(r)
            or (reconciled is not member and reconciled.assigned_sets() != member.assigned_sets())
        )
        result.response = ConsumerGroupHeartbeatResponse(
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            assignment=reconciled.assigned_sets() if send_assignment else None,
            session_timeout_ms=self.session_timeout_ms(group.group_id),
        )
        return result

    def _join_member(self, group: ConsumerGroup, r: ConsumerGroupHeartbeatRequest, member_id: str,
                     member: ConsumerGroupMember | None, result: Result[Any], now: int) -> ConsumerGroupMember:
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
                return self._replace_static_member(group, holder, member_id, r, result)
        if member is None:
            if len(group.members) >= self.config["group.consumer.max.size"]:
                raise CoordinatorError(Errors.GROUP_MAX_SIZE_REACHED,
                                       f"Group {group.group_id} reached its maximum size "
                                       f"{self.config['group.consumer.max.size']}.")
            return ConsumerGroupMember(member_id, principal=r.principal)
        # A known member rejoining with epoch 0 lost its state: it owns nothing now, so release everything
        # it held and let it reconcile from scratch (its target assignment is kept).
        if member.assigned_partitions or member.partitions_pending_revocation or member.member_epoch != 0:
            fresh = dataclasses.replace(member, member_epoch=0, previous_member_epoch=-1,
                                        state=MemberState.STABLE, assigned_partitions={},
                                        partitions_pending_revocation={})
            self._write(result, _current_assignment_record(group.group_id, fresh))
            self.cancel_timer(result, rebalance_timer(group.group_id, member_id))
        return group.members[member_id]

    def _replace_static_member(self, group: ConsumerGroup, old: ConsumerGroupMember, new_id: str,
                               r: ConsumerGroupHeartbeatRequest, result: Result[Any]) -> ConsumerGroupMember:
        """A static member rejoins after a temporary leave (under a new member id or its own): as in Kafka, a
        copy at epoch 0 inherits the old member's assignment and target, reconciles from there, and the group
        epoch does not move (no rebalance)."""
        gid = group.group_id
        target = group.target_assignment.get(old.member_id)
        self._remove_member_records(group, old, result, bump_epoch=False)
        new = dataclasses.replace(old, member_id=new_id, member_epoch=0, previous_member_epoch=0)
        self._write(result, _member_metadata_record(gid, new))
        self._write(result, _current_assignment_record(gid, new))
        if target is not None:
            self._write(result, ConsumerGroupTargetAssignmentMember(gid, new_id, target))
        return group.members[new_id]

    def _check_member_epoch(self, member: ConsumerGroupMember, r: ConsumerGroupHeartbeatRequest) -> bool:
        """Kafka's epoch fencing. Returns True when the client missed our last response (tolerated)."""
        if r.member_epoch == member.member_epoch:
            return False
        if r.member_epoch > member.member_epoch:
            raise CoordinatorError(Errors.FENCED_MEMBER_EPOCH,
                                   f"Member epoch {r.member_epoch} is newer than the coordinator's "
                                   f"{member.member_epoch}; rejoin with epoch 0.")
        if r.member_epoch == member.previous_member_epoch and r.topic_partitions is not None:
            assigned = member.assigned_partitions
            if all(not ps or set(ps) <= set(assigned.get(t, ())) for t, ps in r.topic_partitions.items()):
                return True
        raise CoordinatorError(Errors.FENCED_MEMBER_EPOCH,
                               f"Member epoch {r.member_epoch} is stale (current {member.member_epoch}); "
                               "rejoin with epoch 0.")

    def _updated_member(self, m: ConsumerGroupMember, r: ConsumerGroupHeartbeatRequest) -> ConsumerGroupMember:
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

    def _maybe_arm_rebalance_timer(self, group: ConsumerGroup, before: ConsumerGroupMember,
                                   after: ConsumerGroupMember, now: int, result: Result[Any]) -> None:
        key = (group.group_id, after.member_id)
        if after.state is MemberState.UNREVOKED_PARTITIONS:
            if before.state is not MemberState.UNREVOKED_PARTITIONS or before.member_epoch != after.member_epoch:
                self._rebalance_timer_epochs[key] = after.member_epoch
                self.arm_timer(result, rebalance_timer(*key), now + after.rebalance_timeout_ms)
        elif before.state is MemberState.UNREVOKED_PARTITIONS:
            self._rebalance_timer_epochs.pop(key, None)
            self.cancel_timer(result, rebalance_timer(*key))

    # --- leaving ------------------------------------------------------------------------------------------
    def _leave(self, r: ConsumerGroupHeartbeatRequest, now: int) -> Result[ConsumerGroupHeartbeatResponse]:
        result: Result[ConsumerGroupHeartbeatResponse] = Result(ConsumerGroupHeartbeatResponse())
        group = self._existing_consumer_group(r.group_id)
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
        if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # Temporary leave: keep the member (and its assignment) for a rejoin under a new member id;
            # the session timeout still removes it if it never comes back.
            left = dataclasses.replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                       previous_member_epoch=member.member_epoch)
            self._write(result, _current_assignment_record(group.group_id, left))
            self.arm_timer(result, session_timer(group.group_id, member.member_id),
                           now + self.session_timeout_ms(group.group_id))
            self.cancel_timer(result, rebalance_timer(group.group_id, member.member_id))
        else:
            if not group_conversion.maybe_downgrade(self, group, member.member_id, result, now):
                self._remove_member_records(group, member, result, bump_epoch=True)
            self.stats.members_left += 1
        result.response = ConsumerGroupHeartbeatResponse(member_id=member.member_id, member_epoch=r.member_epoch,
                                                         heartbeat_interval_ms=0)
        return result

    def _remove_member_records(self, group: ConsumerGroup, member: ConsumerGroupMember, result: Result[Any],
                               bump_epoch: bool) -> None:
        gid, mid = group.group_id, member.member_id
        if mid in group.classic_members:
            self._write(result, mixed_group.ConsumerGroupClassicMemberMetadataTombstone(gid, mid))
            self.cancel_timer(result, mixed_group.join_timer(gid, mid))
            self.cancel_timer(result, mixed_group.sync_timer(gid, mid))
        self._write(result, ConsumerGroupCurrentMemberAssignmentTombstone(gid, mid))
        if mid in group.target_assignment:
            self._write(result, ConsumerGroupTargetAssignmentMemberTombstone(gid, mid))
        self._write(result, ConsumerGroupMemberMetadataTombstone(gid, mid))
        self.cancel_timer(result, session_timer(gid, mid))
        self.cancel_timer(result, rebalance_timer(gid, mid))
        self._rebalance_timer_epochs.pop((gid, mid), None)
        if bump_epoch:
            self._drop_unused_regexes(group, result)
            new_hash = self._subscription_hash(group)
            self._write(result, ConsumerGroupMetadata(gid, max(group.group_epoch + 1, FIRST_GROUP_EPOCH), new_hash))

    # --- regex subscriptions (rules in regex_subscriptions.py) ---------------------------------------------
    def _maybe_resolve_regexes(self, group: ConsumerGroup, now: int, result: Result[Any]) -> None:
        regex_subscriptions.maybe_resolve(self, group, now, result)

    def on_regex_resolution_complete(self, completion: RegexResolutionCompletion, now: int) -> Result[None]:
        return regex_subscriptions.on_resolution_complete(self, completion, now)

    def _drop_unused_regexes(self, group: ConsumerGroup, result: Result[Any]) -> None:
        regex_subscriptions.drop_unused(self, group, result)

    # --- timers ------------------------------------------------------------------------------------------
    def arm_timer(self, result: Result[Any], key: TimerKey, deadline_ms: int) -> None:
        self.timer_deadlines[key] = deadline_ms
        result.timers.append(ScheduleTimer(key, deadline_ms))

    def cancel_timer(self, result: Result[Any], key: TimerKey) -> None:
        self.timer_deadlines.pop(key, None)
        result.timers.append(CancelTimer(key))

    def _timer_due(self, key: TimerKey, now: int) -> bool:
        """True (and disarmed) if `key` is armed and its current deadline has passed; False for a stale timer
        whose operation was queued before a heartbeat re-armed or a removal cancelled it."""
        deadline = self.timer_deadlines.get(key)
        if deadline is None or now < deadline:
            return False
        del self.timer_deadlines[key]
        return True

    def on_timer(self, key: TimerKey, now: int) -> Result[None]:
        """A timer the runtime armed has fired: session expiry or rebalance timeout fences the member; the
        retention check expires offsets; other group types handle their own kinds."""
        result: Result[None] = Result(None)
        kind = key[0]
        if kind in ("session", "rebalance"):
            if self._timer_due(key, now):
                result = self._fence_on_timer(kind, key[1], key[2], now)
        elif key == retention.RETENTION_TIMER:
            return retention.on_retention_timer(self, now) if self._timer_due(key, now) else result
        else:
            handler = self._timer_handlers.get(kind)
            if handler is None:
                return result
            result = handler(key, now)
        if len(key) > 1:
            retention.note_membership(self, key[1], now, result)
        return result

    def _fence_on_timer(self, kind: str, group_id: str, member_id: str, now: int) -> Result[None]:
        result: Result[None] = Result(None)
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            return result
        member = group.members.get(member_id)
        if member is None:
            return result
        if kind == "rebalance":
            expected = self._rebalance_timer_epochs.pop((group_id, member_id), None)
            if member.state is not MemberState.UNREVOKED_PARTITIONS or expected != member.member_epoch:
                return result
            self.stats.members_fenced_rebalance += 1
        else:
            self.stats.members_fenced_session += 1
        if not group_conversion.maybe_downgrade(self, group, member_id, result, now):
            self._remove_member_records(group, member, result, bump_epoch=True)
        return result

    _timer_handlers: dict[str, Callable[[TimerKey, int], Result[None]]] = {}

    def register_timer_handler(self, kind: str, fn: Callable[[TimerKey, int], Result[None]]) -> None:
        self._timer_handlers = {**self._timer_handlers, kind: fn}

    # =====================================================================================================
    # Offsets and administration (rules in offsets.py / admin.py; the shard is the single entry point)
    # =====================================================================================================
    def offset_commit(self, request: OffsetCommitRequest, now: int) -> Result[OffsetCommitResponse]:
        result = offsets.handle_offset_commit(self, request, now)
        if result.records:
            retention.ensure_timer(self, now, result)
        return result

    def _noting_membership(self, result: R, group_id: str, now: int) -> R:
        retention.note_membership(self, group_id, now, result)
        return result

    def offset_fetch(self, request: OffsetFetchRequest, now: int) -> Result[OffsetFetchResponse]:
        return offsets.handle_offset_fetch(self, request, now)

    def describe_groups(self, group_ids: list[str], now: int) -> Result[list[DescribedGroup]]:
        return Result(admin.describe_groups(self, group_ids))

    def list_groups(self, states: list[str], types: list[str], now: int) -> Result[list[ListedGroup]]:
        return Result(admin.list_groups(self, states, types))

    def delete_groups(self, group_ids: list[str], now: int) -> Result[list[GroupResult]]:
        return admin.delete_groups(self, group_ids)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]],
                       now: int) -> Result[tuple[GroupResult, list[PartitionError]]]:
        return admin.delete_offsets(self, group_id, partitions)

    def describe_group_configs(self, group_ids: list[str], now: int) -> Result[list[DescribedGroupConfig]]:
        return Result(admin.describe_group_configs(self, group_ids))

    def alter_group_configs(self, group_id: str, updates: Mapping[str, str | None], validate_only: bool,
                            now: int) -> Result[GroupResult]:
        return admin.alter_group_configs(self, group_id, updates, validate_only)

    # =====================================================================================================
    # Target assignment (KIP-1263 batching and offload)
    # =====================================================================================================
    def _maybe_compute_target(self, group: ConsumerGroup, now: int, result: Result[Any]) -> None:
        if group.inflight is not None:
            self.stats.assignor_skipped_inflight += 1
            return
        interval = self.assignment_interval_ms(group.group_id)
        if group.assignment_timestamp_ms and now - group.assignment_timestamp_ms < interval:
            self.stats.assignor_skipped_interval += 1
            return
        assignor_name = choose_assignor(group, self.config["group.consumer.assignors"])
        spec = build_spec(group, self.metadata, group.resolved_topics)
        lag = self._lag_snapshot(group, assignor_name, spec)
        epoch = group.group_epoch
        if self.offload_enabled(group.group_id):
            run_id = next(self._run_ids)
            group.inflight = InflightAssignment(
                run_id, epoch, {mid: m.instance_id for mid, m in group.members.items() if m.instance_id},
                assignor_name)
            result.tasks.append(AssignorRun(group.group_id, run_id, assignor_name, epoch, spec, self.metadata, lag))
            self.stats.assignor_runs_offloaded += 1
            return
        self.stats.assignor_runs_sync += 1
        try:
            assignment = get_server_assignor(assignor_name).assign(spec, self.metadata, lag)
        except AssignorError as e:
            self.stats.assignor_failures += 1
            self.last_assignor_error = f"{group.group_id}: {e}"
            return
        group.last_assignor = assignor_name
        for record in target_records(group, assignment, epoch, now):
            self._write(result, record)

    last_assignor_error: str = ""

    def on_assignment_complete(self, completion: AssignorCompletion, now: int) -> Result[None]:
        """An offloaded run finished. Apply it unless the group is gone or the run is stale, after
        applying what changed meanwhile (removed members dropped, replaced static members moved)."""
        if getattr(self.groups.get(completion.group_id), "group_type", "") == "share":
            return share_handlers.on_assignment_complete(self, completion, now)
        result: Result[None] = Result(None)
        group = self.groups.get(completion.group_id)
        if not isinstance(group, ConsumerGroup) or group.inflight is None \
                or group.inflight.run_id != completion.run_id:
            self.stats.assignor_results_discarded += 1
            return result
        inflight = group.inflight
        group.inflight = None
        if completion.assignment is None:
            self.stats.assignor_failures += 1
            self.last_assignor_error = f"{group.group_id}: {completion.error}"
            return result
        group.last_assignor = inflight.assignor_name
        new_target = reconcile_result_with_group(group, completion.assignment, inflight.instance_ids)
        for record in target_records(group, new_target, inflight.assignment_epoch, now):
            self._write(result, record)
        return result

    def _lag_snapshot(self, group: ConsumerGroup, assignor_name: str, spec: Any) -> LagSnapshot | None:
        if assignor_name not in LAG_AWARE_ASSIGNORS:
            return None
        reset = str(self.group_config(group.group_id, "consumer.auto.offset.reset"))
        topic_ids = set().union(*(m.subscribed_topic_ids for m in spec.members.values())) if spec.members else set()
        tps: list[tuple[str, int]] = []
        for tid in sorted(topic_ids):
            t = self.metadata.by_id.get(tid)
            if t is not None:
                tps.extend((t.name, p) for p in range(t.partition_count))
        kafka = self.lag_provider.offsets(tps) if self.lag_provider is not None else {}
        committed = self.offsets.committed(group.group_id)
        offsets: dict[tuple[str, int], PartitionOffsets] = {}
        for name, p in tps:
            start_end = kafka.get((name, p))
            c = committed.get((name, p))
            if start_end is None and c is None:
                continue
            start, end = start_end if start_end is not None else (0, c.committed_offset if c else 0)
            offsets[(self.metadata.by_name[name].topic_id, p)] = PartitionOffsets(
                end_offset=end, committed_offset=None if c is None else c.committed_offset, log_start_offset=start)
        return LagSnapshot(offsets=offsets, auto_offset_reset=reset)

    # =====================================================================================================
    # Classic protocol (rules in classic_group.py / classic_handlers.py)
    # =====================================================================================================
    def classic_group_join(self, request: JoinGroupRequest, now: int, token: int) -> Result[JoinGroupResponse | None]:
        return self._noting_membership(classic_handlers.join_group(self, request, now, token), request.group_id, now)

    def classic_group_sync(self, request: SyncGroupRequest, now: int, token: int) -> Result[SyncGroupResponse | None]:
        return self._noting_membership(classic_handlers.sync_group(self, request, now, token), request.group_id, now)

    def classic_group_heartbeat(self, request: HeartbeatRequest, now: int) -> Result[HeartbeatResponse]:
        return self._noting_membership(classic_handlers.heartbeat(self, request, now), request.group_id, now)

    def classic_group_leave(self, request: LeaveGroupRequest, now: int) -> Result[LeaveGroupResponse]:
        return self._noting_membership(classic_handlers.leave_group(self, request, now), request.group_id, now)


def _is_empty_classic(group: Any) -> bool:
    if getattr(group, "group_type", "classic") != "classic":
        return False  # a share group is never converted (Kafka: one type per group id)
    is_empty = getattr(group, "is_empty", None)
    return bool(is_empty()) if callable(is_empty) else False


def _is_full_request(r: ConsumerGroupHeartbeatRequest) -> bool:
    return (r.rebalance_timeout_ms is not None
            and (r.subscribed_topic_names is not None or r.subscribed_topic_regex is not None)
            and r.topic_partitions is not None)


def _member_metadata_record(group_id: str, m: ConsumerGroupMember) -> ConsumerGroupMemberMetadata:
    return ConsumerGroupMemberMetadata(
        group_id, m.member_id, m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names,
        m.subscribed_topic_regex, m.server_assignor, m.rebalance_timeout_ms, m.principal)


def _current_assignment_record(group_id: str, m: ConsumerGroupMember) -> ConsumerGroupCurrentMemberAssignment:
    return ConsumerGroupCurrentMemberAssignment(
        group_id, m.member_id, m.member_epoch, m.previous_member_epoch, m.state.value, m.assigned_partitions,
        m.partitions_pending_revocation)

