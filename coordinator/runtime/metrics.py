"""Prometheus metrics with Kafka's group-coordinator names in Prometheus form, and histograms beside them.

Kafka's `background-queue-time-ms-p99` becomes `group_coordinator_background_queue_time_ms{quantile="0.99"}`
(a summary) plus `group_coordinator_background_queue_time_ms_max`. Percentiles come from HdrHistogram over
a rolling window (the current and the previous `window_s`), like Kafka's sampled percentiles, so they
describe recent behaviour rather than the whole uptime.

A quantile cannot be averaged across instances, so each of those latencies is also a Prometheus histogram in
seconds (`group_coordinator_event_queue_time_seconds_bucket{le=...}`, cumulative since start): summing the
buckets of every instance and taking `histogram_quantile` gives the fleet's percentile. Request latency (per
operation), assignor run time and log flush time are histograms only.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram
from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

QUANTILES = (0.5, 0.95, 0.99, 0.999)
_MAX_US = 3_600_000_000  # one hour, in microseconds
# Upper bounds in seconds: 100 µs (an uncontended heartbeat) to 30 s (a rebalance timeout), about 2.5x apart,
# the same for every instance so that their buckets add up.
LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                     5.0, 10.0, 30.0)


class Histogram:
    """Cumulative Prometheus buckets in seconds, per label values (a bounded set: operation or assignor names,
    never a group or member id). Thread-safe.

    `observe` runs for every request on the event loop: it only appends the value to a queue (a deque's append
    is atomic, so it needs no lock); the values are counted into their buckets in bulk, with numpy, when
    `_FOLD_AT` of them are queued and whenever the buckets are read (`family`), so what is served is the same."""

    _FOLD_AT = 2048

    def __init__(self, name: str, doc: str, labels: tuple[str, ...] = (),
                 buckets: tuple[float, ...] = LATENCY_BUCKETS_S) -> None:
        self.name = name
        self.doc = doc
        self.labels = labels
        self.buckets = buckets
        self._bounds = np.asarray(buckets, dtype=np.float64)
        self._lock = threading.Lock()
        self._series: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}  # values -> (counts, [sum])
        self._pending: collections.deque[tuple[float, tuple[str, ...]]] = collections.deque()

    def touch(self, *label_values: str) -> None:
        """Serve a label set's buckets at zero before its first observation (Prometheus' advice for known
        label values: a rate over a series that appears later misses its first increase)."""
        with self._lock:
            self._series.setdefault(label_values, ([0] * (len(self.buckets) + 1), [0.0]))

    def observe(self, seconds: float, *label_values: str) -> None:
        pending = self._pending
        pending.append((seconds, label_values))
        if len(pending) >= self._FOLD_AT:
            with self._lock:
                self._fold()

    def observe_many(self, seconds: np.ndarray[Any, Any], *label_values: str) -> None:
        """Count many values of one label set at once (a `WindowedPercentiles` folding its queue)."""
        with self._lock:
            self._fold()
            self._add(seconds, label_values)

    def _fold(self) -> None:
        """Count the queued values (the lock held). Only what was queued when it started: observers may append
        meanwhile, and their values wait for the next fold."""
        pending = self._pending
        n = len(pending)
        if not n:
            return
        pop = pending.popleft
        by_labels: dict[tuple[str, ...], list[float]] = {}
        for _ in range(n):
            seconds, labels = pop()
            values = by_labels.get(labels)
            if values is None:
                by_labels[labels] = [seconds]
            else:
                values.append(seconds)
        for labels, values in by_labels.items():
            self._add(np.asarray(values, dtype=np.float64), labels)

    def _add(self, seconds: np.ndarray[Any, Any], label_values: tuple[str, ...]) -> None:
        series = self._series.get(label_values)
        if series is None:
            series = self._series[label_values] = ([0] * (len(self.buckets) + 1), [0.0])
        # searchsorted(side="left") is bisect_left: a value equal to a bound counts in that bound's bucket
        counts = np.bincount(np.searchsorted(self._bounds, seconds, side="left"), minlength=len(self.buckets) + 1)
        bucket_counts = series[0]
        for i, n in enumerate(counts.tolist()):
            bucket_counts[i] += n
        series[1][0] += float(seconds.sum())

    def family(self) -> HistogramMetricFamily:
        h = HistogramMetricFamily(self.name, self.doc, labels=list(self.labels))
        with self._lock:
            self._fold()
            series = sorted((k, (list(c), s[0])) for k, (c, s) in self._series.items())
        if not series and not self.labels:
            series = [((), ([0] * (len(self.buckets) + 1), 0.0))]
        for values, (counts, total) in series:
            cumulative, running = [], 0
            for bound, n in zip((*[repr(b) for b in self.buckets], "+Inf"), counts, strict=True):
                running += n
                cumulative.append((bound, running))
            h.add_metric(list(values), cumulative, total)
        return h


class WindowedPercentiles:
    """Latencies in ms, recorded at microsecond resolution into two rotating HdrHistograms. Thread-safe.

    `record` runs twice per operation on the event loop, and HdrHistogram's `record_value` is pure Python
    (microseconds): `record` only checks whether the window has ended and appends the value to a queue (a
    deque's append is atomic: no lock); the queue is folded into the current histogram in bulk, with numpy
    (`_FOLD_AT` queued values, before a rotation, and on `snapshot`, `count` and `sum_ms`), so the histograms
    hold the same counts."""

    _FOLD_AT = 2048

    def __init__(self, window_s: float = 30.0, clock: Callable[[], float] = time.monotonic,
                 histogram: Histogram | None = None) -> None:
        self.histogram = histogram  # also observed into, in seconds (aggregatable across instances)
        self._window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._current = HdrHistogram(1, _MAX_US, 2)
        self._previous = HdrHistogram(1, _MAX_US, 2)
        self._pending: collections.deque[float] = collections.deque()  # ms, not yet in `_current`
        self._rotated_at = clock()
        self._count = 0
        self._sum_ms = 0.0

    def record(self, ms: float) -> None:
        if self._clock() - self._rotated_at >= self._window_s:
            with self._lock:
                self._maybe_rotate()
        pending = self._pending
        pending.append(ms)
        if len(pending) >= self._FOLD_AT:
            with self._lock:
                self._fold()

    @property
    def count(self) -> int:
        with self._lock:
            self._fold()
            return self._count

    @property
    def sum_ms(self) -> float:
        with self._lock:
            self._fold()
            return self._sum_ms

    def _fold(self) -> None:
        """The queued values into the current histogram (the lock held); values appended meanwhile wait."""
        pending = self._pending
        n = len(pending)
        if not n:
            return
        pop = pending.popleft
        ms = np.fromiter((pop() for _ in range(n)), dtype=np.float64, count=n)
        # as int(ms * 1000) clamped to [1, _MAX_US]: clamping first, then truncating, gives the same integers
        us = np.clip(ms * 1000, 1, _MAX_US).astype(np.int64)
        values, counts = np.unique(us, return_counts=True)
        record = self._current.record_value
        for value, count in zip(values.tolist(), counts.tolist(), strict=True):
            record(value, count)
        self._count += n
        self._sum_ms += float(ms.sum())
        if self.histogram is not None:
            self.histogram.observe_many(ms / 1000.0)

    def _maybe_rotate(self) -> None:
        now = self._clock()
        if now - self._rotated_at >= self._window_s:
            self._fold()  # what was recorded so far belongs to the window that ends now
            self._previous = self._current if now - self._rotated_at < 2 * self._window_s else HdrHistogram(
                1, _MAX_US, 2)
            self._current = HdrHistogram(1, _MAX_US, 2)
            self._rotated_at = now

    def snapshot(self) -> tuple[dict[float, float], float]:
        """(quantile -> ms, max ms) over the window."""
        with self._lock:
            self._maybe_rotate()
            self._fold()
            merged = HdrHistogram(1, _MAX_US, 2)
            merged.add(self._previous)
            merged.add(self._current)
        if merged.get_total_count() == 0:
            return {q: 0.0 for q in QUANTILES}, 0.0
        return ({q: merged.get_value_at_percentile(q * 100) / 1000.0 for q in QUANTILES},
                merged.get_max_value() / 1000.0)


class IdleRatio:
    """Fraction of wall time a pool of `threads` workers spent idle since the last read (Kafka's
    thread-idle-ratio-avg). `single_writer`: only one thread ever calls `add_busy` (the event loop, once per
    operation), which then takes no lock: it only adds to a running total that `read` takes differences of."""

    def __init__(self, threads: int, clock: Callable[[], float] = time.monotonic, single_writer: bool = False) -> None:
        self._threads = threads
        self._clock = clock
        self._lock = threading.Lock()
        self._busy_total = 0.0
        self._busy_read = 0.0  # `_busy_total` at the last read that took a window
        self._since = clock()
        self._last = 1.0
        if single_writer:
            self.add_busy = self._add_busy_unlocked  # type: ignore[method-assign]

    def add_busy(self, seconds: float) -> None:
        with self._lock:
            self._busy_total += seconds

    def _add_busy_unlocked(self, seconds: float) -> None:
        self._busy_total += seconds

    def read(self) -> float:
        with self._lock:
            now = self._clock()
            elapsed = (now - self._since) * self._threads
            if elapsed >= 1.0:  # keep the last figure until a meaningful window has passed
                total = self._busy_total
                self._last = max(0.0, min(1.0, 1.0 - (total - self._busy_read) / elapsed))
                self._busy_read = total
                self._since = now
            return self._last


class CoordinatorMetrics:
    """Owns the registry; the runtime records into it, `/metrics` serves it."""

    def __init__(self, background_threads: int, window_s: float = 30.0) -> None:
        self.registry = CollectorRegistry()

        def windowed(name: str, doc: str) -> WindowedPercentiles:
            """Kafka's `<name>-ms` percentiles (a summary, `_ms`) and an aggregatable histogram (`_seconds`)."""
            return WindowedPercentiles(window_s, histogram=Histogram(f"group_coordinator_{name}_seconds", doc))

        self.event_queue_time = windowed("event_queue_time", "Time an operation waited in the coordinator's event "
                                         "queue")
        self.event_processing_time = windowed("event_processing_time", "Time the coordinator spent processing "
                                              "an operation")
        self.background_queue_time = windowed("background_queue_time", "Time a background task (offloaded "
                                              "assignor run) waited for an executor worker")
        self.background_processing_time = windowed("background_processing_time", "Time a background task "
                                                   "(offloaded assignor run) ran on an executor worker")
        self.windowed = (self.event_queue_time, self.event_processing_time, self.background_queue_time,
                         self.background_processing_time)
        self.request_latency = Histogram(
            "group_coordinator_request_latency_seconds",
            "Time from a request's arrival at the runtime to its response (queued, processed, records durable; "
            "JoinGroup/SyncGroup include the time parked for the rebalance)", ("operation",))
        self.assignor_time = Histogram("group_coordinator_assignor_time_seconds",
                                       "Time an offloaded assignor run took on its worker", ("assignor",))
        self.log_flush_time = Histogram("group_coordinator_log_flush_time_seconds",
                                        "Time the file log took to write (and fsync, per groupcoord.log.fsync) "
                                        "one batch of appended operations")
        self.event_idle = IdleRatio(1, single_writer=True)
        self.background_idle = IdleRatio(background_threads)
        self.gauges: dict[str, tuple[str, Callable[[], float]]] = {}  # name -> (help, read)

    def register(self, collector: Collector) -> None:
        self.registry.register(collector)


class CoordinatorCollector(Collector):
    """Builds every metric family at scrape time from the runtime's live state."""

    def __init__(self, metrics: CoordinatorMetrics, snapshot: Callable[[], dict[str, Any]]) -> None:
        self._m = metrics
        self._snapshot = snapshot

    def collect(self) -> Iterable[Any]:
        m = self._m
        for series in m.windowed:
            hist = series.histogram
            assert hist is not None
            name, doc = hist.name.removesuffix("_seconds") + "_ms", hist.doc
            quantiles, maximum = series.snapshot()
            s = SummaryMetricFamily(name, doc + " (rolling window)", labels=["quantile"])
            for q, v in quantiles.items():
                s.add_sample(name, {"quantile": str(q)}, v)
            s.add_sample(name + "_count", {}, series.count)
            s.add_sample(name + "_sum", {}, series.sum_ms)
            yield s
            yield GaugeMetricFamily(name + "_max", doc + ", maximum over the rolling window", value=maximum)
            yield hist.family()
        for hist in (m.request_latency, m.assignor_time, m.log_flush_time):
            yield hist.family()
        yield GaugeMetricFamily("group_coordinator_thread_idle_ratio_avg",
                                "Fraction of time the event processor thread was idle", value=m.event_idle.read())
        yield GaugeMetricFamily("group_coordinator_background_thread_idle_ratio_avg",
                                "Fraction of time the background executor workers were idle",
                                value=m.background_idle.read())

        snap = self._snapshot()
        groups = GaugeMetricFamily("group_coordinator_groups", "Groups by type and state",
                                   labels=["type", "state"])
        for (kind, state), n in sorted(snap["groups"].items()):
            groups.add_metric([kind, state], n)
        yield groups
        yield GaugeMetricFamily("group_coordinator_members", "Members of all groups", value=snap["members"])
        stats = snap["stats"]
        hb = CounterMetricFamily("group_coordinator_consumer_group_heartbeats",
                                 "ConsumerGroupHeartbeat requests answered, by error code", labels=["error"])
        for code, n in sorted(stats.heartbeats_by_error.items()):
            hb.add_metric([code], n)
        yield hb
        yield CounterMetricFamily("group_coordinator_rebalances", "Group epoch bumps (consumer groups)",
                                  value=stats.rebalances)
        runs = CounterMetricFamily("group_coordinator_assignor_runs", "Assignor runs started, by mode",
                                   labels=["mode"])
        runs.add_metric(["sync"], stats.assignor_runs_sync)
        runs.add_metric(["offloaded"], stats.assignor_runs_offloaded)
        yield runs
        skipped = CounterMetricFamily("group_coordinator_assignor_runs_skipped",
                                      "Assignor runs not started (KIP-1263), by reason", labels=["reason"])
        skipped.add_metric(["interval"], stats.assignor_skipped_interval)
        skipped.add_metric(["inflight"], stats.assignor_skipped_inflight)
        yield skipped
        yield CounterMetricFamily("group_coordinator_assignor_failures", "Assignor runs that failed",
                                  value=stats.assignor_failures)
        yield CounterMetricFamily("group_coordinator_assignor_results_discarded",
                                  "Offloaded results discarded (group deleted or run superseded)",
                                  value=stats.assignor_results_discarded)
        fenced = CounterMetricFamily("group_coordinator_members_removed", "Members removed, by reason",
                                     labels=["reason"])
        fenced.add_metric(["leave"], stats.members_left)
        fenced.add_metric(["session_timeout"], stats.members_fenced_session)
        fenced.add_metric(["rebalance_timeout"], stats.members_fenced_rebalance)
        yield fenced
        for name, (doc, read) in sorted(self._m.gauges.items()):
            yield GaugeMetricFamily(name, doc, value=read())
