"""Spark's own Kafka source against groupcoord's, side by side: same topic, same records, same machine, one run.

    python -m bench.spark_vs_kafka_source [--quick] [--rounds 2] [--master standalone|local[2]|spark://...]

What runs: the real Kafka 4.4 broker (groupcoord.kafka_broker), ``groupcoord serve`` on it, a Spark standalone
cluster of two 1-core workers (groupcoord.spark_cluster; ``--master local[2]`` runs without one), and, in turn,
one new Spark driver per source and round (`bench.spark_side_by_side_driver`), alternated (G K, then K G, ...):
``spark.readStream.format("kafka")`` (spark-sql-kafka-0-10 from Maven Central, groupcoord.spark_kafka_jars) and
``format("groupcoord")``, with the same trigger, ``maxOffsetsPerTrigger``, executors and ``foreachBatch`` sink.

Each driver reads a backlog topic (the same records every time, from the earliest offset), then a new empty
topic into which this launcher produces at a fixed rate. Figures per driver:

- first batch: seconds from launching the driver process to its first batch's sink returning;
- steady records/s: backlog rows after the first batch / time from the first batch's end to the last's;
- latency p50/p99: live records, from the producer's timestamp to the sink returning;
- driver and executor CPU from /proc (utime+stime, with reaped children): the driver process tree (its Python,
  its JVM, the Python reader), and the executors of its application (JVMs and their Python workers). Backlog:
  CPU microseconds per record over the steady batches; live: cores used while producing at the rate.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_CLK = os.sysconf("SC_CLK_TCK")


# --- CPU from /proc ---------------------------------------------------------------------------------------------
def _cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / _CLK  # utime stime cutime cstime


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def _tree(roots: list[int], children: dict[int, list[int]]) -> list[int]:
    out, todo = [], list(roots)
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _executors(app_id: str) -> list[int]:
    """Executor JVMs of one application (``CoarseGrainedExecutorBackend ... --app-id APP``)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmd and app_id.encode() in cmd:
                out.append(int(entry.name))
    return out


@dataclass
class CpuSample:
    driver: float
    executors: float
    coordinator: float
    at: float


def sample(driver_pid: int, app_id: str | None, coordinator_pid: int | None) -> CpuSample:
    children = _children()
    driver = sum(_cpu_s(p) for p in _tree([driver_pid], children))
    executors = sum(_cpu_s(p) for p in _tree(_executors(app_id), children)) if app_id else 0.0
    coordinator = _cpu_s(coordinator_pid) if coordinator_pid else 0.0
    return CpuSample(driver, executors, coordinator, time.monotonic())


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# --- producing --------------------------------------------------------------------------------------------------
def produce_backlog(bootstrap: str, topic: str, partitions: int, records: int, value_bytes: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 500000, "log.connection.close": False})
    value = b"v" * value_bytes
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=b"key-%04d" % (i % 1000), value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
            if i % 100_000 == 0:
                print(f"  backlog: {i:,} of {records:,} produced", flush=True)
    if producer.flush(60) != 0:
        raise RuntimeError("the producer could not deliver every record")
    del producer  # destroyed now: it must not outlive the broker


