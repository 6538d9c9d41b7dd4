"""What a classic-group transition asks of the shard (`Effects`), and the keys of the timers it arms.

Timers are data: a transition schedules or cancels them by key through the shard's `arm_timer`/`cancel_timer`,
as every group type does, so the shard's one stale check knows their deadlines; the group keeps each deadline
too, for the timers it has armed (`answers.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from groupcoord.coordinator.core.results import TimerKey

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
    """What a transition asks of the shard: records (written = replayed at once and appended), timers armed
    (`schedule`) and cancelled (`cancel`), and answers to parked requests (`(token, response)`, see
    `Result.completions`)."""

    now: int
    write: Callable[[Any], None]
    schedule: Callable[[TimerKey, int], None]
    cancel: Callable[[TimerKey], None]
    completions: list[tuple[int, Any]]
    initial_rebalance_delay_ms: int = 0

    def answer(self, token: int, response: Any) -> None:
        self.completions.append((token, response))
