"""What a classic-group transition asks of the shard (`Effects`), the keys of the timers it arms, and the
volatile effects a pure classic operation returns.

Timers are data: a transition schedules or cancels them by key through the shard's `arm_timer`/`cancel_timer`,
as every group type does, so the shard's one stale check knows their deadlines; the group keeps each deadline
too, for the timers it has armed (`answers.py`).

A classic group keeps most of its state in memory between two stable points (who has rejoined, the parked
requests' tokens, the leader and protocol type of the join phase in progress, the deadlines) and writes a
`ClassicGroupMetadata` record only at those points, as Kafka does. A handler mutates nothing (issue 26): it runs
the transition on a private copy of the group (`ClassicGroupMembership.copy`), whose `Effects.write` adds each
record to the result and replays it into that copy, and returns the copy as one volatile effect,
`ClassicGroupReplaced`, which `GroupCoordinatorShard.apply` installs after replaying the records (the shard's
group takes over the copy's fields, so the records and the group's state agree by construction). A heartbeat,
which only moves a member's session deadline, returns `ClassicSessionRearmed` instead of copying the group.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core.results import TimerKey

if TYPE_CHECKING:
    from groupcoord.coordinator.core.classic.membership import ClassicGroupMembership

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
    """What a transition asks of the shard: records (written = added to the result and replayed into the private
    copy of the group the transition runs on), timers armed (`schedule`) and cancelled (`cancel`), and answers to
    parked requests (`(token, response)`, see `Result.completions`)."""

    now: int
    write: Callable[[Any], None]
    schedule: Callable[[TimerKey, int], None]
    cancel: Callable[[TimerKey], None]
    completions: list[tuple[int, Any]]
    initial_rebalance_delay_ms: int = 0

    def answer(self, token: int, response: Any) -> None:
        self.completions.append((token, response))


@dataclass(frozen=True, slots=True)
class ClassicGroupReplaced:
    """Volatile effect: `group` (a pure operation's private copy, with its records already replayed into it)
    replaces the state of the classic group `group_id` (which takes over its fields, `take_over`), after the
    operation's records were replayed."""

    group_id: str
    group: ClassicGroupMembership


@dataclass(frozen=True, slots=True)
class ClassicSessionRearmed:
    """Volatile effect: a heartbeat moved `member_id`'s session deadline (the group keeps it, `answers.py`)."""

    group_id: str
    member_id: str
    deadline_ms: int
