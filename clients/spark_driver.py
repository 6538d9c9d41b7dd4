"""A Spark driver process that consumes its share of a groupcoord group's partitions and writes Parquet.

Run::

    python -m groupcoord.clients.spark_driver --coordinator 127.0.0.1:50051 --group demo --topic events \\
        --bootstrap-servers 127.0.0.1:9092 --output out/driver-1 --starting-offsets earliest

It runs one streaming query over the ``groupcoord`` source (`groupcoord.clients.spark_source`) with a processing-time
trigger and, per micro-batch (``foreachBatch``), stages one Parquet file ``OUTPUT/staging/RUN/RUN-BATCH.parquet``
that the source publishes as ``OUTPUT/batches/RUN-BATCH.parquet`` once the batch's offsets are committed with
the member epoch, or deletes if the coordinator refuses the commit (this driver was fenced: another driver
re-reads those records). ``OUTPUT/batches`` therefore holds every record once, across rebalances, crashes and
pauses past the session (the source's docstring names the two windows of one RPC that can drop a batch).

- ``--sink aggregate`` (default): per (topic, partition, key) the record count, first and last offset and value
  bytes, computed by Spark: an aggregation per key, with enough to count records exactly (a batch reads one
  contiguous offset range per partition);
- ``--sink rows``: the records themselves (topic, partition, offset, timestamp, key), for exact counting.

A file is written under a temporary name, fsynced and renamed, so a crash leaves a batch either whole or
absent; staged batches of an earlier run (never committed) are deleted when the driver starts.

With ``--group-type share`` the driver joins a share group instead (`groupcoord.clients.spark_share_source`: queue
semantics, several drivers on the same partitions); each batch's staged output is published once the
coordinator accepted the batch's acknowledgement, and ``OUTPUT/acquisitions.jsonl`` lists every range acquired.

Stopping: on SIGTERM or SIGINT, after ``--max-records`` records or ``--duration`` seconds, the driver drains:
it asks the source (through its ``drain.file``) to settle the last completed batch and leave the group, waits
for that, then stops the query and Spark. Every run uses a fresh checkpoint (positions live in the
coordinator). The driver also drains if its parent process dies, so a launcher that is killed does not leave
drivers behind.

`DriverProcess` launches one as a subprocess for demos and tests; `batch_ranges` and `coverage` read the
outputs back and count processed, missing and duplicate records.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ["BatchRange", "Coverage", "DriverProcess", "batch_ranges", "coverage", "main", "process_tree"]

log = logging.getLogger("groupcoord.spark_driver")

TopicPartition = tuple[str, int]


# --- the driver -------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m groupcoord.clients.spark_driver", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--coordinator", default=None, help="groupcoord address HOST:PORT (required but with "
                   "--source kafka)")
    p.add_argument("--source", choices=["groupcoord", "kafka"], default="groupcoord",
                   help="kafka: Spark's own Kafka source instead (spark-sql-kafka-0-10, its jars in --jars), for "
                        "comparisons: every driver reads every partition, its batches are written at once "
                        "(at-least-once), and --group and the group options are ignored")
    p.add_argument("--jars", default="", help="spark.jars, comma-separated (Spark's Kafka source for --source kafka)")
    p.add_argument("--tls-ca", default=None, help="reach the coordinator over TLS, trusting this CA file (PEM); "
                   "a bearer token comes from $GROUPCOORD_TOKEN")
    p.add_argument("--tls-cert", default=None, help="client certificate (PEM) for mTLS, with --tls-key")
    p.add_argument("--tls-key", default=None, help="the client certificate's private key (PEM)")
    p.add_argument("--group", required=True, help="consumer group id (share group id with --group-type share)")
    p.add_argument("--group-type", choices=["consumer", "share"], default="consumer",
                   help="share: queue semantics, drivers share partitions and acknowledge acquired ranges "
                        "(groupcoord.clients.spark_share_source); OUTPUT/acquisitions.jsonl records every "
                        "acquired range")
    p.add_argument("--topic", action="append", default=[],
                   help="topic to consume (repeatable; or --option subscribePattern=REGEX)")
    p.add_argument("--bootstrap-servers", required=True, help="Kafka bootstrap servers")
    p.add_argument("--output", required=True, help="directory for this driver's Parquet batches and status")
    p.add_argument("--name", default=None, help="a label for logs (default: the output directory's name)")
    p.add_argument("--sink", choices=["aggregate", "rows"], default="aggregate",
                   help="aggregate per key (default) or write every record")
    p.add_argument("--trigger-ms", type=int, default=1000, help="processing-time trigger interval (default 1000)")
    p.add_argument("--available-now", action="store_true",
                   help="Trigger.AvailableNow: read what is there when the query starts, then stop")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="another source option, e.g. includeHeaders=true or minPartitions=8 (repeatable; "
                        "overrides the flags above)")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None, help="records per micro-batch at most")
    p.add_argument("--starting-offsets", choices=["earliest", "latest"], default="latest",
                   help="where to start partitions with no committed offset (default latest)")
    p.add_argument("--server-assignor", default=None, help="server assignor to ask for (e.g. lag-sticky)")
    p.add_argument("--instance-id", default=None, help="static membership: a stop is then a temporary leave")
    p.add_argument("--max-records", type=int, default=None, help="drain and exit after this many records")
    p.add_argument("--duration", type=float, default=None, help="drain and exit after this many seconds")
    p.add_argument("--batch-delay-ms", type=int, default=0,
                   help="sleep this long after writing each batch, before it counts as done: simulates slow "
                        "processing, and gives a test a window to crash a driver between writing and committing")
    p.add_argument("--wait-for", default=None, metavar="FILE",
                   help="start Spark and load the source, then wait for FILE to exist before starting the query "
                        "(joining the group): lets a launcher have a driver ready to join at a chosen moment")
    p.add_argument("--drain-timeout", type=float, default=60.0,
                   help="seconds to wait for the source to commit and leave before stopping anyway (default 60)")
    p.add_argument("--master", default="local[1]", help="Spark master (default local[1])")
    p.add_argument("--driver-memory", default="512m", help="spark.driver.memory (default 512m)")
    p.add_argument("--executor-memory", default="512m",
                   help="spark.executor.memory on a cluster (--master spark://...; default 512m)")
    p.add_argument("--cores-max", type=int, default=None,
                   help="spark.cores.max on a cluster: executor cores this application takes at most "
                        "(default: Spark's, all the cluster offers)")
    p.add_argument("--tasks-per-batch", type=int, default=None,
                   help="Spark tasks per micro-batch (default: the cores of a local[N] master, else 2)")
    p.add_argument("--shuffle-partitions", type=int, default=1, help="spark.sql.shuffle.partitions (default 1)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="another Spark setting, as spark-submit's --conf takes it, e.g. "
                        "spark.executor.extraJavaOptions=-XX:+UseSerialGC (repeatable)")
    p.add_argument("--log-level", default="INFO", help="Python log level (default INFO)")
    return p


@dataclass
class _Progress:
    """What the driver has written so far, mirrored to OUTPUT/driver.json for launchers."""

    name: str
    run: str
    pid: int = field(default_factory=os.getpid)
    state: str = "starting"
    records: int = 0
    batches: int = 0
    nonempty_batches: int = 0
    last_batch_id: int = -1
    started: float = field(default_factory=time.time)
    error: str = ""

    def save(self, output: Path) -> None:
        _atomic_write_text(output / "driver.json", json.dumps(self.__dict__, sort_keys=True))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.source == "groupcoord" and not args.coordinator:
        parser.error("--coordinator is required (but with --source kafka)")
    try:
        spark_conf = _settings(args.conf)
    except ValueError as e:
        parser.error(str(e))
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    output = Path(args.output).resolve()
    (output / "batches").mkdir(parents=True, exist_ok=True)
    name = args.name or output.name
    run = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
    progress = _Progress(name=name, run=run)
    progress.save(output)

    stop = threading.Event()
    parent = os.getppid()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("%s: signal %d: draining", name, signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    drain_file = output / f"drain-{run}"
    checkpoint = output / f"checkpoint-{run}"
    staging = output / "staging" / run
    _discard_old_staging(output / "staging", name)
    staging.mkdir(parents=True)
    spark = _spark_session(args, name, spark_conf)
    try:
        df = _load(spark, args, output, drain_file, staging)
        if stop.is_set():  # asked to stop while Spark started: never join
            progress.state = "stopped"
            progress.save(output)
            return 0
        if args.wait_for:
            progress.state = "waiting"
            progress.save(output)
            log.info("%s: Spark is ready; waiting for %s to join the group", name, args.wait_for)
            while not os.path.exists(args.wait_for):
                if stop.is_set() or os.getppid() != parent:
                    progress.state = "stopped"
                    progress.save(output)
                    return 0
                time.sleep(0.1)
        query = _start_query(df, args, output, run, checkpoint, progress)
        progress.state = "running"
        progress.save(output)
        log.info("%s: query started (run %s, group %s)", name, run, args.group)
        from pyspark.errors import StreamingQueryException

        deadline = time.monotonic() + args.duration if args.duration is not None else None
        while query.isActive and not stop.is_set():
            if args.max_records is not None and progress.records >= args.max_records:
                log.info("%s: %d records reached: draining", name, progress.records)
                break
            if deadline is not None and time.monotonic() >= deadline:
                log.info("%s: %.0f s reached: draining", name, args.duration)
                break
            if os.getppid() != parent:
                log.warning("%s: parent process exited: draining", name)
                break
            try:
                query.awaitTermination(0.25)
            except StreamingQueryException:
                break  # the query failed: reported below, from query.exception()
        rc = 0
        if query.isActive and args.source == "kafka":  # no group to leave: a batch is written whole or not
            query.stop()
        if query.isActive:
            progress.state = "draining"
            progress.save(output)
            drained = _drain(query, drain_file, args.drain_timeout)
            if not drained:
                log.warning("%s: the source did not drain within %.0f s; stopping the query anyway (its last "
                            "batch will be read again by the next owner)", name, args.drain_timeout)
            query.stop()
        error = query.exception()
        if error is not None:
            progress.error = str(error)
            log.error("%s: query failed: %s", name, error)
            rc = 1
        progress.state = "stopped" if rc == 0 else "failed"
        progress.save(output)
        log.info("%s: stopped after %d records in %d batches", name, progress.records, progress.batches)
        return rc
    finally:
        spark.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)  # what is left there was never committed


def _spark_session(args: argparse.Namespace, name: str, conf: Mapping[str, str]) -> Any:
    return spark_session(args.master, f"groupcoord-{name}", args.driver_memory, args.shuffle_partitions,
                         executor_memory=args.executor_memory, cores_max=args.cores_max,
                         jars=[j for j in args.jars.split(",") if j], extra=conf)


def _settings(items: Sequence[str]) -> dict[str, str]:
    """--conf KEY=VALUE items as a mapping; the first '=' splits, so a value may contain more."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf {item!r}: give KEY=VALUE, e.g. spark.executor.extraJavaOptions=-XX:+UseSerialGC")
        out[key.strip()] = value
    return out


