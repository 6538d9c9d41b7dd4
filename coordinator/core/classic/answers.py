"""What the shard's generic paths ask of a classic group: the `Group` protocol (`core/group.py`).

Offsets (commit validation, OffsetDelete), admin (describe, list, delete), snapshots, and loads: a group
replayed after a failover stays in Initialize until `timers_after_load` moves it to its persisted phase and
arms the timers that phase needs (timers are not state).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from groupcoord.coordinator.core.classic.effects import Effects, join_timer, session_timer, sync_timer
from groupcoord.coordinator.core.classic.membership import ClassicGroupMembership
from groupcoord.coordinator.core.classic.records import GROUP_TYPE, ClassicGroupMetadataTombstone, ClassicGroupState
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.messages import DescribedGroup, DescribedMember, ListedGroup
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.core.results import CancelTimer, ScheduleTimer, TimerOp


class ClassicGroupAnswers(ClassicGroupMembership):
    """The `Group` protocol's methods; they change nothing but the load's Initialize -> persisted phase."""

    __slots__ = ()

    # --- loading -----------------------------------------------------------------------------------------------
    def timers_after_load(self, now: int) -> list[TimerOp]:
        """Loading is over: leave Initialize for the persisted phase and arm what the seed arms on entering it
        (every member's session; in AwaitingSync, every member must sync again within the rebalance timeout).
        For a group that is not loading, the timers it has armed (nothing changes)."""
        if self.state is not ClassicGroupState.INITIALIZE:
            return self._armed_timers()
        self.state = self.loaded_state
        timers: list[TimerOp] = []
        fx = Effects(now, _no_writes, lambda key, deadline: timers.append(ScheduleTimer(key, deadline)),
                     lambda key: timers.append(CancelTimer(key)), [])
        for member_id in self.members:
            self._rearm_session(member_id, fx)
        if self.state is ClassicGroupState.AWAITING_SYNC:
            self.pending_sync = set(self.members)
            self.sync_deadline = now + self.rebalance_timeout_ms()
            fx.schedule(sync_timer(self.group_id), self.sync_deadline)
        return timers

    def _armed_timers(self) -> list[TimerOp]:
        """The timers a live group has armed, at their deadlines (what `drop_groups` cancels)."""
        ops: list[TimerOp] = [ScheduleTimer(session_timer(self.group_id, member_id), deadline)
                              for member_id, deadline in self.session_deadlines.items()]
        if self.join_deadline is not None:
            ops.append(ScheduleTimer(join_timer(self.group_id), self.join_deadline))
        if self.sync_deadline is not None:
            ops.append(ScheduleTimer(sync_timer(self.group_id), self.sync_deadline))
        return ops

    # --- what offsets.py, admin.py, snapshot.py and the runtime ask of a group ---------------------------------
    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation: int,
                               partitions: list[tuple[str, int]],
                               image: MetadataImage) -> dict[tuple[str, int], Errors]:
        """Kafka's ClassicGroup.validateOffsetCommit: the committer must be a member of the current generation;
        during Joining the old generation may still commit (the seed: its chance to clean up), during
        AwaitingSync nobody may. Generation -1 without a member id is a commit from outside the group, accepted
        only while it has no members."""
        if self.state is ClassicGroupState.INITIALIZE:
            raise CoordinatorError(Errors.COORDINATOR_LOAD_IN_PROGRESS, f"Group {self.group_id} is loading; retry.")
        if generation < 0 and self.state is ClassicGroupState.DOWN:
            return {}
        if generation >= 0 or member_id or instance_id is not None:
            self.validate_member(member_id, instance_id)
            if generation != self.generation:
                raise CoordinatorError(Errors.ILLEGAL_GENERATION,
                                       f"Generation {generation} is not group {self.group_id}'s current generation "
                                       f"{self.generation}; rejoin.")
        elif self.state is not ClassicGroupState.DOWN:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID,
                                   f"Group {self.group_id} has members; commits from outside it are rejected.")
        if self.state is ClassicGroupState.AWAITING_SYNC:
            raise CoordinatorError(Errors.REBALANCE_IN_PROGRESS,
                                   f"Group {self.group_id} is completing a rebalance; commit after SyncGroup.")
        return {}

    def validate_offset_delete(self) -> None:
        """Kafka: a classic group with members that does not use the consumer protocol type keeps its offsets."""
        if self.members and self.protocol_type != "consumer":
            raise CoordinatorError(Errors.NON_EMPTY_GROUP, f"Group {self.group_id} has members and does not use "
                                                           "the consumer protocol type; its offsets cannot be deleted.")

    def describe(self) -> DescribedGroup:
        name = self.protocol_name
        members = [
            DescribedMember(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=None, member_epoch=self.generation,
                state="", subscribed_topic_names=(), subscribed_topic_regex=None, assignment={},
                target_assignment={}, partitions_pending_revocation={}, client_id=m.client_id,
                client_host=m.client_host, member_metadata=m.metadata(name), member_assignment=m.assignment)
            for m in sorted(self.members.values(), key=lambda m: m.member_id)
        ]
        return DescribedGroup(group_id=self.group_id, group_type=GROUP_TYPE, group_state=self.state.value,
                              group_epoch=self.generation, assignor_name=name or "",
                              protocol_type=self.protocol_type or "", members=members)

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, self.protocol_type or "", self.state.value, GROUP_TYPE)

    def deletion_records(self) -> list[Any]:
        return [ClassicGroupMetadataTombstone(self.group_id)]

    def snapshot_records(self) -> Iterator[Any]:
        if self.persisted is not None:
            yield self.persisted


def _no_writes(record: Any) -> None:
    raise AssertionError(f"no record may be written while loading completes: {record!r}")
