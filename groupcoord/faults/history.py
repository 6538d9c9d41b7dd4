"""The history's vocabulary: what members and the harness observed (`Event`), and what the checker found.

Pure data, shared by the checkers (`checker.py`, `checker_share.py`) and the harness that records events.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum


class Kind(StrEnum):
    ASSIGNED = "assigned"
    REVOKED = "revoked"
    LOST = "lost"
    COMMIT = "commit"  # attempted commit: `partitions` tried, `offsets` acknowledged, `t_sent`..`t`
    DIED = "died"
    STOPPED = "stopped"
    RESUMED = "resumed"
    STATE_WIPED = "state_wiped"
    OFFSETS_FETCHED = "offsets_fetched"  # `offsets`: committed per partition (-1: none); `t`: before sending
    NOT_CONVERGED = "not_converged"
    # share members: `ranges` (partition, first, last); ACQUIRED: `until` the client's own deadline (lock or
    # lease, whichever ends first); ACK_SENT: an acknowledgement about to be sent (`t`), whatever comes of it;
    # ACKED: the ranges acknowledged without error, `detail` the type (accept, release)
    ACQUIRED = "acquired"
    ACK_SENT = "ack_sent"
    ACKED = "acked"
    SHARE_OFFSETS = "share_offsets"  # the harness's DescribeShareGroupOffsets: `ranges` (p, start, end)
    # the Kafka-backed suite: PROBE, a change of a group's answer (`member`: the group's member kind; `detail`:
    # "ok HOST:PORT" or "error CODE"); NEMESIS, a fault acting on an instance (`detail`: "KIND HOST:PORT")
    PROBE = "probe"
    NEMESIS = "nemesis"


@dataclass(frozen=True, slots=True)
class Event:
    t: float
    kind: Kind
    member: str = ""
    partitions: tuple[int, ...] = ()
    offsets: tuple[tuple[int, int], ...] = ()
    t_sent: float = 0.0
    detail: str = ""
    role: str = "consumer"  # consumer | share | streams: which kind of member (or check) the event is about
    ranges: tuple[tuple[int, int, int], ...] = ()
    until: float = 0.0


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str  # double_ownership, lost_commit, not_converged
    t: float
    detail: str


@dataclass(slots=True)
class Findings:
    violations: list[Violation] = field(default_factory=list)
    lost_by_design: int = 0
    acknowledged_commits: int = 0
    ownership_intervals: int = 0
    task_intervals: int = 0  # streams
    records_acquired: int = 0  # share: offsets, counted once per acquisition
    records_accepted: int = 0  # share: offsets acknowledged ACCEPT without error
    share_lost_by_design: int = 0  # share: accepted offsets a stateless restart forgot

    def by_kind(self) -> Counter[str]:
        return Counter(v.kind for v in self.violations)
