"""The runtime's metrics, which queue what the event loop records and count it in bulk: `WindowedPercentiles`
reports exactly what HdrHistogram gives for the window's values, `Histogram` serves the buckets that counting
each value as it came gives."""

from __future__ import annotations

import bisect
import random

from hdrh.histogram import HdrHistogram

from groupcoord.coordinator.runtime.metrics import (
    _MAX_US,
    LATENCY_BUCKETS_S,
    QUANTILES,
    Histogram,
    IdleRatio,
    WindowedPercentiles,
)


def reference(values_ms: list[float]) -> tuple[dict[float, float], float]:
    h = HdrHistogram(1, _MAX_US, 2)
    for ms in values_ms:
        h.record_value(min(max(int(ms * 1000), 1), _MAX_US))
    return {q: h.get_value_at_percentile(q * 100) / 1000.0 for q in QUANTILES}, h.get_max_value() / 1000.0


def test_snapshot_covers_the_current_and_previous_window_exactly() -> None:
    now = [0.0]
    w = WindowedPercentiles(window_s=30.0, clock=lambda: now[0])
    rng = random.Random(7)
    old = [rng.lognormvariate(-3, 1.5) for _ in range(5_000)]  # many distinct values: folded on the way
    for ms in old:
        w.record(ms)
    assert w.snapshot() == reference(old)
    now[0] = 31.0  # the first window becomes the previous one
    recent = [rng.lognormvariate(0, 2) for _ in range(3_000)]
    for ms in recent:
        w.record(ms)
    assert w.snapshot() == reference(old + recent)
    now[0] = 62.0  # the first window has left; what was recorded at 31 s is the previous window now
    assert w.snapshot() == reference(recent)
    now[0] = 200.0  # nothing recorded for two windows
    assert w.snapshot() == ({q: 0.0 for q in QUANTILES}, 0.0)
    assert w.count == 8_000 and abs(w.sum_ms - sum(old + recent)) < 1e-6


def buckets_reference(seconds: list[float]) -> tuple[list[int], float]:
    counts = [0] * (len(LATENCY_BUCKETS_S) + 1)
    for s in seconds:
        counts[bisect.bisect_left(LATENCY_BUCKETS_S, s)] += 1
    return counts, sum(seconds)


def served(h: Histogram) -> dict[tuple[str, ...], tuple[list[int], float]]:
    """Per label values: the per-bucket counts (from the cumulative ones served) and the sum."""
    out = {}
    for metric in h.family().samples:
        labels = tuple(v for k, v in sorted(metric.labels.items()) if k != "le")
        counts, total = out.setdefault(labels, ([], 0.0))
        if metric.name.endswith("_bucket"):
            counts.append(int(metric.value))
        elif metric.name.endswith("_sum"):
            out[labels] = (counts, metric.value)
    return {k: ([c - p for c, p in zip(cs, [0, *cs[:-1]], strict=True)], s) for k, (cs, s) in out.items()}


def test_histogram_counts_every_observation_in_its_bucket_across_folds() -> None:
    """Observations are queued and counted in bulk: what is served is what counting each one as it came gives,
    a value on a bound in that bound's bucket (Prometheus' `le`)."""
    h = Histogram("latency_seconds", "doc", ("operation",))
    h.touch("idle")
    rng = random.Random(11)
    seen: dict[str, list[float]] = {"a": [], "b": []}
    for k in range(3 * Histogram._FOLD_AT + 17):  # several folds on the way, and values left queued
        op = "a" if k % 3 else "b"
        s = LATENCY_BUCKETS_S[k % len(LATENCY_BUCKETS_S)] if k % 7 == 0 else rng.lognormvariate(-6, 2)
        seen[op].append(s)
        h.observe(s, op)
    got = served(h)
    assert got[("idle",)] == ([0] * (len(LATENCY_BUCKETS_S) + 1), 0.0)
    for op, values in seen.items():
        counts, total = got[(op,)]
        want_counts, want_total = buckets_reference(values)
        assert counts == want_counts and abs(total - want_total) < 1e-9


def test_windowed_percentiles_feed_their_histogram_every_value() -> None:
    now = [0.0]
    h = Histogram("queue_time_seconds", "doc")
    w = WindowedPercentiles(window_s=30.0, clock=lambda: now[0], histogram=h)
    rng = random.Random(5)
    values = [rng.lognormvariate(-1, 2) for _ in range(2 * WindowedPercentiles._FOLD_AT + 3)]
    for ms in values:
        w.record(ms)
    w.snapshot()  # the collector snapshots the series before it serves their histograms
    counts, total = served(h)[()]
    want_counts, want_total = buckets_reference([ms / 1000.0 for ms in values])
    assert counts == want_counts and abs(total - want_total) < 1e-9
    assert w.count == len(values)


def test_idle_ratio_of_one_writer_is_busy_time_over_elapsed_time() -> None:
    now = [0.0]
    idle = IdleRatio(1, clock=lambda: now[0], single_writer=True)
    idle.add_busy(0.25)
    idle.add_busy(0.5)
    now[0] = 3.0
    assert idle.read() == 0.75  # 0.75 s busy of 3 s
    idle.add_busy(0.5)
    now[0] = 4.0
    assert idle.read() == 0.5  # only what was added since the last read counts