def spark_session(master: str, app_name: str, driver_memory: str, shuffle_partitions: int, *,
                  executor_memory: str = "512m", cores_max: int | None = None, jars: Sequence[str] = (),
                  extra: Mapping[str, str] | None = None) -> Any:
    """A Spark session set up to run this project's source (the drivers, the benchmarks, the parity tests).

    On a cluster (``spark://...``) executors are JVMs a worker starts, with the worker's environment and a
    working directory of their own; their Python workers get only what the driver ships: the interpreter
    (``spark.pyspark.python``) and ``spark.executorEnv.*``. So the project's root goes to them as PYTHONPATH,
    as it goes to the local-mode Python workers through this process's environment. `jars` are added with
    ``spark.jars`` (e.g. Spark's own Kafka source, `groupcoord.spark_kafka_jars`); the driver serves them to
    the executors.
    """
    from pyspark.sql import SparkSession

    # Spark's Python workers and the source's reader process import this project; make sure they find it
    # from whatever directory they start in.
    root = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.driver.memory", driver_memory)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.adaptive.enabled", "false")
               .config("spark.log.level", "WARN")
               # Python workers connect back over a Unix socket, not a loopback TCP port: Spark's listener
               # accepts the first connection only, and a stray one (any client retrying a port the kernel has
               # since handed to Spark) failed the query with "Authentication failed".
               .config("spark.python.unix.domain.socket.enabled", "true"))
    if master.startswith("spark://"):
        builder = (builder.config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
                   .config("spark.executorEnv.PYTHONPATH", root)
                   .config("spark.executor.memory", executor_memory)
                   .config("spark.executor.cores", "1"))
        if cores_max is not None:
            builder = builder.config("spark.cores.max", str(cores_max))
        host = master[len("spark://"):].split(",")[0].rpartition(":")[0]
        if host in ("127.0.0.1", "localhost"):  # a loopback cluster: executors call the driver back there
            builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress",
                                                                              "127.0.0.1")
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _discard_old_staging(root: Path, name: str) -> None:
    """Batches staged by an earlier run that never saw its commit (a crash): the next owner re-read them."""
    if not root.is_dir():
        return
    for old in root.iterdir():
        files = [f for f in old.glob("*.parquet") if not f.name.startswith(".")] if old.is_dir() else []
        if files:
            log.warning("%s: discarding %d staged batch(es) of run %s: never committed", name, len(files), old.name)
        shutil.rmtree(old, ignore_errors=True)


