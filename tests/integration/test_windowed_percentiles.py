"""`WindowedPercentiles`: what `snapshot` reports is exactly what HdrHistogram gives for the window's values."""

from __future__ import annotations

import random

from hdrh.histogram import HdrHistogram

from groupcoord.coordinator.runtime.metrics import _MAX_US, QUANTILES, WindowedPercentiles


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
