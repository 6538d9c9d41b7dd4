"""What a classic-group transition asks of the shard (`Effects`), and the keys of the timers it arms.

Timers are data: a transition schedules or cancels them by key, and the group keeps each deadline too, so a
timer that fires after it was re-armed or cancelled is recognised as stale (`group.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from groupcoord.coordinator.core.results import CancelTimer, ScheduleTimer, TimerKey, TimerOp

SESSION_TIMER = "classic-session"
JOIN_TIMER = "classic-join"
SYNC_TIMER = "classic-sync"


def session_timer(group_id: str, member_id: str) -> TimerKey:
    return (SESSION_TIMER, group_id, member_id)


def join_timer(group_id: str) -> TimerKey:
    return (JOIN_TIMER, group_id)


def sync_timer(group_id: str) -> TimerKey:
    return (SYNC_TIMER, group_id)


@dataclass(slots=True)
class Effects:
    """What a transition asks of the shard: records (written = replayed at once and appended), timers, and
    answers to parked requests (`(token, response)`, see `Result.completions`)."""

    now: int
    write: Callable[[Any], None]
    timers: list[TimerOp]
    completions: list[tuple[int, Any]]
    initial_rebalance_delay_ms: int = 0

    def schedule(self, key: TimerKey, deadline_ms: int) -> None:
        self.timers.append(ScheduleTimer(key, deadline_ms))

    def cancel(self, key: TimerKey) -> None:
        self.timers.append(CancelTimer(key))

    def answer(self, token: int, response: Any) -> None:
        self.completions.append((token, response))
