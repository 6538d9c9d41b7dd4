"""The group coordinator shard: every group operation, as a deterministic function of (state, request, now).

Each handler is pure, as Kafka's GroupMetadataManager's: it validates its request, reads the state, and returns a
`Result` (the response, the records the runtime must persist before answering, volatile effects no log keeps,
timers to arm or cancel, and assignor runs to offload), changing nothing. What it reads after its own writes it
computes from local values (the updated member, a group's staged view: consumer/staged.py, streams/working.py,
a classic group's private copy). `apply` then replays the records and effects, the only way an operation changes
state, so replaying the log rebuilds the same state. The runtime calls `apply` after the handler, under a
journal (`applied` and `touched` below): when the handler or the apply raises, or the append fails, the groups
it touched are put back from the committed image (docs/operations/durability.md, "The operation model").
The shard never reads a clock, opens a socket or starts a thread: `now` is a parameter, member ids come
from an injected factory, and lag comes from an injected non-blocking provider.

The shard routes; the group types decide. Each type's package (consumer/, classic/, mixed/, share/, streams/)
returns its records' replayers, its timer kinds' handlers and its offloaded runs' completion handlers
(`GroupTypeHooks`), read once by the constructor, and answers the generic paths (admin, offsets, retention,
snapshots) through the `Group` protocol (`group.py`). The types import none of each other (pyproject.toml's
import contracts); what crosses types (classic requests to mixed groups, online upgrade and downgrade) is
routed from above them, through the shard. What stays here is what every type shares: the replay
and timer registries, timer deadlines, group configs, offsets, and one entry point per operation.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from groupcoord.coordinator.core import admin, offsets, retention, retention_check
from groupcoord.coordinator.core.classic import handlers as classic_handlers
from groupcoord.coordinator.core.classic import messages as cm
from groupcoord.coordinator.core.config import BrokerConfig, ModernGroupConfigs, group_override
from groupcoord.coordinator.core.consumer import assignment as consumer_assignment
from groupcoord.coordinator.core.consumer import heartbeat as consumer_heartbeat
from groupcoord.coordinator.core.consumer import regex_subscriptions as regex_subscriptions
from groupcoord.coordinator.core.consumer import replay as consumer_shard
from groupcoord.coordinator.core.consumer.assignment import LAG_AWARE_ASSIGNORS as LAG_AWARE_ASSIGNORS
from groupcoord.coordinator.core.consumer.group import ConsumerGroup
from groupcoord.coordinator.core.consumer.group import rebalance_timer as rebalance_timer
from groupcoord.coordinator.core.consumer.group import session_timer as session_timer
from groupcoord.coordinator.core.consumer.staged import Staged
from groupcoord.coordinator.core.consumer.topic_regex import RegexResolutionCompletion
from groupcoord.coordinator.core.group import STREAMS, Group, GroupView
from groupcoord.coordinator.core.messages import (
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
from groupcoord.coordinator.core.metadata import EMPTY_IMAGE, MetadataImage
from groupcoord.coordinator.core.mixed import classic_requests
from groupcoord.coordinator.core.mixed import conversion as group_conversion
from groupcoord.coordinator.core.mixed import group as mixed_group
from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion
from groupcoord.coordinator.core.modern.group import discarded, run_effect_replayers
from groupcoord.coordinator.core.offsets import OffsetStore
from groupcoord.coordinator.core.records import (
    ConsumerGroupMetadata,
    GroupConfig,
    GroupEmptySince,
    GroupEmptySinceTombstone,
    OffsetCommit,
    OffsetCommitTombstone,
)
from groupcoord.coordinator.core.results import CancelTimer, Result, ScheduleTimer, TimerKey, TimerOp
from groupcoord.coordinator.core.share import handlers as share_handlers
from groupcoord.coordinator.core.stats import CoreStats
from groupcoord.coordinator.core.streams import handlers as streams_shard
from groupcoord.coordinator.core.streams.group import StreamsGroups
from groupcoord.coordinator.core.streams.messages import StreamsAssignorCompletion

R = TypeVar("R", bound=Result[Any])


class LagProvider(Protocol):
    """Non-blocking: returns the last known (log start, end) offsets per (topic name, partition)."""

    def offsets(self, topic_partitions: list[tuple[str, int]]) -> Mapping[tuple[str, int], tuple[int, int]]: ...


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
        self.groups: dict[str, Group] = {}  # consumer, classic and share groups (group.py)
        self.offsets = OffsetStore()
        self.group_configs: dict[str, dict[str, Any]] = {}
        self.consumer_configs = ModernGroupConfigs(self, "consumer")
        self.stats = CoreStats()
        self._run_ids = itertools.count(1)
        self.rebalance_timer_epochs: dict[tuple[str, str], int] = {}
        # The deadline each consumer-group timer is armed for. The runtime pops a due timer and queues its
        # operation; a heartbeat queued before it may re-arm the timer meanwhile, so the operation checks
        # this deadline when it runs, as Kafka's timer callbacks check the member's current deadline.
        self.timer_deadlines: dict[TimerKey, int] = {}
        self.empty_since: dict[str, int] = {}  # group id -> when it last became empty (GroupEmptySince records)
        self.retention_pending: list[str] = []  # groups the running retention check has still to visit
        # The running operation's journal, kept while the runtime runs one (None otherwise): the records `apply`
        # replayed and the groups its volatile effects changed. When the apply raises half-way or the log refuses
        # the records, the runtime puts exactly these groups back to the committed state
        # (runtime/committed_image.py), so a failed operation applies nothing.
        self.applied: list[Any] | None = None
        self.touched: set[str] = set()
        self._replayers: dict[type, Callable[[Any], None]] = {
            OffsetCommit: self.offsets.replay_commit,
            OffsetCommitTombstone: self.offsets.replay_tombstone,
            GroupConfig: self._replay_group_config,
            GroupEmptySince: self._replay_empty_since,
            GroupEmptySinceTombstone: self._replay_empty_since_tombstone,
            retention.RetentionPending: self._replay_retention_pending,
        }
        self._replayers.update(run_effect_replayers(self.groups))  # volatile effects every modern type shares
        self._timer_handlers: dict[str, Callable[[TimerKey, int], Result[None]]] = {}
        self._assignment_handlers: dict[str, Callable[[Any, int], Result[None]]] = {}
        self.share_configs = share_handlers.ShareConfigs(self)
        self.streams: StreamsGroups = streams_shard.new_groups(self)  # their operations; the groups are in `groups`
        for hooks in (consumer_shard.hooks(self), classic_handlers.hooks(self), mixed_group.hooks(self),
                      share_handlers.hooks(self), streams_shard.hooks(self)):
            self._replayers.update(hooks.replayers)
            self._timer_handlers.update(hooks.timers)
            self._assignment_handlers.update(hooks.completions)

    # =====================================================================================================
    # Records
    # =====================================================================================================
    def replay(self, record: Any) -> None:
        """The only way state changes (loads, operations, rollbacks and partition moves all come here)."""
        self._replayers[type(record)](record)
        if self.applied is not None:
            self.applied.append(record)

    def touch(self, group_id: str) -> None:
        """Note a change to `group_id` that no record carries (a volatile effect): if the running operation fails,
        that group is put back too."""
        if self.applied is not None:
            self.touched.add(group_id)

    def apply(self, result: Result[Any]) -> None:
        """Apply what an operation returned, the only way an operation changes state: its records through `replay`,
        then its volatile effects (`Result.memory`), then its timers' deadlines. The runtime calls this once the
        handler has returned (tests' drivers too). A load's or a drop's result (`from_log`) was replayed by the
        runtime itself and is left alone."""
        if result.from_log:
            return
        for record in result.records:
            self.replay(record)
        replayers = self._replayers
        for effect in result.memory:
            replayers[type(effect)](effect)
            group_id = getattr(effect, "group_id", None)
            if group_id is not None:
                self.touch(group_id)
        self.note_timers(result.timers)

    def _write(self, result: Result[Any], record: Any) -> None:
        """Add `record` to the operation's result (`apply` replays it once the handler has returned)."""
        if type(record) is ConsumerGroupMetadata:
            self.stats.rebalances += 1
        result.records.append(record)

    def _replay_empty_since(self, r: GroupEmptySince) -> None:
        self.empty_since[r.group_id] = r.timestamp_ms

    def _replay_empty_since_tombstone(self, r: GroupEmptySinceTombstone) -> None:
        self.empty_since.pop(r.group_id, None)

    def _replay_retention_pending(self, e: retention.RetentionPending) -> None:
        self.retention_pending = list(e.group_ids)

    def _replay_group_config(self, r: GroupConfig) -> None:
        if r.configs:
            self.group_configs[r.group_id] = dict(r.configs)
        else:
            self.group_configs.pop(r.group_id, None)

    def holds_streams_group(self, group_id: str) -> bool:
        """True when a streams group (even an empty one) holds `group_id`: no other group type may take it."""
        group = self.groups.get(group_id)
        return group is not None and group.group_type == STREAMS

    def upgrade_classic_group(self, classic: GroupView, request: ConsumerGroupHeartbeatRequest, result: Result[Any],
                              now: int) -> Staged:
        """Kafka's online upgrade, for a consumer-protocol member joining a non-empty classic group: the conversion
        sits above both types (`mixed/conversion.py`), so the consumer heartbeat reaches it through the shard.
        Returns the consumer group as the conversion's records (in `result`) will leave it."""
        return group_conversion.upgrade(self, classic, request, result, now)

    def maybe_downgrade(self, group: ConsumerGroup, leaving_member_id: str, result: Result[Any], now: int) -> bool:
        """Kafka's online downgrade when the last consumer-protocol member leaves a mixed group: True when the group
        became classic without `leaving_member_id` (`mixed/conversion.py`)."""
        return group_conversion.maybe_downgrade(self, group, leaving_member_id, result, now)

    # =====================================================================================================
    # Configs
    # =====================================================================================================
    def group_config(self, group_id: str, name: str) -> Any:
        """The group's override of `name`, or its schema default (None = not set)."""
        return group_override(self.group_configs, group_id, name)

    def session_timeout_ms(self, group_id: str) -> int:
        return self.consumer_configs.session_timeout_ms(group_id)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.consumer_configs.heartbeat_interval_ms(group_id)

    def assignment_interval_ms(self, group_id: str) -> int:
        return self.consumer_configs.assignment_interval_ms(group_id)

    def offload_enabled(self, group_id: str) -> bool:
        return self.consumer_configs.offload_enabled(group_id)

    # =====================================================================================================
    # Consumer groups (rules in consumer/heartbeat.py, consumer/assignment.py, consumer/regex_subscriptions.py)
    # =====================================================================================================
    def consumer_group_heartbeat(self, request: ConsumerGroupHeartbeatRequest,
                                 now: int) -> Result[ConsumerGroupHeartbeatResponse]:
        return consumer_heartbeat.heartbeat(self, request, now)

    def consumer_group_steady_heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                                        principal: str | None,
                                        now: int) -> tuple[tuple[int, int], TimerKey, int] | None:
        """A steady heartbeat's (heartbeat interval, session timeout) and session timer re-arm (key, deadline), or
        None: run `consumer_group_heartbeat` (consumer/heartbeat.py, `steady`). Changes nothing: the caller re-arms
        the timer and notes its deadline (`note_deadline`), as `apply` notes an operation's."""
        return consumer_heartbeat.steady(self, group_id, member_id, member_epoch, principal, now)

    def on_metadata_update(self, image: MetadataImage, now: int) -> Result[None]:
        """New topic metadata: consumer groups whose subscribed topics changed bump their epoch (share and
        streams groups compare the image at their next heartbeat)."""
        self.metadata = image
        result: Result[None] = Result(None)
        consumer_assignment.on_metadata_update(self, now, result)
        return result

    def on_regex_resolution_complete(self, completion: RegexResolutionCompletion, now: int) -> Result[None]:
        return regex_subscriptions.on_resolution_complete(self, completion, now)

    def on_assignment_complete(self, completion: AssignorCompletion | StreamsAssignorCompletion,
                               now: int) -> Result[None]:
        """An offloaded run finished, of any modern type: the group's type applies it (unless stale); a run for
        a group that is gone or of a type that offloads nothing is discarded."""
        group = self.groups.get(completion.group_id)
        handler = self._assignment_handlers.get(group.group_type) if group is not None else None
        if handler is None:
            return discarded(self.stats)
        return handler(completion, now)

    # --- timers ------------------------------------------------------------------------------------------
    @staticmethod
    def arm_timer(result: Result[Any], key: TimerKey, deadline_ms: int) -> None:
        result.timers.append(ScheduleTimer(key, deadline_ms))  # its deadline is noted by `apply`

    @staticmethod
    def cancel_timer(result: Result[Any], key: TimerKey) -> None:
        result.timers.append(CancelTimer(key))

    def note_deadline(self, key: TimerKey, deadline_ms: int) -> None:
        """Note the deadline of a timer the runtime re-armed for an operation that returned no `Result` (a steady
        heartbeat, `consumer_group_steady_heartbeat`)."""
        self.timer_deadlines[key] = deadline_ms

    def note_timers(self, timers: list[TimerOp]) -> None:
        """Keep the deadline of every timer a result arms or cancels, of every group type, so that the one
        stale check in `on_timer` knows them (`apply`, and the runtime's loads)."""
        deadlines = self.timer_deadlines
        for t in timers:
            if type(t) is ScheduleTimer:
                deadlines[t.key] = t.deadline_ms
            else:
                deadlines.pop(t.key, None)

    def on_timer(self, key: TimerKey, now: int) -> Result[None]:
        """A timer the runtime armed has fired. One stale check for every kind, as Kafka's timer callbacks check
        the current deadline: a timer whose operation was queued before a heartbeat re-armed it or a removal
        cancelled it does nothing. Then the retention check expires offsets; every other kind belongs to a
        group type (registered by its install), and then the group may have become empty."""
        deadline = self.timer_deadlines.get(key)
        if deadline is None or now < deadline:
            return Result(None)
        if key == retention.RETENTION_TIMER:
            return self._fired(key, retention_check.on_retention_timer(self, now))
        handler = self._timer_handlers.get(key[0])
        if handler is None:
            return self._fired(key, Result(None))
        result = self._fired(key, handler(key, now))
        if len(key) > 1:
            retention.note_membership(self, key[1], now, result)
        return result

    @staticmethod
    def _fired(key: TimerKey, result: R) -> R:
        """The fired timer's deadline goes when the result is applied, before the timers it arms (which may re-arm
        the same key)."""
        result.timers.insert(0, CancelTimer(key))
        return result

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
    # Classic protocol (rules in classic/group.py / classic/handlers.py)
    # =====================================================================================================
    def classic_group_join(self, request: cm.JoinGroupRequest, now: int,
                           token: int) -> Result[cm.JoinGroupResponse | None]:
        return self._noting_membership(classic_requests.join(self, request, now, token), request.group_id, now)

    def classic_group_sync(self, request: cm.SyncGroupRequest, now: int,
                           token: int) -> Result[cm.SyncGroupResponse | None]:
        return self._noting_membership(classic_requests.sync(self, request, now, token), request.group_id, now)

    def classic_group_heartbeat(self, request: cm.HeartbeatRequest, now: int) -> Result[cm.HeartbeatResponse]:
        return self._noting_membership(classic_requests.heartbeat(self, request, now), request.group_id, now)

    def classic_group_leave(self, request: cm.LeaveGroupRequest, now: int) -> Result[cm.LeaveGroupResponse]:
        return self._noting_membership(classic_requests.leave(self, request, now), request.group_id, now)