def _load(spark: Any, args: argparse.Namespace, output: Path, drain_file: Path, staging: Path) -> Any:
    """The source's DataFrame; nothing joins the group before the query starts. The sink writes each batch into
    `staging`; the source moves it to OUTPUT/batches once the batch's offsets are committed."""
    if args.source == "kafka":
        return _load_spark_kafka(spark, args)
    from groupcoord.clients.spark_source import GroupcoordDataSource

    spark.dataSource.register(GroupcoordDataSource)
    reader = (spark.readStream.format(GroupcoordDataSource.name())
              .option("coordinator", args.coordinator)
              .option("group", args.group)
              .option("bootstrap.servers", args.bootstrap_servers)
              .option("drain.file", str(drain_file))
              .option("status.file", str(output / "status.json"))
              .option("staging.dir", str(staging))
              .option("publish.dir", str(output / "batches")))
    if args.topic:
        reader = reader.option("topics", ",".join(args.topic))
    reader = reader.option("tasksPerBatch", str(args.tasks_per_batch or _local_cores(args.master)))
    if args.group_type == "share":  # starts where the group's share.auto.offset.reset says
        reader = (reader.option("group.type", "share")
                  .option("acquisitions.file", str(output / "acquisitions.jsonl")))
    else:
        reader = reader.option("startingOffsets", args.starting_offsets)
    if args.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    if args.server_assignor and args.group_type == "consumer":
        reader = reader.option("server.assignor", args.server_assignor)
    if args.instance_id and args.group_type == "consumer":
        reader = reader.option("instance.id", args.instance_id)
    for name in ("ca", "cert", "key"):
        path = getattr(args, f"tls_{name}")
        if path:
            reader = reader.option(f"coordinator.tls.{name}", path)
    for item in args.option:
        key, _, value = item.partition("=")
        reader = reader.option(key.strip(), value)
    return reader.load()


