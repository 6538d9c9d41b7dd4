"""The share-group half of the checker: acquisition locks, acknowledgements, share-partition offsets.

Like `checker.py` it reads only what clients observed (the share members' acquisitions and acknowledgements,
the harness's DescribeShareGroupOffsets), timestamped with CLOCK_MONOTONIC, which all processes on the machine
share. Properties, within one era (the time between two restarts without state: a wiped coordinator forgets
every lock and acknowledgement by design; what it forgot is counted, not reported):

``share_double_acquire``
    A member holds the offsets of an acquisition from when the ShareAcquire reply arrived until the earliest of
    the deadline it computed itself (lock duration from when it *sent* the request, cut by its client-side
    membership lease), the sending of an acknowledgement of that range (it is done with the records then,
    whatever the answer), and its death. The
    coordinator's lock outlives the client's deadline (it starts later), so a hold of an offset that begins
    more than `MARGIN_S` before another member's hold of it ends (whatever its own length) means the coordinator
    gave out a record still locked to someone.
``share_redelivered``
    An offset whose ACCEPT was acknowledged (the reply arrived) is acquired again by a request sent after that.
``share_double_accept``
    Two acknowledgements that both succeeded ACCEPT the same offset.
``share_lost_ack``
    The harness's read-back after healing shows a share-partition that forgot an acknowledged ACCEPT: the
    accepted offset is at or past the partition's end (the first offset never delivered), the partition is
    missing, or its start offset went back.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from groupcoord.faults.history import Event, Findings, Kind, Violation

MARGIN_S = 0.05  # clock reading and scheduling jitter between processes on one machine


class IntervalSet:
    """Disjoint, merged integer intervals [first, last]."""

    def __init__(self) -> None:
        self.firsts: list[int] = []
        self.lasts: list[int] = []

    def __len__(self) -> int:
        return sum(b - a + 1 for a, b in zip(self.firsts, self.lasts, strict=True))

    def overlap(self, first: int, last: int) -> tuple[int, int] | None:
        """The first interval of the set that meets [first, last], or None."""
        i = bisect.bisect_right(self.firsts, last) - 1  # the last interval that starts at or before `last`
        if i >= 0 and self.lasts[i] >= first:  # disjoint and sorted: the earlier ones end earlier still
            return self.firsts[i], self.lasts[i]
        return None

    def add(self, first: int, last: int) -> None:
        i = bisect.bisect_left(self.lasts, first - 1)
        j = i
        while j < len(self.firsts) and self.firsts[j] <= last + 1:
            first, last = min(first, self.firsts[j]), max(last, self.lasts[j])
            j += 1
        self.firsts[i:j] = [first]
        self.lasts[i:j] = [last]

    def maximum(self) -> int:
        return self.lasts[-1] if self.lasts else -1


@dataclass(slots=True)
class _Hold:
    member: str
    partition: int
    first: int
    last: int
    start: float
    end: float


def _holds(events: Sequence[Event]) -> dict[int, list[_Hold]]:
    out: dict[int, list[_Hold]] = {}
    open_holds: dict[tuple[str, int, int, int], _Hold] = {}
    for e in sorted(events, key=lambda e: e.t):
        if e.kind is Kind.ACQUIRED:
            for p, first, last in e.ranges:
                h = _Hold(e.member, p, first, last, e.t, max(e.t, e.until))
                out.setdefault(p, []).append(h)
                open_holds[(e.member, p, first, last)] = h
        elif e.kind is Kind.ACK_SENT:
            for p, first, last in e.ranges:
                held = open_holds.pop((e.member, p, first, last), None)
                if held is not None:
                    held.end = max(held.start, min(held.end, e.t))
        elif e.kind is Kind.DIED and e.role == "share":
            for key in [k for k in open_holds if k[0] == e.member]:
                h = open_holds.pop(key)
                h.end = max(h.start, min(h.end, e.t))
        elif e.kind is Kind.STATE_WIPED:  # a wiped coordinator forgot every lock: later holds may overlap
            for h in open_holds.values():
                h.end = max(h.start, min(h.end, e.t))
            open_holds.clear()
    return out


def _double_acquire(holds: dict[int, list[_Hold]]) -> list[Violation]:
    found: list[Violation] = []
    for p, hs in sorted(holds.items()):
        active: list[_Hold] = []
        for h in sorted(hs, key=lambda h: h.start):
            active = [a for a in active if a.end - MARGIN_S > h.start]
            for a in active:
                # a started first and ends more than the margin after h started: h is not at a's boundary (however
                # short h is: a member that acknowledges at once holds for milliseconds)
                if a.first <= h.last and h.first <= a.last and h.end - a.start > MARGIN_S:
                    lo, hi = max(a.first, h.first), min(a.last, h.last)
                    both_ms = (min(a.end, h.end) - h.start) * 1000
                    found.append(Violation(
                        "share_double_acquire", h.start,
                        f"partition {p} offsets {lo}..{hi}: locked to {a.member} until {_rel(a.end, h.start)} and "
                        f"to {h.member} from then ({both_ms:.0f} ms at once)"))
            active.append(h)
    return found


def _rel(t: float, since: float) -> str:
    return "the end" if math.isinf(t) else f"+{(t - since) * 1000:.0f} ms"


def _acknowledgements(events: Sequence[Event], findings: Findings) -> None:
    """share_redelivered, share_double_accept and share_lost_ack, in one pass in time order."""
    accepted: dict[int, IntervalSet] = {}  # this era's ACCEPTed offsets, per partition (reply received)
    era_start = -math.inf
    starts: dict[int, int] = {}  # the last start offset read back, per partition
    reported: set[tuple[str, int, int]] = set()

    def violation(kind: str, t: float, p: int, off: int, detail: str) -> None:
        if (kind, p, off) not in reported:
            reported.add((kind, p, off))
            findings.violations.append(Violation(kind, t, f"partition {p}: {detail}"))

    def when(e: Event) -> float:
        return e.t_sent if e.kind is Kind.ACQUIRED else e.t

    for e in sorted((e for e in events if e.kind in (Kind.ACQUIRED, Kind.ACKED, Kind.STATE_WIPED,
                                                      Kind.SHARE_OFFSETS)), key=when):
        if e.kind is Kind.STATE_WIPED:
            findings.share_lost_by_design += sum(len(s) for s in accepted.values())
            accepted.clear()
            starts.clear()
            era_start = e.t
        elif e.kind is Kind.ACQUIRED:
            for p, first, last in e.ranges:
                findings.records_acquired += last - first + 1
                hit = accepted[p].overlap(first, last) if p in accepted else None
                if hit is not None:
                    violation("share_redelivered", e.t_sent, p, max(first, hit[0]),
                              f"{e.member} acquired {first}..{last}, but {hit[0]}..{hit[1]} had been accepted")
        elif e.kind is Kind.ACKED and e.detail == "accept":
            for p, first, last in e.ranges:
                findings.records_accepted += last - first + 1
                if e.t_sent <= era_start:
                    continue  # sent to the coordinator that was wiped
                s = accepted.setdefault(p, IntervalSet())
                hit = s.overlap(first, last)
                if hit is not None:
                    violation("share_double_accept", e.t, p, max(first, hit[0]),
                              f"{e.member} accepted {first}..{last}, but {hit[0]}..{hit[1]} had been accepted")
                s.add(first, last)
        elif e.kind is Kind.SHARE_OFFSETS:
            seen = {p: (start, end) for p, start, end in e.ranges}
            for p, s in sorted(accepted.items()):
                top = s.maximum()
                if p not in seen:
                    violation("share_lost_ack", e.t, p, top, f"offset {top} was accepted; the partition is gone")
                elif seen[p][1] <= top:
                    violation("share_lost_ack", e.t, p, top,
                              f"offset {top} was accepted; the partition ends at {seen[p][1]} (never delivered)")
            for p, (start, _) in seen.items():
                if start < starts.get(p, -1):
                    violation("share_lost_ack", e.t, p, start, f"start offset went back from {starts[p]} to {start}")
                starts[p] = max(start, starts.get(p, -1))


def check_share(events: Sequence[Event], findings: Findings) -> None:
    """Add the share-group violations and figures of `events` to `findings`."""
    share = [e for e in events if e.role == "share" or e.kind is Kind.STATE_WIPED]
    findings.violations.extend(_double_acquire(_holds(share)))
    _acknowledgements(share, findings)