def produce_live(bootstrap: str, topic: str, partitions: int, rate: float, seconds: float,
                 value_bytes: int) -> int:
    """`rate` records/s for `seconds`, in 5 ms slices; each record's timestamp is the time produce() was called."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "log.connection.close": False})
    value = b"v" * value_bytes
    start = time.monotonic()
    sent = 0
    while (now := time.monotonic()) < start + seconds:
        due = int((now - start) * rate)
        while sent < due:
            producer.produce(topic, key=b"key-%04d" % (sent % 1000), value=value, partition=sent % partitions)
            sent += 1
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(30)
    del producer  # destroyed now: it must not outlive the broker
    return sent


# --- one driver ---------------------------------------------------------------------------------------------------
@dataclass
class Run:
    source: str
    round: int
    first_batch_s: float = float("nan")
    steady_rate: float = float("nan")
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")
    driver_us_per_record: float = float("nan")
    executor_us_per_record: float = float("nan")
    driver_cores_live: float = float("nan")
    executor_cores_live: float = float("nan")
    coordinator_cores_live: float = float("nan")
    live_records: int = 0
    live_seen: int = 0
    backlog_batches: int = 0
    durations: dict[str, list[dict[str, int]]] = field(default_factory=dict)  # phase -> Spark's durationMs
    notes: list[str] = field(default_factory=list)


def _events(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def _percentile(hist: dict[int, int], q: float) -> float:
    total = sum(hist.values())
    if total == 0:
        return float("nan")
    rank, seen = q * (total - 1), 0
    for latency in sorted(hist):
        seen += hist[latency]
        if seen > rank:
            return float(latency)
    return float(max(hist))


def run_driver(source: str, rnd: int, args: argparse.Namespace, env: dict[str, Any], workdir: Path) -> Run:
    run = Run(source, rnd)
    events_path = workdir / f"{source}-{rnd}.events.jsonl"
    live_topic = f"live-{source}-{rnd}-{uuid.uuid4().hex[:6]}"
    env["broker"].create_topic(live_topic, args.partitions)
    argv = [sys.executable, "-m", "bench.spark_side_by_side_driver", "--source", source, "--events",
            str(events_path), "--bootstrap-servers", env["bootstrap"], "--coordinator", env["coordinator"],
            "--backlog-topic", env["backlog_topic"], "--backlog-records", str(args.records),
            "--live-topic", live_topic, "--master", env["master"], "--cores-max", str(args.cores),
            "--tasks-per-batch", str(args.cores), "--trigger-ms", str(args.trigger_ms),
            "--max-offsets-per-trigger", str(args.per_batch), "--jars", ",".join(env["jars"])]
    log = open(workdir / f"{source}-{rnd}.log", "wb")  # noqa: SIM115 - closed below
    launched = time.time()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=str(Path(__file__).resolve().parents[1]))
    coordinator_pid = env.get("coordinator_pid") if source == "groupcoord" else None
    app_id: str | None = None
    first: CpuSample | None = None
    try:
        deadline = time.monotonic() + args.timeout
        state = "backlog"
        live_start: CpuSample | None = None
        while time.monotonic() < deadline:
            evs = _events(events_path)
            app_id = next((e["app_id"] for e in evs if e["kind"] == "started"), None)
            if any(e["kind"] == "error" for e in evs) or proc.poll() is not None:
                raise RuntimeError(f"{source} driver failed: {[e for e in evs if e['kind'] == 'error']}; "
                                   f"see {workdir}/{source}-{rnd}.log")
            backlog = [e for e in evs if e["kind"] == "batch" and e["phase"] == "backlog"]
            if first is None and backlog:
                first = sample(proc.pid, app_id, coordinator_pid)
                run.first_batch_s = backlog[0]["end_ms"] / 1000 - launched
            if state == "backlog" and any(e["kind"] == "phase" and e["phase"] == "backlog" for e in evs):
                end = sample(proc.pid, app_id, coordinator_pid)
                steady = backlog[1:]
                rows = sum(e["rows"] for e in steady)
                span = (backlog[-1]["end_ms"] - backlog[0]["end_ms"]) / 1000
                run.backlog_batches = len(backlog)
                if rows and span > 0 and first is not None:
                    run.steady_rate = rows / span
                    run.driver_us_per_record = (end.driver - first.driver) / rows * 1e6
                    run.executor_us_per_record = (end.executors - first.executors) / rows * 1e6
                state = "waiting-live"
            if state == "waiting-live" and any(e["kind"] == "phase" and e["phase"] == "live" for e in evs):
                time.sleep(2.0)  # a few empty triggers: the query is polling the topic
                live_start = sample(proc.pid, app_id, coordinator_pid)
                run.live_records = produce_live(env["bootstrap"], live_topic, args.partitions, args.live_rate,
                                                args.live_seconds, args.value_bytes)
                state = "live"
            if state == "live":
                live = [e for e in evs if e["kind"] == "batch" and e["phase"] == "live"]
                run.live_seen = sum(e["rows"] for e in live)
                if run.live_seen >= run.live_records:
                    end = sample(proc.pid, app_id, coordinator_pid)
                    assert live_start is not None
                    wall = end.at - live_start.at
                    run.driver_cores_live = (end.driver - live_start.driver) / wall
                    run.executor_cores_live = (end.executors - live_start.executors) / wall
                    if coordinator_pid:
                        run.coordinator_cores_live = (end.coordinator - live_start.coordinator) / wall
                    hist: dict[int, int] = {}
                    for e in live:
                        for latency, n in e["latency"]:
                            hist[int(latency)] = hist.get(int(latency), 0) + int(n)
                    run.p50_ms, run.p99_ms = _percentile(hist, 0.50), _percentile(hist, 0.99)
                    break
            time.sleep(0.2)
        else:
            run.notes.append(f"timed out in phase {state}")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        log.close()
    for e in _events(events_path):
        if e["kind"] == "progress":
            run.durations[e["phase"]] = e["durations"]
    if run.live_seen > run.live_records:
        run.notes.append(f"{run.live_seen - run.live_records} live rows more than produced")
    return run


# --- the table ---------------------------------------------------------------------------------------------------
COLUMNS = [("source", "{:<22}"), ("round", "{:>5}"), ("first batch s", "{:>13.1f}"),
           ("steady rec/s", "{:>12,.0f}"), ("p50 ms", "{:>7.0f}"), ("p99 ms", "{:>7.0f}"),
           ("driver us/rec", "{:>13.2f}"), ("exec us/rec", "{:>11.2f}"), ("driver cores", "{:>12.2f}"),
           ("exec cores", "{:>10.2f}"), ("coord cores", "{:>11.2f}")]


def _row(label: str, rnd: str, values: list[float]) -> str:
    cells = [COLUMNS[0][1].format(label), COLUMNS[1][1].format(rnd)]
    for (_, fmt), v in zip(COLUMNS[2:], values, strict=True):
        width = int("".join(c for c in fmt.split(":")[1].split(".")[0].split(",")[0] if c.isdigit()))
        cells.append(" " * (width - 1) + "-" if v != v else fmt.format(v))  # NaN: not measured
    return "  ".join(cells)


def _values(r: Run) -> list[float]:
    return [r.first_batch_s, r.steady_rate, r.p50_ms, r.p99_ms, r.driver_us_per_record, r.executor_us_per_record,
            r.driver_cores_live, r.executor_cores_live, r.coordinator_cores_live]


def print_table(runs: list[Run], label: dict[str, str]) -> None:
    header = "  ".join([f"{COLUMNS[0][0]:<22}", f"{COLUMNS[1][0]:>5}"]
                       + [f"{name:>{int(''.join(c for c in fmt.split(':')[1].split('.')[0] if c.isdigit()))}}"
                          for name, fmt in COLUMNS[2:]])
    print(header)
    for r in runs:
        print(_row(label[r.source], str(r.round), _values(r)))
    for source in label:
        mine = [_values(r) for r in runs if r.source == source]
        if mine:
            medians = [statistics.median([v[i] for v in mine if v[i] == v[i]] or [float("nan")])
                       for i in range(len(mine[0]))]
            print(_row(label[source], "med", medians))


STAGES = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets", "triggerExecution")


def print_stages(runs: list[Run], label: dict[str, str]) -> None:
    """Median milliseconds per non-empty trigger, by Spark's progress stages (recentProgress keeps the last 100)."""
    print(f"{'source':<22}  {'phase':<7}  {'triggers':>8}  " + "  ".join(f"{s:>16}" for s in STAGES))
    for source in label:
        for phase in ("backlog", "live"):
            rows = [d for r in runs if r.source == source for d in r.durations.get(phase, [])]
            if rows:
                cells = [statistics.median([d.get(s, 0) for d in rows]) for s in STAGES]
                print(f"{label[source]:<22}  {phase:<7}  {len(rows):>8}  " + "  ".join(f"{c:>16,.0f}" for c in cells))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.spark_vs_kafka_source", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=400_000, help="backlog records (default 400,000)")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--per-batch", type=int, default=50_000, help="maxOffsetsPerTrigger (default 50,000)")
    p.add_argument("--trigger-ms", type=int, default=500, help="processing-time trigger (default 500)")
    p.add_argument("--live-rate", type=float, default=2000.0, help="live records/s (default 2,000)")
    p.add_argument("--live-seconds", type=float, default=20.0)
    p.add_argument("--rounds", type=int, default=2, help="rounds; each runs both sources, order alternating")
    p.add_argument("--master", default="standalone",
                   help="standalone (a cluster of two 1-core workers, started here), local[N] or spark://...")
    p.add_argument("--cores", type=int, default=2, help="executor cores per application (default 2)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per driver at most")
    p.add_argument("--quick", action="store_true", help="150,000 backlog records, 10 s live, one round")
    args = p.parse_args(argv)
    if args.quick:
        args.records, args.live_seconds, args.rounds = 150_000, 10.0, 1

    from groupcoord.demo_processes import CoordinatorProcess
    from groupcoord.kafka_broker import KafkaBroker
    from groupcoord.spark_cluster import SparkStandaloneCluster
    from groupcoord.spark_kafka_jars import kafka_source_jars

    jars = kafka_source_jars()
    workdir = Path(tempfile.mkdtemp(prefix="spark-side-by-side-"))
    print(f"{os.cpu_count()} cores, load average {_load()}; {args.records:,} backlog records of {args.value_bytes} B "
          f"in {args.partitions} "
          f"partitions; maxOffsetsPerTrigger {args.per_batch:,}; trigger {args.trigger_ms} ms; live "
          f"{args.live_rate:,.0f} records/s for {args.live_seconds:.0f} s; PySpark {jars.pyspark_version}, "
          f"spark-sql-kafka-0-10 {jars.version}; logs in {workdir}", flush=True)
    with KafkaBroker(1) as broker:
        backlog_topic = "backlog"
        broker.create_topic(backlog_topic, args.partitions)
        started = time.monotonic()
        produce_backlog(broker.bootstrap_servers, backlog_topic, args.partitions, args.records, args.value_bytes)
        print(f"Kafka 4.4 broker at {broker.bootstrap_servers}; backlog produced in "
              f"{time.monotonic() - started:.1f} s", flush=True)
        coordinator = CoordinatorProcess(broker.bootstrap_servers, workdir / "coordinator.log", {
            "group.consumer.min.heartbeat.interval.ms": 100, "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 10000})
        cluster: SparkStandaloneCluster | None = None
        try:
            coordinator.wait_ready()
            master = args.master
            if master == "standalone":
                cluster = SparkStandaloneCluster(2, cores=1, memory="1g")
                master = cluster.master_url
                print(f"Spark standalone cluster at {master}: 2 workers of 1 core, executors of 512m "
                      f"(started in {cluster.start_seconds:.1f} s)", flush=True)
            env = {"broker": broker, "bootstrap": broker.bootstrap_servers, "coordinator": coordinator.address,
                   "coordinator_pid": coordinator.proc.pid, "backlog_topic": backlog_topic, "master": master,
                   "jars": list(jars.jars)}
            runs: list[Run] = []
            for rnd in range(1, args.rounds + 1):
                order = ["groupcoord", "kafka"] if rnd % 2 else ["kafka", "groupcoord"]
                for source in order:
                    print(f"round {rnd}: {source} driver ...", flush=True)
                    run = run_driver(source, rnd, args, env, workdir)
                    runs.append(run)
                    print(f"  first batch {run.first_batch_s:.1f} s, steady {run.steady_rate:,.0f} records/s over "
                          f"{run.backlog_batches} batches, live p50 {run.p50_ms:.0f} ms p99 {run.p99_ms:.0f} ms "
                          f"({run.live_seen:,}/{run.live_records:,} live rows) {' '.join(run.notes)}", flush=True)
        finally:
            if cluster is not None:
                cluster.close()
            coordinator.stop()
    print()
    labels = {"kafka": 'format("kafka")', "groupcoord": 'format("groupcoord")'}
    print_table(runs, labels)
    print("\nmedian ms per non-empty trigger, by Spark's progress stages (addBatch: the tasks and the sink)")
    print_stages(runs, labels)
    print(f"\nload average at the end: {_load()} (other work on the machine slows both sources alike; the "
          "rounds alternate which goes first)")
    print("us/rec: CPU microseconds per backlog record (steady batches); cores: CPU while live records flow; "
          "coord: the groupcoord coordinator process (Spark's source has none).")
    return 0 if all(not r.notes for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
