"""`groupcoord demo`: Kafka, the coordinator and Spark drivers sharing a topic, end to end, on real components.

What runs (all on 127.0.0.1, all stopped at the end, the embedded Kafka last):

1. the embedded Kafka (librdkafka's mock cluster) in this process, with a topic of 24 partitions, and a producer
   thread writing to it at skewed rates (partition weights follow 1/rank, ranks shuffled with a fixed seed);
2. the coordinator, ``groupcoord serve --bootstrap-servers ...``, as a subprocess, with ``lag-sticky`` as its
   default assignor and short heartbeats;
3. Spark driver processes (``python -m groupcoord.clients.spark_driver``, local mode, small memory) that consume the
   partitions the group gives them and aggregate per key into Parquet. Two start; a third is added once they
   are stable; then the first is stopped (SIGTERM: it commits its last batch and leaves);
4. a short share-group act (`groupcoord.demo_share`): three drivers on a 2-partition topic as a share group
   (queue semantics, KIP-932), all busy, with per-driver counts and 0 missing.

At each rebalance it prints a table of members (partitions, lag = Kafka end offset - committed offset,
records processed) and the lag spread (max - min member lag) of the live ``lag-sticky`` assignment next to
what the ``range`` assignor gives on the same lag snapshot (computed with `assignors.RangeAssignor`). At the
end it stops producing, waits for the drivers to catch up, stops them and prints a summary: records produced
and processed, duplicates (counted from the Parquet batch files), the time of each rebalance and the lag
spread under both assignors.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from groupcoord.demo_monitor import GROUP, GroupMonitor, GroupView, LagSample
from groupcoord.demo_processes import CoordinatorProcess, SkewedProducer

__all__ = ["main"]

DEMO_MARKER = ".groupcoord-demo"
Offsets = dict[int, tuple[int, int, int | None]]  # partition -> (log start, end, committed or None)


# --- the demo ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Plan:
    partitions: int = 24
    rate: float = 1500.0
    steady_s: float = 30.0
    start_timeout_s: float = 150.0
    catch_up_timeout_s: float = 60.0
    max_offsets_per_trigger: int = 4000
    trigger_ms: int = 1000
    driver_memory: str = "512m"
    spark_master: str = "local[1]"  # or spark://HOST:PORT, or "standalone" (a cluster started for the run)

    @staticmethod
    def quick() -> Plan:
        return Plan(rate=1000.0, steady_s=8.0, start_timeout_s=120.0, catch_up_timeout_s=45.0)


@dataclass
class Rebalance:
    epoch: int
    cause: str
    started: float
    seconds: float | None = None
    members: int = 0


@dataclass
class Demo:
    plan: Plan
    output: Path
    out: Callable[[str], None]
    t0: float = field(default_factory=time.monotonic)
    drivers: dict[str, Any] = field(default_factory=dict)
    rebalances: list[Rebalance] = field(default_factory=list)
    samples: list[LagSample] = field(default_factory=list)
    _last_epoch: int = -1
    _pending: Rebalance | None = None
    _cause: str = "drivers joined"
    _last_members: frozenset[str] = frozenset()
    _last_sample: float = 0.0

    def say(self, text: str) -> None:
        self.out(f"[{time.monotonic() - self.t0:6.1f}s] {text}")

    def names(self) -> dict[str, str]:
        """member id -> driver name, from the drivers' status files."""
        out: dict[str, str] = {}
        for name, d in self.drivers.items():
            mid = d.status().get("member_id")
            if mid:
                out[str(mid)] = name
        return out

    def poll(self, monitor: GroupMonitor) -> GroupView | None:
        """One look at the group: notice rebalances, time them, print a table when one completes."""
        view = monitor.describe()
        if view is None:
            return None
        now = time.monotonic()
        members = frozenset(m.member_id for m in view.members)
        if view.group_epoch != self._last_epoch:
            names = self.names()
            joined = sorted(names.get(m, m[:8]) for m in members - self._last_members)
            left = sorted(names.get(m, m[:8]) for m in self._last_members - members)
            causes = ([f"{' '.join(joined)} joined"] if joined else []) + ([f"{' '.join(left)} left"] if left else [])
            cause = ", ".join(causes) or "subscription or metadata changed"
            if self._pending is None:
                self._pending = Rebalance(view.group_epoch, cause, now)
                self.say(f"rebalance: group epoch {view.group_epoch} ({cause})")
            else:
                self._pending.epoch = view.group_epoch
                if causes:
                    self._pending.cause += f", {cause}"
            self._last_epoch = view.group_epoch
            self._last_members = members
        if self._pending is not None and view.reconciled and view.assignment_epoch >= self._pending.epoch:
            self._pending.seconds = now - self._pending.started
            self._pending.members = len(view.members)
            self.rebalances.append(self._pending)
            self.say(f"rebalance to epoch {self._pending.epoch} done in {self._pending.seconds:.1f} s "
                     f"({self._pending.cause}); assignor {view.assignor or '-'}")
            self._pending = None
            self.table(monitor, view)
        elif now - self._last_sample >= 5.0 and view.reconciled and view.members:
            self.sample(monitor, view)
        return view

    def sample(self, monitor: GroupMonitor, view: GroupView) -> tuple[Offsets, LagSample]:
        offsets = monitor.offsets()
        live, ranged = monitor.spreads(view, offsets)
        names = self.names()
        lags = {names.get(m.member_id, m.member_id[:8]): GroupMonitor.lag_of(offsets, m.assignment)
                for m in view.members}
        s = LagSample(time.monotonic() - self.t0, live, ranged, sum(lags.values()), lags)
        self.samples.append(s)
        self._last_sample = time.monotonic()
        return offsets, s

    def table(self, monitor: GroupMonitor, view: GroupView) -> None:
        offsets, s = self.sample(monitor, view)
        names = self.names()
        rows = []
        for m in sorted(view.members, key=lambda m: names.get(m.member_id, m.member_id)):
            name = names.get(m.member_id, m.member_id[:8])
            records = self.drivers[name].progress().get("records", 0) if name in self.drivers else 0
            rows.append([name, str(m.epoch), str(len(m.assignment)), _compact(m.assignment),
                         str(GroupMonitor.lag_of(offsets, m.assignment)), str(records)])
        for line in _table(rows, ["MEMBER", "EPOCH", "#", "PARTITIONS", "LAG", "RECORDS"]).splitlines():
            self.out("    " + line)
        self.out(f"    lag spread (max-min member lag): lag-sticky {s.spread_live}, "
                 f"range on the same snapshot {s.spread_range}; total lag {s.total}")

    def wait(self, monitor: GroupMonitor, seconds: float, until: Callable[[GroupView | None], bool] | None = None,
             what: str = "") -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            view = self.poll(monitor)
            if until is not None and until(view):
                return True
            for name, d in self.drivers.items():
                if not d.alive() and d.progress().get("state") not in ("stopped", "draining"):
                    raise RuntimeError(f"driver {name} exited unexpectedly (code {d.proc.returncode}); "
                                       f"see {d.output / 'driver.log'}")
            time.sleep(0.25)
        if until is not None:
            raise RuntimeError(f"timed out after {seconds:.0f} s waiting for {what}")
        return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _compact(parts: frozenset[int]) -> str:
    """0,1,2,5,7,8 -> 0-2,5,7-8"""
    out: list[str] = []
    ps = sorted(parts)
    i = 0
    while i < len(ps):
        j = i
        while j + 1 < len(ps) and ps[j + 1] == ps[j] + 1:
            j += 1
        out.append(str(ps[i]) if i == j else f"{ps[i]}-{ps[j]}")
        i = j + 1
    return ",".join(out) or "-"


