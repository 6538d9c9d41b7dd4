"""Unavailability and takeover, from the probes' history (pure, like the checker: clients' observations only).

A probe (`router.py`) asks each group's coordinator, as FindCoordinator names it, every 100 ms and records each
change of answer. An *unavailability window* of a group runs from the first probe that failed (a routing error
or no answer) to the next probe that succeeded; the group *moved* when the instance answering after the window
is not the one that answered before it. Windows are attributed to the fault of the step in which they began.

*Takeover* after an instance is killed: for each group that instance answered for at the kill, the time from
the kill (a ``nemesis`` event ``instance-kill-9 HOST:PORT``) to the first successful probe from another
instance. Kafka's part of it is the coordinators' session timeout; the new owner's replay adds the rest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from groupcoord.faults.history import Event, Kind


@dataclass(frozen=True, slots=True)
class Window:
    group: str  # the member kind whose group it is
    start: float
    end: float  # inf: still failing when the history ends
    before: str  # the instance that answered before ("": none yet)
    after: str  # the instance that answered after

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def moved(self) -> bool:
        return bool(self.before) and self.before != self.after


def _answers(events: Sequence[Event]) -> dict[str, list[tuple[float, str | None]]]:
    """Per group, (time, answering instance or None on an error), in time order."""
    out: dict[str, list[tuple[float, str | None]]] = {}
    for e in sorted((e for e in events if e.kind is Kind.PROBE), key=lambda e: e.t):
        ok = e.detail.startswith("ok ")
        out.setdefault(e.member, []).append((e.t, e.detail[3:] if ok else None))
    return out


def windows(events: Sequence[Event]) -> list[Window]:
    found: list[Window] = []
    for group, answers in _answers(events).items():
        before, failed_at = "", None
        for t, who in answers:
            if who is None:
                if failed_at is None:
                    failed_at = t
                continue
            if failed_at is not None:
                found.append(Window(group, failed_at, t, before, who))
                failed_at = None
            before = who
        if failed_at is not None:
            found.append(Window(group, failed_at, math.inf, before, ""))
    return sorted(found, key=lambda w: w.start)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of them at or below it."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def by_fault(found: Sequence[Window], step_starts: Sequence[tuple[float, str]]) -> dict[str, list[Window]]:
    out: dict[str, list[Window]] = {}
    for w in found:
        fault = next((k for t, k in reversed(step_starts) if t <= w.start), "start")
        out.setdefault(fault, []).append(w)
    return out


def table(found: Sequence[Window], step_starts: Sequence[tuple[float, str]], steps: dict[str, int]) -> str:
    """Per fault kind: windows of groups that moved (p50/p99/max seconds), and those that did not."""
    lines = [f"  {'fault':<26} {'steps':>5} {'moved':>5} {'p50 s':>7} {'p99 s':>7} {'max s':>7}   "
             f"{'stayed':>6} {'max s':>7}"]
    grouped = by_fault(found, step_starts)
    for fault in sorted((set(steps) | set(grouped)) - {"read-back"}):  # the read-back stops every instance
        ws = grouped.get(fault, [])
        moved = [w.seconds for w in ws if w.moved]
        stayed = [w.seconds for w in ws if not w.moved]
        cells = [f"{percentile(moved, q):7.2f}" if moved else f"{'-':>7}" for q in (0.5, 0.99, 1.0)]
        most = f"{max(stayed):7.2f}" if stayed else f"{'-':>7}"
        lines.append(f"  {fault:<26} {steps.get(fault, 0):>5} {len(moved):>5} {' '.join(cells)}   "
                     f"{len(stayed):>6} {most}")
    return "\n".join(lines)


def takeovers(events: Sequence[Event], fault: str = "instance-kill-9") -> list[tuple[str, float]]:
    """(group, seconds from the kill of its instance until another instance answered for it); `fault`
    "instance-sigterm": from a clean stop instead."""
    answers = _answers(events)
    out: list[tuple[str, float]] = []
    for kill in (e for e in events if e.kind is Kind.NEMESIS and e.detail.startswith(f"{fault} ")):
        victim = kill.detail.split(" ", 1)[1]
        for group, seq in answers.items():
            last = next((who for t, who in reversed(seq) if t <= kill.t and who is not None), None)
            if last != victim:
                continue
            served = next((t for t, who in seq if t > kill.t and who is not None and who != victim), None)
            if served is not None:
                out.append((group, served - kill.t))
    return out


def takeover_bound_s(session_ms: int, replays: Sequence[tuple[int, int, float]]) -> float:
    """Issue 29's bound on a takeover: a dead instance keeps its state partitions for the coordinators' session,
    then the next owner replays them (the slowest load of the run stands for any)."""
    return session_ms / 1000 + max((seconds for _, _, seconds in replays), default=0.0)


def kafka_figures(events: Sequence[Event], step_starts: Sequence[tuple[float, str]], steps: Mapping[str, int],
                  replays: Sequence[tuple[int, int, float]], session_ms: int) -> str:
    """The Kafka-backed mode's figures: unavailability per fault, takeover after kill -9, replay per partition."""
    found = windows(events)
    lines = ["unavailability: windows in which a group's coordinator answered errors, by the fault of the step "
             "in which they began (moved: another instance answered after it)",
             table(found, step_starts, dict(steps))]
    taken = [s for _, s in takeovers(events)]
    if taken:
        lines.append(f"takeover after instance-kill-9: {len(taken)} group(s); p50 {percentile(taken, 0.5):.2f} s, "
                     f"max {max(taken):.2f} s (state session timeout {session_ms / 1000:.1f} s + replay)")
        bound = takeover_bound_s(session_ms, replays)
        over = sorted(s for s in taken if s > bound)
        lines.append(f"  over the bound of {bound:.2f} s (the session + the slowest replay): {len(over)}"
                     + (f" ({', '.join(f'{s:.2f} s' for s in over[:10])})" if over else ""))
    per_partition: dict[int, list[float]] = {}
    for p, _, seconds in replays:
        per_partition.setdefault(p, []).append(seconds)
    if per_partition:
        lines.append("replay per state partition (loads; p50 / max seconds; records in the largest load)")
        for p, secs in sorted(per_partition.items()):
            most = max(r for q, r, _ in replays if q == p)
            lines.append(f"  partition {p}: {len(secs)} loads; {percentile(secs, 0.5):.2f} / {max(secs):.2f} s; "
                         f"{most} records")
    return "\n".join(lines)
