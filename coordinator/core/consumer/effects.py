"""Consumer groups' volatile effects (`Result.memory`): the state a pure operation changes that no record carries.

A handler returns them; `GroupCoordinatorShard.apply` replays them after the operation's records, through the
replayers here (registered by `consumer/replay.py`'s hooks). Each names its group; one whose group is gone
by then (deleted or downgraded by the same operation) does nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core.consumer.group import ConsumerGroup, RegexResolutionInflight
from groupcoord.coordinator.core.consumer.target_store import TargetAssignment

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard


@dataclass(frozen=True, slots=True)
class ImageSeen:
    """The group's metadata hash was checked against `image` (`ModernGroup.metadata_image_seen`)."""

    group_id: str
    image: object


@dataclass(frozen=True, slots=True)
class SpecTaken:
    """A target computation snapshotted the group (`target_assignment.build_spec`): the assignor's view of the
    members as of the operation's records (`rows`, `subscriptions`, for `image`, snapshot `serial`), with no
    member changed since."""

    group_id: str
    rows: dict[str, Any]
    subscriptions: dict[frozenset[str], int]
    image: object
    serial: int


@dataclass(frozen=True, slots=True)
class TargetSnapshotTaken:
    """The spec was taken from `store`, a copy of the group's target with the operation's target records: the
    group's target keeps that snapshot once they apply (`TargetAssignment.adopt_snapshot`)."""

    group_id: str
    store: TargetAssignment


@dataclass(frozen=True, slots=True)
class RunBaseline:
    """A target computation started from the group as it is now: no member added or removed since
    (`ConsumerGroup.added_since_run`, `removed_since_run`)."""

    group_id: str


@dataclass(frozen=True, slots=True)
class AssignorUsed:
    """The group's target was last computed by `name` (`ConsumerGroup.last_assignor`)."""

    group_id: str
    name: str


@dataclass(frozen=True, slots=True)
class RegexRunStarted:
    """A background resolution of the group's regexes is in flight."""

    group_id: str
    run: RegexResolutionInflight


@dataclass(frozen=True, slots=True)
class RegexRunEnded:
    """The resolution `run_id` came back at `now`, having resolved against `image`."""

    group_id: str
    run_id: int
    image: object
    now: int


@dataclass(frozen=True, slots=True)
class RebalanceTimerEpoch:
    """The member epoch the member's rebalance timer is armed for (None: none armed), checked when it fires."""

    group_id: str
    member_id: str
    epoch: int | None


def replayers(shard: GroupCoordinatorShard) -> dict[type, Callable[[Any], None]]:
    groups = shard.groups

    def group_of(group_id: str) -> ConsumerGroup | None:
        group = groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def image_seen(e: ImageSeen) -> None:
        group = group_of(e.group_id)
        if group is not None:
            group.metadata_image_seen = e.image

    def spec_taken(e: SpecTaken) -> None:
        group = group_of(e.group_id)
        if group is not None:
            group.spec_rows, group.spec_subscriptions = e.rows, e.subscriptions
            group.spec_image, group.spec_serial, group.spec_dirty = e.image, e.serial, {}

    def snapshot_taken(e: TargetSnapshotTaken) -> None:
        group = group_of(e.group_id)
        if group is not None:
            group.target_assignment.adopt_snapshot(e.store)

    def run_baseline(e: RunBaseline) -> None:
        group = group_of(e.group_id)
        if group is not None:
            group.added_since_run, group.removed_since_run = {}, {}

    def assignor_used(e: AssignorUsed) -> None:
        group = group_of(e.group_id)
        if group is not None:
            group.last_assignor = e.name

    def regex_started(e: RegexRunStarted) -> None:
        group = group_of(e.group_id)
        if group is not None:
            group.regex_inflight = e.run

    def regex_ended(e: RegexRunEnded) -> None:
        group = group_of(e.group_id)
        if group is not None and group.regex_inflight is not None and group.regex_inflight.run_id == e.run_id:
            group.regex_image_seen = e.image
            group.regex_inflight = None
            group.regex_refreshed_ms = e.now

    def rebalance_epoch(e: RebalanceTimerEpoch) -> None:
        key = (e.group_id, e.member_id)
        if e.epoch is None:
            shard.rebalance_timer_epochs.pop(key, None)
        else:
            shard.rebalance_timer_epochs[key] = e.epoch

    return {ImageSeen: image_seen, SpecTaken: spec_taken, TargetSnapshotTaken: snapshot_taken,
            RunBaseline: run_baseline, AssignorUsed: assignor_used,
            RegexRunStarted: regex_started, RegexRunEnded: regex_ended, RebalanceTimerEpoch: rebalance_epoch}


def emit(shard: GroupCoordinatorShard, result: Any, effect: Any) -> None:
    """Add `effect` to the operation's result (`GroupCoordinatorShard.apply` applies it after the records)."""
    result.memory.append(effect)
