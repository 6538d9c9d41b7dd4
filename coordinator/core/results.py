"""What a core operation returns: a response plus the records to persist and the timers to (re)arm.

A handler changes nothing: the runtime applies what it returns (`GroupCoordinatorShard.apply` replays `records`
and `memory`), appends `records` to the log before it sends `response`, arms/cancels `timers`, and submits
`tasks` (offloaded assignor runs) to the background executor. Nothing in here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

R = TypeVar("R")

TimerKey = tuple[str, ...]  # e.g. ("session", group_id, member_id)


@dataclass(frozen=True, slots=True)
class ScheduleTimer:
    """Arm (or re-arm, replacing any earlier deadline) the timer `key` to fire at `deadline_ms`."""

    key: TimerKey
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: TimerKey


TimerOp = ScheduleTimer | CancelTimer


@dataclass(slots=True)
class Result(Generic[R]):
    """What an operation returns; the handler that built it changed nothing (the shard's `apply` does).

    `parked=True`: no response yet; the request (identified by the token the runtime passed in) is answered
    later through another operation's `completions` (the classic protocol parks JoinGroup/SyncGroup)."""

    response: R
    records: list[Any] = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)
    tasks: list[Any] = field(default_factory=list)
    completions: list[tuple[int, Any]] = field(default_factory=list)  # (token of a parked request, response)
    parked: bool = False
    # An operation that only brings memory in line with the log (a state partition's load replays what the
    # log holds; a drop forgets groups another instance now serves): the runtime appends nothing and mirrors
    # what it replayed into its committed image (runtime/committed_image.py).
    from_log: bool = False
    # Volatile effects no log keeps (an in-flight run, a classic group's membership between two stable states),
    # applied by `GroupCoordinatorShard.apply` after `records`, through the same replayer registry.
    memory: list[Any] = field(default_factory=list)
    # An operation on a group that tracks when it became empty (retention.py) says whether the group has
    # members once its records are applied (None: it does not track it, or the operation left it alone), since
    # the state its handler reads is the state before.
    empty_after: bool | None = None