def _load_spark_kafka(spark: Any, args: argparse.Namespace) -> Any:
    """Spark's own Kafka source with the same topics, start and batch size: the application reads every
    partition itself (positions in its checkpoint), whatever other applications read."""
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", args.bootstrap_servers)
              .option("startingOffsets", args.starting_offsets))
    if args.topic:
        reader = reader.option("subscribe", ",".join(args.topic))
    if args.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    for item in args.option:
        key, _, value = item.partition("=")
        reader = reader.option(key.strip(), value)
    return reader.load()


def _start_query(df: Any, args: argparse.Namespace, output: Path, run: str, checkpoint: Path,
                 progress: _Progress) -> Any:
    from pyspark.sql import functions as F

    # Spark's source publishes nothing: its sink writes straight into OUTPUT/batches
    staging = output / "batches" if args.source == "kafka" else output / "staging" / run

    def write_batch(batch: Any, batch_id: int) -> None:
        if args.sink == "rows":
            columns = ["topic", "partition", "offset", "timestamp", "key"]
            table = batch.select(*columns, *(["headers"] if "headers" in batch.columns else [])).toArrow()
            records = table.num_rows
        else:
            table = (batch.groupBy("topic", "partition", "key")
                     .agg(F.count(F.lit(1)).alias("records"), F.min("offset").alias("first_offset"),
                          F.max("offset").alias("last_offset"), F.sum(F.length("value")).alias("value_bytes"))
                     .toArrow())
            records = int(sum(table.column("records").to_pylist())) if table.num_rows else 0
        if records:
            _write_parquet(table, staging / f"{run}-{batch_id:06d}.parquet")
            progress.nonempty_batches += 1
        progress.records += records
        progress.batches += 1
        progress.last_batch_id = batch_id
        progress.save(output)
        log.info("%s: batch %d: %d records (total %d)", progress.name, batch_id, records, progress.records)
        if args.batch_delay_ms > 0:
            time.sleep(args.batch_delay_ms / 1000)

    trigger = {"availableNow": True} if args.available_now else {"processingTime": f"{args.trigger_ms} milliseconds"}
    return (df.writeStream.foreachBatch(write_batch)
            .trigger(**trigger)
            .option("checkpointLocation", str(checkpoint))
            .start())


