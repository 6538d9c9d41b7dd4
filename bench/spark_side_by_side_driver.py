"""One Spark driver of `bench.spark_vs_kafka_source`: a backlog query, then a live query, with one sink.

    python -m bench.spark_side_by_side_driver --source kafka|groupcoord --events FILE --bootstrap-servers B \\
        --backlog-topic T --backlog-records N --live-topic L [--coordinator HOST:PORT] ...

Both sources get the same session (`spark_session`, with Spark's Kafka jars on the class path for both), the
same processing-time trigger, the same ``maxOffsetsPerTrigger`` and the same ``foreachBatch`` sink: a count of
rows per record timestamp (millisecond), computed by Spark and collected; the sink then stamps the batch with
the wall clock. A record's end-to-end latency is that stamp minus its Kafka timestamp (CreateTime, set by the
producer when it produced the record, on the same machine).

1. backlog: read ``--backlog-topic`` from the earliest offset until ``--backlog-records`` rows were seen;
2. live: read ``--live-topic`` (created empty by the launcher) from the earliest offset until SIGTERM; the
   launcher produces into it at a fixed rate once this driver says the query runs.

Events go to ``--events`` as JSON lines: ``started`` (application id), ``batch`` (phase, rows, end time,
latency histogram), ``phase`` (backlog done, live running), ``stopped``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any


class Events:
    def __init__(self, path: Path) -> None:
        self._f = open(path, "a", buffering=1)  # noqa: SIM115 - closed in main
        self._lock = threading.Lock()

    def emit(self, kind: str, **fields: Any) -> None:
        with self._lock:
            self._f.write(json.dumps({"kind": kind, "time": time.time(), **fields}) + "\n")

    def close(self) -> None:
        self._f.close()


def _reader(spark: Any, args: argparse.Namespace, topic: str, group: str) -> Any:
    if args.source == "kafka":
        return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", args.bootstrap_servers)
                .option("subscribe", topic).option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger)))
    from groupcoord.clients.spark_source import GroupcoordDataSource

    spark.dataSource.register(GroupcoordDataSource)
    return (spark.readStream.format("groupcoord").option("coordinator", args.coordinator)
            .option("group", group).option("subscribe", topic)
            .option("kafka.bootstrap.servers", args.bootstrap_servers).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
            .option("tasksPerBatch", str(args.tasks_per_batch))
            .option("status.file", str(Path(args.events).with_suffix(f".{group}.status.json"))))


def _run_query(spark: Any, args: argparse.Namespace, phase: str, topic: str, events: Events,
               stop: threading.Event, until_rows: int | None) -> int:
    from pyspark.sql import functions as F

    seen = 0
    checkpoint = tempfile.mkdtemp(prefix=f"bench-{phase}-")

    def sink(batch: Any, batch_id: int) -> None:
        nonlocal seen
        rows = batch.groupBy(F.unix_millis("timestamp").alias("ms")).count().collect()
        done_ms = time.time() * 1000
        n = sum(int(r["count"]) for r in rows)
        if n == 0:
            return
        seen += n
        hist: dict[int, int] = {}
        for r in rows:
            if r["ms"] is not None:
                latency = max(0, int(done_ms - r["ms"]))
                hist[latency] = hist.get(latency, 0) + int(r["count"])
        events.emit("batch", phase=phase, batch_id=batch_id, rows=n, end_ms=done_ms,
                    latency=sorted(hist.items()))

    group = f"bench-{phase}-{uuid.uuid4().hex[:8]}"
    query = (_reader(spark, args, topic, group).load().writeStream.foreachBatch(sink)
             .trigger(processingTime=f"{args.trigger_ms} milliseconds")
             .option("checkpointLocation", checkpoint).start())
    announced = False
    while query.isActive and not stop.is_set():
        if until_rows is not None and seen >= until_rows:
            break
        if not announced and phase == "live" and query.lastProgress is not None and _joined(args, group):
            events.emit("phase", phase="live", state="running")
            announced = True
        query.awaitTermination(0.1)
    error = query.exception()
    query.stop()
    # where each trigger's time went (Spark's own progress): latestOffset, queryPlanning, addBatch, walCommit, ...
    events.emit("progress", phase=phase, durations=[
        {k: int(v) for k, v in p["durationMs"].items()} for p in query.recentProgress if p["numInputRows"] > 0])
    if error is not None:
        raise RuntimeError(f"{phase} query failed: {error}")
    return seen


def _joined(args: argparse.Namespace, group: str) -> bool:
    """Spark's source reads every partition at once; groupcoord's once the group gave this driver some."""
    if args.source == "kafka":
        return True
    try:
        status = json.loads(Path(args.events).with_suffix(f".{group}.status.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(status.get("assignment"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.spark_side_by_side_driver", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", choices=["kafka", "groupcoord"], required=True)
    p.add_argument("--events", required=True)
    p.add_argument("--bootstrap-servers", required=True)
    p.add_argument("--coordinator", default="")
    p.add_argument("--backlog-topic", required=True)
    p.add_argument("--backlog-records", type=int, required=True)
    p.add_argument("--live-topic", required=True)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--cores-max", type=int, default=2)
    p.add_argument("--tasks-per-batch", type=int, default=2)
    p.add_argument("--trigger-ms", type=int, default=500)
    p.add_argument("--max-offsets-per-trigger", type=int, default=100_000)
    p.add_argument("--jars", default="", help="spark.jars (comma-separated), Spark's Kafka source")
    args = p.parse_args(argv)

    events = Events(Path(args.events))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    events.emit("launched", pid=os.getpid())
    from groupcoord.clients.spark_driver import spark_session

    spark = spark_session(args.master, f"side-by-side-{args.source}", "512m", 1, executor_memory="512m",
                          cores_max=args.cores_max, jars=[j for j in args.jars.split(",") if j])
    rc = 0
    try:
        events.emit("started", app_id=spark.sparkContext.applicationId)
        seen = _run_query(spark, args, "backlog", args.backlog_topic, events, stop, args.backlog_records)
        events.emit("phase", phase="backlog", state="done", rows=seen)
        if not stop.is_set():
            _run_query(spark, args, "live", args.live_topic, events, stop, None)
    except Exception as e:
        events.emit("error", error=str(e)[-2000:])
        rc = 1
    finally:
        spark.stop()
        events.emit("stopped", rc=rc)
        events.close()
    return rc


if __name__ == "__main__":
    sys.exit(main())
