"""The checker: reads the history of what members observed and states the safety properties.

Why a separate, pure module: a checker is only believable if it is independent of the code under test. It
imports nothing of the coordinator or the client; it folds a list of events (each with a CLOCK_MONOTONIC
timestamp, system-wide on Linux, so events of different processes compare) into ownership intervals and
acknowledged commits, and reports violations. The unit tests drive it with synthetic histories.

Theory of operation
-------------------
*Ownership.* A member incarnation (one process) owns partition p from its ``on_assigned`` callback until
the earliest of its ``on_revoked`` callback (called before the revocation is acknowledged), its ``on_lost``
callback, and its death (kill -9). A process that is stopped (SIGSTOP) can do nothing: the stopped time is
cut out of its intervals. When it resumes, it may still believe it owns partitions the coordinator gave away
while it was stopped (its client-side lease has expired by then; it learns so at its next check). That tail,
from the resume until its next on_revoked/on_lost, counts as ownership only from the first commit the process
*attempted* on that partition in it: believing for a few milliseconds is harmless, acting is not.
Two incarnations owning a partition at overlapping times is a ``double_ownership`` violation.

*Durability.* Members commit offsets that are monotonic timestamps (microseconds), so a later commit always
carries a larger offset and the committed offset of a partition never legitimately decreases while ownership
is exclusive. Each ``offsets_fetched`` event (the harness's OffsetFetch, timestamped before it was sent)
must show, per partition, at least the highest offset acknowledged before it, counting only commits *sent*
after the latest restart without state (``state_wiped``, timestamped at the kill). Commits of an earlier era
that a stateless restart forgot are counted as ``lost_by_design`` and are not violations; a missing
acknowledged commit of the current era is a ``lost_commit`` violation, reported once per (partition, offset).

*Classic members* (role ``classic``, JoinGroup/SyncGroup) own and commit as consumer members do, in a group
of their own: the same two properties, on their own events and read-backs.

*Streams tasks* are owned the same way: a streams member owns an active task from the heartbeat that gave it
until it stops processing it (before the heartbeat that reports it released), its client-side lease runs out,
or it dies; its processing steps are its actions. Events of role ``streams`` carry task partitions (one
subtopology), and two incarnations owning a task at overlapping times is a ``streams_double_active`` violation.

*Share records* (``checker_share.py``): acquisition locks, acknowledgements and the share-partition offsets.

*Convergence* is judged online by the harness with `OwnershipState` (every partition owned by exactly one
live member); the harness records a ``not_converged`` event when it times out, which counts as a violation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from groupcoord.faults.checker_share import check_share
from groupcoord.faults.history import Event, Findings, Kind, Violation

__all__ = ["Event", "Findings", "Kind", "OwnershipState", "Violation", "check", "ownership_segments"]


@dataclass(frozen=True, slots=True)
class _Segment:
    member: str
    start: float
    end: float


def _ordered(events: Iterable[Event]) -> list[Event]:
    return sorted(events, key=lambda e: e.t)  # stable: one member's events keep their order at equal times


def ownership_segments(events: Sequence[Event]) -> dict[int, list[_Segment]]:
    """Per partition, the time segments during which each incarnation owned it and could act."""
    out: dict[int, list[_Segment]] = {}
    open_since: dict[tuple[str, int], float] = {}
    resumed_tail: dict[tuple[str, int], bool] = {}  # (member, p) -> in the doubtful tail after a resume

    def close(member: str, p: int, end: float) -> None:
        start = open_since.pop((member, p), None)
        resumed_tail.pop((member, p), None)
        if start is not None and end > start:
            out.setdefault(p, []).append(_Segment(member, start, end))

    # An attempted commit is an action at the time it was sent.
    for e in sorted(events, key=lambda e: e.t_sent if e.kind is Kind.COMMIT else e.t):
        m = e.member
        if e.kind is Kind.ASSIGNED:
            for p in e.partitions:
                if (m, p) not in open_since:
                    open_since[(m, p)] = e.t
                    resumed_tail.pop((m, p), None)
        elif e.kind in (Kind.REVOKED, Kind.LOST):
            for p in e.partitions:
                close(m, p, e.t)
        elif e.kind is Kind.DIED:
            for member, p in [k for k in open_since if k[0] == m]:
                close(member, p, e.t)
            for key in [k for k in resumed_tail if k[0] == m]:
                del resumed_tail[key]
        elif e.kind is Kind.STOPPED:
            for member, p in [k for k in open_since if k[0] == m]:
                close(member, p, e.t)
                resumed_tail[(member, p)] = True  # re-opened only by an action after the resume
        elif e.kind is Kind.COMMIT:
            for p in e.partitions:
                if resumed_tail.pop((m, p), False):
                    open_since[(m, p)] = e.t_sent
    for member, p in list(open_since):
        close(member, p, math.inf)  # still owned when the history ends
    return out


def _overlaps(segments: dict[int, list[_Segment]], kind: str = "double_ownership",
              what: str = "partition") -> list[Violation]:
    found: list[Violation] = []
    for p, segs in sorted(segments.items()):
        active: list[_Segment] = []
        for s in sorted(segs, key=lambda s: s.start):
            active = [a for a in active if a.end > s.start]
            for a in active:
                if a.member != s.member:
                    until = min(a.end, s.end)
                    span = "until the end" if math.isinf(until) else f"{(until - s.start) * 1000:.0f} ms"
                    detail = f"{what} {p}: {a.member} and {s.member} both own it ({span})"
                    found.append(Violation(kind, s.start, detail))
            active.append(s)
    return found


def _durability(events: Sequence[Event], findings: Findings) -> None:
    era_start = -math.inf
    acked: dict[int, tuple[int, float]] = {}  # p -> (highest acknowledged offset of this era, its ack time)
    reported: set[tuple[int, int]] = set()
    for e in _ordered(events):
        if e.kind is Kind.STATE_WIPED:
            findings.lost_by_design += len(acked)
            acked.clear()
            era_start = e.t
        elif e.kind is Kind.COMMIT and e.offsets:
            findings.acknowledged_commits += len(e.offsets)
            if e.t_sent <= era_start:
                continue  # sent before the state was wiped: the old era, forgotten by design
            for p, off in e.offsets:
                if off > acked.get(p, (-1, 0.0))[0]:
                    acked[p] = (off, e.t)
        elif e.kind is Kind.OFFSETS_FETCHED:
            committed = dict(e.offsets)
            for p, (off, t_ack) in sorted(acked.items()):
                if t_ack >= e.t or (p, off) in reported:
                    continue
                have = committed.get(p, -1)
                if have < off:
                    reported.add((p, off))
                    findings.violations.append(Violation(
                        "lost_commit", e.t, f"partition {p}: offset {off} was acknowledged, committed is {have}"))


def check(events: Sequence[Event]) -> Findings:
    """Every violation the history shows, plus the counts the report prints."""
    findings = Findings()
    for role in ("consumer", "classic"):  # both commit offsets for the partitions they own
        mine = [e for e in events if e.role == role or e.kind is Kind.STATE_WIPED]
        segments = ownership_segments(mine)
        findings.ownership_intervals += sum(len(s) for s in segments.values())
        findings.violations.extend(_overlaps(segments, what="partition" if role == "consumer" else "classic partition"))
        _durability(mine, findings)
    tasks = ownership_segments([e for e in events if e.role == "streams"])
    findings.task_intervals = sum(len(s) for s in tasks.values())
    findings.violations.extend(_overlaps(tasks, "streams_double_active", "task"))
    check_share(events, findings)
    findings.violations.extend(Violation("not_converged", e.t, e.detail) for e in events
                               if e.kind is Kind.NOT_CONVERGED)
    findings.violations.sort(key=lambda v: v.t)
    return findings


class OwnershipState:
    """Who owns what now, folded online from the same events (the harness's view for convergence)."""

    def __init__(self) -> None:
        self.owned: dict[str, set[int]] = {}
        self.last_change = -math.inf

    def apply(self, e: Event) -> None:
        if e.kind is Kind.ASSIGNED:
            self.owned.setdefault(e.member, set()).update(e.partitions)
        elif e.kind in (Kind.REVOKED, Kind.LOST):
            self.owned.setdefault(e.member, set()).difference_update(e.partitions)
        elif e.kind is Kind.DIED:
            self.owned.pop(e.member, None)
        else:
            return
        self.last_change = max(self.last_change, e.t)

    def owners(self, live: Iterable[str]) -> dict[int, list[str]]:
        """Partition -> the live members that claim it (a dead or stopped member cannot act)."""
        out: dict[int, list[str]] = {}
        for m in sorted(live):
            for p in self.owned.get(m, ()):
                out.setdefault(p, []).append(m)
        return out

    def converged(self, live: Iterable[str], partitions: int) -> bool:
        """Every partition owned by exactly one live member, and no member claims more than that."""
        owners = self.owners(live)
        return len(owners) == partitions and all(len(v) == 1 for v in owners.values())