def _local_cores(master: str) -> int:
    """N of local[N] (local[*]: the machine's cores); 2 for anything else."""
    if master == "local":
        return 1
    if master.startswith("local[") and master.endswith("]"):
        n = master[len("local["):-1].split(",")[0]
        if n == "*":
            return os.cpu_count() or 2
        if n.isdigit():
            return max(1, int(n))
    return 2


def _drain(query: Any, drain_file: Path, timeout_s: float) -> bool:
    """Ask the source to commit its last batch and leave; True once it says it has."""
    drain_file.write_text("drain\n")
    done = Path(str(drain_file) + ".done")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and query.isActive:
        if done.exists():
            return True
        time.sleep(0.1)
    return done.exists()


def _write_parquet(table: Any, path: Path) -> None:
    import pyarrow.parquet as pq

    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".parquet", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())  # the source publishes it by a rename once committed: the data must be there
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# --- reading the outputs back -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BatchRange:
    """The records one micro-batch of one driver run processed from one partition."""

    driver: str  # the output directory's name
    run: str
    batch_id: int
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    records: int

    @property
    def contiguous(self) -> bool:
        return self.records == self.last_offset - self.first_offset + 1


def batch_ranges(outputs: Iterable[Path]) -> list[BatchRange]:
    """Every (driver, run, batch, partition) range written under the given output directories, either sink."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out: list[BatchRange] = []
    for output in outputs:
        for path in sorted((Path(output) / "batches").glob("*.parquet")):
            if path.name.startswith("."):
                continue
            run, _, batch = path.stem.rpartition("-")
            table = pq.read_table(path)
            if "records" in table.column_names:
                grouped = table.group_by(["topic", "partition"]).aggregate(
                    [("records", "sum"), ("first_offset", "min"), ("last_offset", "max")])
                cols = ("records_sum", "first_offset_min", "last_offset_max")
            else:
                grouped = table.group_by(["topic", "partition"]).aggregate(
                    [("offset", "count_distinct"), ("offset", "min"), ("offset", "max"), ("offset", "count")])
                if pc.any(pc.not_equal(grouped.column("offset_count"), grouped.column("offset_count_distinct"))
                          ).as_py():
                    raise AssertionError(f"{path}: an offset appears twice within one batch")
                cols = ("offset_count", "offset_min", "offset_max")
            for row in grouped.to_pylist():
                out.append(BatchRange(Path(output).name, run, int(batch), row["topic"], int(row["partition"]),
                                      int(row[cols[1]]), int(row[cols[2]]), int(row[cols[0]])))
    return out


@dataclass(frozen=True, slots=True)
class Coverage:
    """Produced records against processed ones. `duplicates` counts extra copies (a record read twice adds 1)."""

    produced: int
    processed: int
    unique: int
    missing: int
    duplicates: int
    duplicate_batches: tuple[tuple[str, str, int], ...]  # (driver, run, batch id) of batches with duplicates
    gaps: tuple[tuple[str, int, int, int], ...]  # (topic, partition, first missing, last missing), first ones

    @property
    def exact(self) -> bool:
        return self.missing == 0 and self.duplicates == 0


def coverage(ranges: Sequence[BatchRange], produced: Mapping[TopicPartition, tuple[int, int]]) -> Coverage:
    """Compare batch ranges with what was produced, `produced[tp] = (first offset, end offset)`.

    Each range must be contiguous (a batch reads one contiguous offset range per partition). A record covered
    by several ranges counts once in `unique` and once more in `duplicates` per extra copy; the batches whose
    ranges overlap are listed in `duplicate_batches`.
    """
    bad = [r for r in ranges if not r.contiguous]
    if bad:
        raise AssertionError(f"non-contiguous batch ranges (a reader bug): {bad[:5]}")
    by_tp: dict[TopicPartition, list[BatchRange]] = {}
    for r in ranges:
        by_tp.setdefault((r.topic, r.partition), []).append(r)
    processed = unique = missing = 0
    dup_batches: set[tuple[str, str, int]] = set()
    gaps: list[tuple[str, int, int, int]] = []
    for tp in sorted(set(by_tp) | set(produced)):
        start, end = produced.get(tp, (0, 0))
        covered_to = start
        seen: list[BatchRange] = []
        for r in sorted(by_tp.get(tp, []), key=lambda r: (r.first_offset, r.last_offset)):
            lo, hi = r.first_offset, r.last_offset + 1
            processed += r.records
            if lo > covered_to and covered_to < end:
                missing += min(lo, end) - covered_to
                gaps.append((tp[0], tp[1], covered_to, min(lo, end) - 1))
            for e in seen:
                if e.last_offset >= lo:
                    dup_batches.update({(e.driver, e.run, e.batch_id), (r.driver, r.run, r.batch_id)})
            unique += max(0, hi - max(lo, covered_to))
            covered_to = max(covered_to, hi)
            seen.append(r)
        if covered_to < end:
            missing += end - covered_to
            gaps.append((tp[0], tp[1], covered_to, end - 1))
    produced_total = sum(e - s for s, e in produced.values())
    return Coverage(produced_total, processed, unique, missing, processed - unique, tuple(sorted(dup_batches)),
                    tuple(gaps[:20]))


# --- launching drivers as subprocesses -----------------------------------------------------------------------------
def process_tree(pid: int) -> list[int]:
    """`pid` and all its descendants (Spark's JVM, its Python daemon (own process group) and workers)."""
    children: dict[int, list[int]] = {}
    try:
        listing = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "ppid="], capture_output=True, text=True,
                                 timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return [pid]
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            children.setdefault(int(parts[1]), []).append(int(parts[0]))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