def _table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="groupcoord demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Needs Java 17 (Spark) and pyspark + pyarrow (the 'spark' or 'dev' extras). The default run takes "
               "about 3-4 minutes on 2 cores, --quick about 2.\n\nexample:\n  groupcoord demo --quick")
    p.add_argument("--quick", action="store_true", help="shorter phases and a lower rate (about 2 minutes)")
    p.add_argument("--output", default="demo-output",
                   help="directory for Parquet outputs and logs (default demo-output; replaced on each run)")
    p.add_argument("--rate", type=float, default=None, help="records/s produced in total (default 1500, quick 1000)")
    p.add_argument("--share-only", action="store_true",
                   help="run only the share-group act (three drivers on two partitions; about a minute)")
    p.add_argument("--steady", type=float, default=None,
                   help="seconds to run between membership changes (default 30, quick 8); the share-group act "
                        "produces for 8 s, or this if shorter")
    p.add_argument("--spark-master", default="local[1]", metavar="MASTER",
                   help="where the drivers run: local[1] (default: each driver is one JVM), spark://HOST:PORT (a "
                        "Spark standalone cluster: each driver takes one executor core, --cores-max 1) or "
                        "standalone (start a master and two 2-core workers on 127.0.0.1 for the run, from the "
                        "installed PySpark: groupcoord.spark_cluster)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(argv or []))
    plan = Plan.quick() if args.quick else Plan()
    if args.rate is not None:
        plan = Plan(**{**_asdict(plan), "rate": args.rate})
    if args.steady is not None:
        plan = Plan(**{**_asdict(plan), "steady_s": args.steady})
    if not (args.spark_master.startswith(("local", "spark://")) or args.spark_master == "standalone"):
        print(f"groupcoord demo: --spark-master {args.spark_master!r}: give local[N], spark://HOST:PORT or "
              "standalone", file=sys.stderr)
        return 2
    plan = Plan(**{**_asdict(plan), "spark_master": args.spark_master})
    if not args.spark_master.startswith("local"):  # a driver on a cluster also waits for its executor to start
        plan = Plan(**{**_asdict(plan), "start_timeout_s": plan.start_timeout_s + 90})
    missing = _missing_prerequisites()
    if missing:
        print(f"groupcoord demo: {missing}", file=sys.stderr)
        return 2
    output = Path(args.output).resolve()
    if output.exists() and any(output.iterdir()):
        if not (output / DEMO_MARKER).exists():
            print(f"groupcoord demo: {output} exists and was not made by the demo; choose another --output",
                  file=sys.stderr)
            return 2
        shutil.rmtree(output)
    output.mkdir(parents=True, exist_ok=True)
    (output / DEMO_MARKER).write_text("made by groupcoord demo; replaced by the next run\n")

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        with _spark_master(plan.spark_master, output) as (master, cluster_pids):
            plan = Plan(**{**_asdict(plan), "spark_master": master})
            if args.share_only:
                from groupcoord.demo_share import run_alone

                return run_alone(output, plan.driver_memory, plan.start_timeout_s,
                                 lambda line: print(line, flush=True), _driver_spark_args(plan))
            return _run(plan, output, keep=cluster_pids)
    except RuntimeError as e:
        print(f"groupcoord demo: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("groupcoord demo: interrupted; everything it started has been stopped", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _spark_master(master: str, output: Path) -> Iterator[tuple[str, tuple[int, ...]]]:
    """The master the drivers get, and the processes of a cluster started for the run (`master` "standalone")."""
    if master != "standalone":
        yield master, ()
        return
    from groupcoord.spark_cluster import SparkStandaloneCluster

    with SparkStandaloneCluster(2, cores=2, memory="1g", work_dir=output / "spark-cluster") as cluster:
        print(f"Spark standalone cluster at {cluster.master_url}: a master and two workers of 2 cores "
              f"(started in {cluster.start_seconds:.0f} s; executors' logs in {cluster.work_dir})", flush=True)
        yield cluster.master_url, cluster.pids


def _driver_spark_args(plan: Plan) -> tuple[str, ...]:
    """A driver's Spark flags: local mode, or one executor core of the cluster (so every driver gets one)."""
    if plan.spark_master.startswith("spark://"):
        return ("--master", plan.spark_master, "--cores-max", "1", "--executor-memory", "512m")
    return ("--master", plan.spark_master)


def _missing_prerequisites() -> str:
    """What the Spark drivers need and this machine lacks, said before anything starts."""
    import importlib.util

    lacking = [m for m in ("pyspark", "pyarrow") if importlib.util.find_spec(m) is None]
    if lacking:
        return (f"{' and '.join(lacking)} not installed: install the project with its 'spark' (or 'dev') extras, "
                "e.g. `make demo` or `pip install -e '.[spark]'`")
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and (Path(java_home) / "bin" / "java").exists()):
        return "Spark needs Java 17 (java on PATH or JAVA_HOME); none found"
    return ""


def _asdict(plan: Plan) -> dict[str, Any]:
    return {f: getattr(plan, f) for f in plan.__dataclass_fields__}


def _run(plan: Plan, output: Path, keep: tuple[int, ...] = ()) -> int:
    """The demo; `keep`: processes of ours that outlive it (a Spark cluster started for it, stopped after)."""
    from groupcoord.clients.spark_driver import DriverProcess, batch_ranges, coverage, process_tree
    from groupcoord.demo_share import SHARE_SECONDS, SHARE_SETTINGS, ShareAct
    from groupcoord.embedded_kafka import EmbeddedKafka

    def out(line: str) -> None:
        print(line, flush=True)

    demo = Demo(plan, output, out)
    topic = "events"
    kafka = EmbeddedKafka(topics={topic: plan.partitions})
    producer: SkewedProducer | None = None
    coordinator: CoordinatorProcess | None = None
    monitor: GroupMonitor | None = None
    share: ShareAct | None = None
    rc = 1
    try:
        demo.say(f"embedded Kafka at {kafka.bootstrap_servers}: topic {topic} with {plan.partitions} partitions")
        producer = SkewedProducer(kafka.bootstrap_servers, topic, plan.partitions, plan.rate, value_bytes=32).start()
        hot = sorted(range(plan.partitions), key=lambda p: -producer.weights[p])[:3]
        demo.say(f"producing {plan.rate:.0f} records/s, skewed: hottest partitions "
                 + ", ".join(f"{p} ({producer.weights[p] * plan.rate:.0f}/s)" for p in hot)
                 + f", coldest {min(producer.weights) * plan.rate:.0f}/s")
        coordinator = CoordinatorProcess(kafka.bootstrap_servers, output / "coordinator.log", {
            "group.consumer.assignors": "lag-sticky,uniform,range",
            "group.consumer.min.heartbeat.interval.ms": 100,
            "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.session.timeout.ms": 1000,
            "group.consumer.session.timeout.ms": 10000,
            "group.consumer.assignment.interval.ms": 500,
            **SHARE_SETTINGS,
        })
        coordinator.wait_ready()
        demo.say(f"coordinator serving on {coordinator.address} (assignors lag-sticky,uniform,range)")
        monitor = GroupMonitor(coordinator.address, kafka.bootstrap_servers, topic, plan.partitions)
        monitor.set_auto_offset_reset_earliest()

        def driver(name: str, *extra: str) -> Any:
            d = DriverProcess(name, output / name, [*extra,
                "--coordinator", coordinator.address if coordinator else "", "--group", GROUP, "--topic", topic,
                "--bootstrap-servers", kafka.bootstrap_servers, "--starting-offsets", "earliest",
                "--server-assignor", "lag-sticky", "--sink", "aggregate", "--trigger-ms", str(plan.trigger_ms),
                "--max-offsets-per-trigger", str(plan.max_offsets_per_trigger), *_driver_spark_args(plan),
                "--driver-memory", plan.driver_memory]).start()
            demo.drivers[name] = d
            return d

        def members_are(n: int) -> Callable[[GroupView | None], bool]:
            def check(view: GroupView | None) -> bool:
                return (view is not None and len(view.members) == n and view.reconciled
                        and demo._pending is None)
            return check

        def processing(*names: str) -> Callable[[GroupView | None], bool]:
            def check(view: GroupView | None) -> bool:
                return all(demo.drivers[n].progress().get("records", 0) > 0 for n in names)
            return check

        demo.say(f"starting Spark drivers d1, d2 and d3 ({plan.spark_master}, spark.driver.memory "
                 f"{plan.driver_memory}); d1 and d2 join when Spark is up, d3 waits to be added")
        go = output / "d3-go"
        driver("d1")
        driver("d2")
        driver("d3", "--wait-for", str(go))
        demo.wait(monitor, plan.start_timeout_s, members_are(2), "d1 and d2 to join")
        demo.wait(monitor, plan.start_timeout_s, processing("d1", "d2"), "d1 and d2 to process records")
        demo.wait(monitor, plan.steady_s)
        demo.wait(monitor, plan.start_timeout_s, lambda _: demo.drivers["d3"].progress().get("state") == "waiting",
                  "d3's Spark to start")
        demo.say("adding d3 to the group")
        go.write_text("go\n")
        demo.wait(monitor, plan.start_timeout_s, members_are(3), "d3 to join")
        demo.wait(monitor, plan.steady_s)
        demo.say("stopping d1 (SIGTERM: it commits its last batch, then leaves)")
        stopping = threading.Thread(target=demo.drivers["d1"].terminate, name="stop-d1", daemon=True)
        stopping.start()
        demo.wait(monitor, plan.start_timeout_s, members_are(2), "d1 to leave")
        demo.wait(monitor, plan.steady_s)
        stopping.join(60)
        demo.say("stopping the producer; waiting for d2 and d3 to catch up")
        producer.stop()

        def caught_up(view: GroupView | None) -> bool:
            assert monitor is not None
            offsets = monitor.offsets()
            return all(c is not None and c >= end for _, end, c in offsets.values())

        demo.wait(monitor, plan.catch_up_timeout_s, caught_up, "the drivers to catch up")
        demo.say("all records committed; stopping d2 and d3")
        stoppers = [threading.Thread(target=d.terminate, daemon=True) for d in demo.drivers.values()]
        for t in stoppers:
            t.start()
        # the share act's drivers start their Spark while d2 and d3 stop and the summary is drawn
        share = ShareAct(kafka, coordinator.address, output, demo.say, out,
                         seconds=min(SHARE_SECONDS, plan.steady_s)).prepare(plan.driver_memory,
                                                                            _driver_spark_args(plan))
        for t in stoppers:
            t.join(90)
        _summary(demo, monitor, batch_ranges, coverage, output)
        _plots(demo, output)
        out("")
        share.run(plan.start_timeout_s)
        rc = 0
    finally:
        if rc != 0 and demo.samples:  # a run cut short still draws what it saw (figures help say why)
            try:
                _plots(demo, output)
            except Exception as e:  # never hide the run's own error behind a drawing error
                demo.say(f"could not draw the figures: {e}")
        for d in demo.drivers.values():
            with contextlib.suppress(Exception):
                d.terminate(30)
        if share is not None:
            share.stop()
        if producer is not None:
            with contextlib.suppress(Exception):
                producer.stop()
        if monitor is not None:
            monitor.close()
        if coordinator is not None:
            coordinator.stop()
        kept = {p for k in keep for p in process_tree(k)}
        leftovers = [p for p in process_tree(os.getpid()) if p != os.getpid() and p not in kept and _alive(p)]
        for pid in leftovers:  # none expected; never leave anything running
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        kafka.close()  # last: every reader of it has stopped
        demo.say("stopped: drivers, coordinator, producer, embedded Kafka"
                 + (f" (killed {len(leftovers)} leftover processes)" if leftovers else ""))
    return rc


def _summary(demo: Demo, monitor: GroupMonitor, batch_ranges: Any, coverage: Any, output: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    offsets = monitor.offsets()
    produced = {(monitor.topic, p): (start, end) for p, (start, end, _) in offsets.items()}
    cov = coverage(batch_ranges([d.output for d in demo.drivers.values()]), produced)
    out = demo.out
    out("")
    out("summary")
    out(f"  records produced {cov.produced}, processed {cov.processed}, missing {cov.missing}, "
        f"duplicates {cov.duplicates} (no driver crashed, so 0 is expected)")
    dropped = sum(start for start, _, _ in offsets.values())
    if dropped:
        out(f"  (the embedded Kafka keeps ~5 MB per partition and dropped {dropped} old records; they are not "
            "counted)")
    per_driver = ", ".join(f"{n} {d.progress().get('records', 0)}" for n, d in demo.drivers.items())
    out(f"  per driver: {per_driver}")
    out("  rebalances (group epoch bump -> every member holds its target):")
    for r in demo.rebalances:
        out(f"    epoch {r.epoch:<3} {r.seconds or 0:5.1f} s  {r.members} member(s)  {r.cause}")
    if demo.samples:
        live = [s.spread_live for s in demo.samples]
        ranged = [s.spread_range for s in demo.samples]
        out(f"  lag spread, max-min member lag over {len(live)} samples (records): "
            f"lag-sticky mean {sum(live) / len(live):.0f} max {max(live)}; "
            f"range on the same snapshots mean {sum(ranged) / len(ranged):.0f} max {max(ranged)}")
    files = [p for d in demo.drivers.values() for p in sorted((d.output / "batches").glob("*.parquet"))]
    if files:
        table = pa.concat_tables([pq.read_table(p, columns=["key", "records"]) for p in files])
        totals = table.group_by("key").aggregate([("records", "sum")]).sort_by([("records_sum", "descending")])
        top = totals.slice(0, 3).to_pylist()
        out(f"  per-key aggregates: {totals.num_rows} keys in {len(files)} Parquet batch files under {output}; "
            "top: " + ", ".join(f"{r['key'].decode()}={r['records_sum']}" for r in top))


def _plots(demo: Demo, output: Path) -> None:
    """demo-output/*.png: the lags and rebalances the summary prints, as pictures (README: "Plots")."""
    from groupcoord import plots

    series: dict[str, list[tuple[float, int]]] = {}
    for s in demo.samples:
        for name, lag in s.members.items():
            series.setdefault(name, []).append((s.at, lag))
    spans = [(r.started - demo.t0, r.started - demo.t0 + (r.seconds or 0)) for r in demo.rebalances]
    written = [
        plots.demo_member_lag(series, spans, output / "member-lag.png"),
        plots.demo_lag_spread([(s.at, s.spread_live, s.spread_range) for s in demo.samples],
                              output / "lag-sticky-vs-range.png"),
        plots.demo_rebalances([(f"epoch {r.epoch}: {r.cause}"[:60], a, b)
                               for r, (a, b) in zip(demo.rebalances, spans, strict=True)],
                              output / "rebalances.png"),
    ]
    demo.out("  plots: " + ", ".join(str(p) for p in written))
