"""Pictures of what the tables say: the simulation's rebalance timelines, the demo's lags and rebalances, the
benchmarks' medians. matplotlib with the Agg backend (files only, no display), imported only by the commands
that draw, so the server and the clients never load it."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from groupcoord.coordinator.simulation import Timeline

__all__ = ["bench_medians", "bench_phases", "demo_lag_spread", "demo_member_lag", "demo_rebalances",
           "simulation_timelines"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | os.PathLike[str]) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return out


def _steps(points: Sequence[tuple[int, int]], until: int) -> tuple[list[int], list[int]]:
    """A step line that holds its last value to `until` (ownership changes only at heartbeats)."""
    xs = [t for t, _ in points] + [until]
    ys = [v for _, v in points] + [points[-1][1]]
    return xs, ys


def simulation_timelines(timelines: Sequence[Timeline], path: str | os.PathLike[str]) -> Path:
    """One panel per table of `groupcoord simulate`: partitions owned by each member against time since member
    N's join, the completion as a dashed line, so interval 0 / interval > 0 / offload read side by side."""
    plt = _pyplot()
    sizes = list(dict.fromkeys(t.n_members for t in timelines))
    cols = max(1, len(timelines) // len(sizes))
    fig, axes = plt.subplots(len(sizes), cols, figsize=(5.2 * cols, 3.8 * len(sizes)), squeeze=False,
                             sharex="row", layout="constrained")
    for k, t in enumerate(timelines):
        ax = axes[k // cols][k % cols]
        until = t.completion_ms + max(t.heartbeat_ms // 2, 500)
        by_member: dict[int, list[tuple[int, int]]] = {}
        for time_ms, member, count in t.ownership:
            by_member.setdefault(member, []).append((time_ms, count))
        cmap = plt.get_cmap("tab10" if t.n_members <= 10 else "viridis")
        for member, points in sorted(by_member.items()):
            xs, ys = _steps(points, until)
            ax.step(xs, ys, where="post", color=cmap((member - 1) % 10 if t.n_members <= 10
                                                    else (member - 1) / max(1, t.n_members - 1)),
                    label=f"member {member}", linewidth=1.4)
        ax.axvline(t.completion_ms, color="black", linestyle="--", linewidth=1)
        ax.axvline(0, color="grey", linestyle=":", linewidth=1)
        ax.text(t.completion_ms, ax.get_ylim()[1] * 0.95, f" done +{t.completion_ms:,} ms", fontsize=8,
                va="top")
        ax.set_title(f"N={t.n_members}, interval {t.interval_ms:,} ms, offload {'on' if t.offload else 'off'}",
                     fontsize=9)
        ax.set_xlabel("ms since member N joins")
        ax.set_ylabel("partitions owned")
        ax.grid(alpha=0.3)
        if k % cols == 0 and len(by_member) <= 12:
            ax.legend(fontsize=7, ncol=2, loc="center left")
    fig.suptitle(f"Scale-up rebalance ({timelines[0].partitions} partitions, heartbeat "
                 f"{timelines[0].heartbeat_ms:,} ms): partitions owned per member", fontsize=11)
    return _save(fig, path)


def demo_member_lag(series: Mapping[str, Sequence[tuple[float, int]]], rebalances: Sequence[tuple[float, float]],
                    path: str | os.PathLike[str]) -> Path:
    """Each driver's lag (records) against demo time, with the rebalances shaded: lag-sticky keeps the
    members' lags close, and a rebalance shows as a jump and a recovery."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    for start, end in rebalances:
        ax.axvspan(start, end, color="orange", alpha=0.25, linewidth=0)
    for name, points in sorted(series.items()):
        ax.plot([t for t, _ in points], [v for _, v in points], marker="o", markersize=3, label=name)
    ax.set_xlabel("seconds since the demo started")
    ax.set_ylabel("lag (records)")
    ax.set_title("Member lag over time (shaded: a rebalance in progress)")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def demo_lag_spread(samples: Sequence[tuple[float, int, int]], path: str | os.PathLike[str]) -> Path:
    """(time, lag-sticky spread, range spread): max-min member lag of the live assignment against what range
    would have given on the same snapshot of committed and end offsets."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.plot([s[0] for s in samples], [s[1] for s in samples], marker="o", markersize=3, label="lag-sticky (live)")
    ax.plot([s[0] for s in samples], [s[2] for s in samples], marker="s", markersize=3, label="range (same snapshot)")
    ax.set_xlabel("seconds since the demo started")
    ax.set_ylabel("lag spread: max - min member lag (records)")
    ax.set_title("lag-sticky against range on the same snapshots")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def demo_rebalances(rebalances: Sequence[tuple[str, float, float]], path: str | os.PathLike[str]) -> Path:
    """(label, started, finished) seconds: one bar per rebalance, from the group epoch bump to every member
    holding its target."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(rebalances) + 1.6))
    for k, (_, start, end) in enumerate(rebalances):
        ax.barh(k, max(end - start, 0.05), left=start, color="tab:blue")
        ax.text(end, k, f"  {end - start:.1f} s", va="center", fontsize=8)
    ax.set_yticks(range(len(rebalances)), [r[0] for r in rebalances], fontsize=8)
    ax.invert_yaxis()
    if rebalances:  # room on the right for the last bar's duration label
        first, last = min(r[1] for r in rebalances), max(r[2] for r in rebalances)
        ax.set_xlim(first - 0.02 * (last - first + 1), last + 0.12 * (last - first + 1))
    ax.set_xlabel("seconds since the demo started")
    ax.set_title("Rebalances: group epoch bump -> every member holds its target")
    ax.grid(alpha=0.3, axis="x")
    return _save(fig, path)


def bench_medians(rows: Sequence[tuple[str, float]], title: str, path: str | os.PathLike[str],
                  unit: str = "median ms") -> Path:
    """A benchmark table as horizontal bars (log scale: rows span microseconds to seconds)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.4))
    values = [max(v, 1e-3) for _, v in rows]
    ax.barh(range(len(rows)), values, color="tab:green")
    for k, v in enumerate(values):
        ax.text(v, k, f" {v:,.1f}", va="center", fontsize=7)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel(unit + " (log scale)")
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="x")
    return _save(fig, path)


def bench_phases(rows: Sequence[tuple[str, Mapping[str, float]]], title: str, path: str | os.PathLike[str],
                 unit: str = "ms") -> Path:
    """A benchmark whose rows split into phases (join, assign, sync) as stacked bars, one bar per row."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.6))
    phases = list(dict.fromkeys(k for _, parts in rows for k in parts))
    left = [0.0] * len(rows)
    for phase in phases:
        values = [parts.get(phase, 0.0) for _, parts in rows]
        ax.barh(range(len(rows)), values, left=left, label=phase)
        left = [a + b for a, b in zip(left, values, strict=True)]
    for k, total in enumerate(left):
        ax.text(total, k, f" {total:,.0f}", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(left, default=1) * 1.12 or 1)
    ax.set_xlabel(unit)
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)
