"""Two Spark applications on one topic: what groupcoord's source does that Spark's own Kafka source cannot.

    python -m bench.spark_shared_topic [--quick] [--master standalone|local[1]|spark://...]

One run, on the real Kafka 4.4 broker, ``groupcoord serve`` and a Spark standalone cluster (two 2-core workers;
every driver takes one executor core), three acts with the same producer (skewed rates, fixed seed):

1. consumer group: two drivers (``format("groupcoord")``, ``server.assignor=lag-sticky``) share a 6-partition
   topic: each reads the partitions the group gives it, and every record is published once;
2. share group: three drivers on a 2-partition topic (``group.type=share``): more drivers than partitions, all
   busy (the demo's share act, `groupcoord.demo_share`);
3. Spark's source: two drivers (``format("kafka")``) on a 6-partition topic: each application reads every
   partition (Spark has no consumer group: positions live in each query's checkpoint), so every record is
   processed twice.

Per application: records processed, its part of what was produced; per act: duplicates, missing, and the lag
spread (max - min application lag, sampled every second while producing; an application's lag is the records
produced to the partitions it reads and not yet processed).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PARTITIONS = 6


@dataclass
class Act:
    name: str
    produced: int = 0
    per_app: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    missing: int = 0
    spreads: list[int] = field(default_factory=list)
    note: str = ""


def _wait(what: str, timeout_s: float, done: Any, drivers: list[Any]) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        for d in drivers:
            if not d.alive() and d.progress().get("state") not in ("stopped", "draining"):
                raise RuntimeError(f"driver {d.name} exited; see {d.output / 'driver.log'}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.25)


def _ends(bootstrap: str, topic: str) -> dict[tuple[str, int], tuple[int, int]]:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap, "log.connection.close": False})
    futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)},
                                 request_timeout=10)
    return {(topic, tp.partition): (0, f.result(timeout=10).offset) for tp, f in futures.items()}


def two_applications(kind: str, env: dict[str, Any], args: argparse.Namespace, output: Path) -> Act:
    """Act 1 (kind "groupcoord") or 3 (kind "kafka"): two drivers, one topic, the same producer."""
    from groupcoord.clients.spark_driver import DriverProcess, batch_ranges, coverage
    from groupcoord.demo_monitor import GROUP, GroupMonitor
    from groupcoord.demo_processes import SkewedProducer

    topic = f"shared-{kind}"
    env["broker"].create_topic(topic, PARTITIONS)
    go = output / f"{kind}-go"
    common = ["--bootstrap-servers", env["bootstrap"], "--topic", topic, "--sink", "rows", "--starting-offsets",
              "earliest", "--trigger-ms", "500", "--max-offsets-per-trigger", "2000", "--wait-for", str(go),
              *env["spark_args"]]
    if kind == "groupcoord":
        common += ["--coordinator", env["coordinator"], "--group", GROUP, "--server-assignor", "lag-sticky"]
    else:
        common += ["--source", "kafka", "--jars", ",".join(env["jars"]), "--group", "unused"]
    names = ("g1", "g2") if kind == "groupcoord" else ("k1", "k2")
    drivers = [DriverProcess(n, output / n, common).start() for n in names]
    monitor = GroupMonitor(env["coordinator"], env["bootstrap"], topic, PARTITIONS) if kind == "groupcoord" else None
    act = Act("consumer group, lag-sticky" if kind == "groupcoord" else "Spark's Kafka source")
    producer: Any = None
    try:
        if monitor is not None:
            monitor.set_auto_offset_reset_earliest()
        _wait("Spark to start", args.start_timeout, lambda: all(d.progress().get("state") == "waiting"
                                                                 for d in drivers), drivers)
        producer = SkewedProducer(env["bootstrap"], topic, PARTITIONS, args.rate, value_bytes=32).start()
        go.write_text("go\n")
        _wait("both applications to process records", args.start_timeout,
              lambda: all(d.progress().get("records", 0) > 0 for d in drivers), drivers)
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            act.spreads.append(_spread(monitor, drivers, producer))
            time.sleep(1.0)
    finally:
        if producer is not None:
            producer.stop()
    produced = _ends(env["bootstrap"], topic)
    total = sum(e for _, e in produced.values())
    try:
        if monitor is not None:
            _wait("the group to commit every record", args.start_timeout, lambda: all(
                c is not None and c >= e for _, e, c in monitor.offsets().values()), drivers)
        else:
            _wait("each application to read every record", args.start_timeout,
                  lambda: all(d.progress().get("records", 0) >= total for d in drivers), drivers)
    finally:
        for d in drivers:
            d.terminate(60)
        if monitor is not None:
            monitor.close()
    cov = coverage(batch_ranges([d.output for d in drivers]), produced)
    act.produced, act.duplicates, act.missing = cov.produced, cov.duplicates, cov.missing
    act.per_app = {d.name: sum(r.records for r in batch_ranges([d.output])) for d in drivers}
    return act


def _spread(monitor: Any, drivers: list[Any], producer: Any) -> int:
    """max - min application lag now."""
    if monitor is not None:
        view = monitor.describe()
        if view is None or not view.members:
            return 0
        offsets = monitor.offsets()
        lags = [monitor.lag_of(offsets, m.assignment) for m in view.members]
    else:  # each application reads every partition: its lag is what was produced and it has not read
        produced = sum(producer.produced)
        lags = [max(0, produced - int(d.progress().get("records", 0))) for d in drivers]
    return max(lags) - min(lags) if lags else 0


def share_group(env: dict[str, Any], output: Path, start_timeout_s: float) -> Act:
    from groupcoord.demo_share import ShareAct

    lines: list[str] = []
    act = ShareAct(env["broker"], env["coordinator"], output, lambda s: print(f"  {s}", flush=True),
                   lines.append).prepare("512m", tuple(env["spark_args"]))
    try:
        result = act.run(start_timeout_s, catch_up_s=start_timeout_s)
    finally:
        act.stop()
    return Act("share group, 3 drivers / 2 partitions", result["produced"], result["per_driver"],
               result["duplicates"], result["missing"], note="lag spread: not sampled (queue: any driver takes any "
               "record)")


def print_table(acts: list[Act]) -> None:
    print(f"{'act':<40} {'application':<11} {'records':>9} {'of produced':>11} {'duplicates':>10} {'missing':>8} "
          f"{'lag spread mean/max':>20}")
    for a in acts:
        spread = (f"{statistics.mean(a.spreads):,.0f} / {max(a.spreads):,}" if a.spreads else "-")
        for i, (app, n) in enumerate(sorted(a.per_app.items())):
            first = i == 0
            print(f"{a.name if first else '':<40} {app:<11} {n:>9,} {n / a.produced if a.produced else 0:>10.0%} "
                  f"{(f'{a.duplicates:,}' if first else ''):>10} {(f'{a.missing:,}' if first else ''):>8} "
                  f"{(spread if first else ''):>20}")
        print(f"{'':<40} {'(produced)':<11} {a.produced:>9,}")
    for a in acts:
        if a.note:
            print(f"{a.name}: {a.note}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.spark_shared_topic", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", type=float, default=600.0, help="records/s produced in each act (default 600)")
    p.add_argument("--seconds", type=float, default=30.0, help="seconds of producing once both apps process")
    p.add_argument("--master", default="standalone", help="standalone (started here), local[1] or spark://...")
    p.add_argument("--start-timeout", type=float, default=300.0)
    p.add_argument("--quick", action="store_true", help="15 s of producing per act")
    args = p.parse_args(argv)
    if args.quick:
        args.seconds = 15.0

    from groupcoord.demo_processes import CoordinatorProcess
    from groupcoord.demo_share import SHARE_SETTINGS
    from groupcoord.kafka_broker import KafkaBroker
    from groupcoord.spark_cluster import SparkStandaloneCluster
    from groupcoord.spark_kafka_jars import kafka_source_jars

    jars = kafka_source_jars()
    output = Path(tempfile.mkdtemp(prefix="spark-shared-topic-"))
    print(f"outputs and logs in {output}; PySpark {jars.pyspark_version}, spark-sql-kafka-0-10 {jars.version}",
          flush=True)
    acts: list[Act] = []
    with contextlib.ExitStack() as stack:
        broker = stack.enter_context(KafkaBroker(1))
        coordinator = CoordinatorProcess(broker.bootstrap_servers, output / "coordinator.log", {
            "group.consumer.assignors": "lag-sticky,uniform,range",
            "group.consumer.min.heartbeat.interval.ms": 100, "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.session.timeout.ms": 1000, "group.consumer.session.timeout.ms": 10000,
            "group.consumer.assignment.interval.ms": 500, **SHARE_SETTINGS})
        stack.callback(coordinator.stop)
        coordinator.wait_ready()
        master, spark_args = args.master, ["--master", args.master]
        if master == "standalone" or master.startswith("spark://"):
            if master == "standalone":
                cluster = stack.enter_context(SparkStandaloneCluster(2, cores=2, memory="1g"))
                master = cluster.master_url
                print(f"Spark standalone cluster at {master} (started in {cluster.start_seconds:.0f} s)", flush=True)
            spark_args = ["--master", master, "--cores-max", "1", "--executor-memory", "512m"]
        env = {"broker": broker, "bootstrap": broker.bootstrap_servers, "coordinator": coordinator.address,
               "spark_args": spark_args, "jars": list(jars.jars)}
        for title, play in (("1. two applications, one consumer group (groupcoord, lag-sticky)",
                             lambda: two_applications("groupcoord", env, args, output)),
                            ("2. three applications, one share group on two partitions (groupcoord)",
                             lambda: share_group(env, output, args.start_timeout)),
                            ("3. two applications with Spark's Kafka source",
                             lambda: two_applications("kafka", env, args, output))):
            print(title, flush=True)
            started = time.monotonic()
            try:
                acts.append(play())
            except RuntimeError as e:  # a busy machine can time an act out: say so, and play the others
                acts.append(Act(title[3:], note=f"did not finish: {e}"))
            print(f"  done in {time.monotonic() - started:.0f} s", flush=True)
            print_table(acts[-1:])
    print()
    print_table(acts)
    return 0 if not any(a.note.startswith("did not finish") for a in acts) else 1


if __name__ == "__main__":
    sys.exit(main())
