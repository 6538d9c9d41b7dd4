"""The modern-group base (Kafka's `ModernGroup`): what consumer, share and streams groups keep alike, in one copy.

- the epochs every modern group counts by (KIP-848), and KIP-1263's epoch 1 for the empty assignment;
- `ModernGroup`: the group epoch, the target assignment's epoch and finish time, and the offloaded run in flight;
- KIP-1263's rules for *when* a target is computed (`may_compute_target`: never while a run is in flight, never
  within the assignment interval of the last one), how a run is offloaded (`offload`) and how its completion is
  taken (`take_completion`: stale and failed runs are dropped), counted in one place for every type.

Each type adds only its own: what a member is, how a spec is built and a result applied, reconciliation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.group import GroupDefaults
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.stats import CoreStats

EMPTY_ASSIGNMENT_EPOCH = 1  # KIP-1263: epoch 1 is reserved for the empty target assignment
FIRST_GROUP_EPOCH = 2  # so a group's first real target is never mistaken for the empty one
LEAVE_GROUP_MEMBER_EPOCH = -1  # a member epoch that asks to leave


@dataclass(slots=True)
class InflightRun:
    """An offloaded assignor run (not persisted: after a failover the next heartbeat runs it again)."""

    run_id: int
    assignment_epoch: int
    instance_ids: Mapping[str, str] = field(default_factory=dict)  # member id -> instance id when it started
    assignor_name: str = ""


@dataclass(frozen=True, slots=True)
class RunStarted:
    """A volatile effect (`Result.memory`): `group_id`'s offloaded run `run` is now in flight."""

    group_id: str
    run: InflightRun


@dataclass(frozen=True, slots=True)
class RunEnded:
    """A volatile effect: `group_id`'s in-flight run `run_id` ended (completed, failed or superseded)."""

    group_id: str
    run_id: int


def run_effect_replayers(groups: Mapping[str, Any]) -> dict[type, Callable[[Any], None]]:
    """How `RunStarted` and `RunEnded` are applied, for every modern type's groups in `groups`."""
    def started(e: RunStarted) -> None:
        group = groups.get(e.group_id)
        if group is not None:
            group.inflight = e.run

    def ended(e: RunEnded) -> None:
        group = groups.get(e.group_id)
        if group is not None and group.inflight is not None and group.inflight.run_id == e.run_id:
            group.inflight = None

    return {RunStarted: started, RunEnded: ended}


@dataclass(slots=True, eq=False)  # each type decides what equality means (share groups: identity)
class ModernGroup(GroupDefaults):
    """The state every modern group type keeps beside its members (consumer, share and streams groups)."""

    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    target_assignment_epoch: int = 0  # 0: nothing computed yet (the empty assignment at epoch 1 applies)
    assignment_timestamp_ms: int = 0  # KIP-1263: when the last computation finished; 0 = unknown
    inflight: InflightRun | None = None
    deleted: bool = False
    metadata_image_seen: object = None  # the metadata image the metadata hash was last checked against

    @property
    def effective_target_epoch(self) -> int:
        return max(self.target_assignment_epoch, EMPTY_ASSIGNMENT_EPOCH)


@dataclass(frozen=True, slots=True)
class MemberTombstones:
    """One type's records that delete a member, by (group id, member id): Kafka's ModernGroup removal writes
    the current assignment's, the target member's (when it has one) and the member metadata's, in that order."""

    current_assignment: Callable[[str, str], Any]
    target_member: Callable[[str, str], Any]
    member_metadata: Callable[[str, str], Any]

    def remove(self, write: Callable[[Any], None], group_id: str, member_id: str, in_target: bool) -> None:
        write(self.current_assignment(group_id, member_id))
        if in_target:
            write(self.target_member(group_id, member_id))
        write(self.member_metadata(group_id, member_id))


def check_member_epoch(requested: int, current: int, previous: int, tolerated: Callable[[], bool]) -> bool:
    """Kafka's member-epoch fencing, alike for consumer, share and streams groups: an epoch newer than the
    member's, or older and not its previous one (or the previous one with `tolerated()` false: it owns what it
    no longer has), is FENCED_MEMBER_EPOCH. True when the client missed the last response (tolerated)."""
    if requested == current:
        return False
    if requested > current:
        raise CoordinatorError(Errors.FENCED_MEMBER_EPOCH, f"Member epoch {requested} is newer than the "
                                                           f"coordinator's {current}; rejoin with epoch 0.")
    if requested == previous and tolerated():
        return True
    raise CoordinatorError(Errors.FENCED_MEMBER_EPOCH,
                           f"Member epoch {requested} is stale (current {current}); rejoin with epoch 0.")


def may_compute_target(inflight: InflightRun | None, last_finished_ms: int | None, now: int, interval_ms: int,
                       stats: CoreStats) -> bool:
    """KIP-1263: no new target while a run is in flight, nor within `interval_ms` of the last computation's end
    (`last_finished_ms` None: none known, e.g. after a load); the changes it waits for are batched into the next."""
    if inflight is not None:
        stats.assignor_skipped_inflight += 1
        return False
    if last_finished_ms is not None and now - last_finished_ms < interval_ms:
        stats.assignor_skipped_interval += 1
        return False
    return True


def offload(run_ids: Iterator[int], epoch: int, stats: CoreStats, instance_ids: Mapping[str, str] | None = None,
            assignor_name: str = "") -> InflightRun:
    """Start an offloaded run at `epoch`: the caller keeps it as its group's in-flight run and hands the task to
    the runtime's executor."""
    stats.assignor_runs_offloaded += 1
    return InflightRun(next(run_ids), epoch, instance_ids or {}, assignor_name)


class Completion(Protocol):
    """What comes back from any type's offloaded run."""

    @property
    def run_id(self) -> int: ...

    @property
    def assignment(self) -> Any: ...


class RunsAssignor(Protocol):
    """A group that offloads its assignor runs: consumer, share and streams groups."""

    group_id: str
    inflight: InflightRun | None


def take_completion(group: RunsAssignor | None, completion: Completion, stats: CoreStats,
                    result: Result[Any]) -> InflightRun | None:
    """The run `completion` ends, if it is still `group`'s in-flight one and it succeeded, else None: a stale run
    (its group gone, or superseded) is discarded; a failed one ends the run and keeps the old target. Ending the
    run is a volatile effect in `result` (`RunEnded`): the group is not touched."""
    if group is None or group.inflight is None or group.inflight.run_id != completion.run_id:
        stats.assignor_results_discarded += 1
        return None
    run = group.inflight
    result.memory.append(RunEnded(group.group_id, run.run_id))
    if completion.assignment is None:
        stats.assignor_failures += 1
        return None
    return run


def discarded(stats: CoreStats) -> Result[None]:
    """The answer to a completion nobody takes (its group is gone, or of a type that offloads nothing)."""
    stats.assignor_results_discarded += 1
    return Result(None)