class DriverProcess:
    """`python -m groupcoord.clients.spark_driver ...` as a child process, with its output in OUTPUT/driver.log."""

    def __init__(self, name: str, output: Path, argv: Sequence[str]) -> None:
        self.name = name
        self.output = Path(output)
        self.argv = list(argv)
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def start(self) -> DriverProcess:
        self.output.mkdir(parents=True, exist_ok=True)
        self._log = open(self.output / "driver.log", "ab")  # noqa: SIM115 (closed in wait/kill)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "groupcoord.clients.spark_driver", "--output", str(self.output), "--name", self.name,
             *self.argv],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            cwd=str(Path(__file__).resolve().parent.parent), start_new_session=True)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def status(self) -> dict[str, Any]:
        """The source's status file (member id, epoch, partitions, committed offsets), or {} before the first."""
        return _read_json(self.output / "status.json")

    def progress(self) -> dict[str, Any]:
        """The driver's progress file (records, batches, state)."""
        return _read_json(self.output / "driver.json")

    def terminate(self, timeout_s: float = 60.0) -> int | None:
        """SIGTERM (drain: commit, leave, stop), then SIGKILL the whole tree if it does not exit in time.
        Processes the driver started and that outlive it (they should not) are killed too."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            tree = process_tree(self.proc.pid)
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("driver %s did not stop within %.0f s: killing it", self.name, timeout_s)
                self.kill()
            _kill_survivors(tree[1:], grace_s=5.0)
        self._close_log()
        return self.proc.returncode

    def pause(self) -> list[int]:
        """SIGSTOP the driver and every process it started (JVM, source reader, Python workers): the whole
        driver freezes, as in a long GC pause or a suspended VM. Returns the pids stopped, for `resume`."""
        if self.proc is None:
            return []
        tree = process_tree(self.proc.pid)
        for pid in tree:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        return tree

    def resume(self, pids: Sequence[int]) -> None:
        """SIGCONT the processes `pause` stopped."""
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the driver and every process it started, at once: a crash, as far as the group can tell."""
        if self.proc is None:
            return
        tree = process_tree(self.proc.pid)
        for pid in tree:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        _kill_survivors(tree[1:], grace_s=0.0)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError, OSError):
        if os.waitpid(pid, os.WNOHANG) != (0, 0):
            return False  # a zombie child of ours, now reaped
    return True


def _kill_survivors(pids: Sequence[int], grace_s: float) -> None:
    """Wait up to `grace_s` for `pids` (a driver's descendants, listed while it ran) to exit; SIGKILL the rest."""
    deadline = time.monotonic() + grace_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


if __name__ == "__main__":
    sys.exit(main())
