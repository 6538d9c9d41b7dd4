"""A PySpark streaming source that reads the Kafka partitions a groupcoord consumer group gives this driver.

Usage::

    from groupcoord.clients.spark_source import GroupcoordDataSource

    spark.dataSource.register(GroupcoordDataSource)
    df = (spark.readStream.format("groupcoord")
          .option("coordinator", "127.0.0.1:50051").option("group", "orders-app").option("topics", "orders")
          .option("bootstrap.servers", "127.0.0.1:9092").option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", 100000)
          .load())
    # columns: topic string, partition int, offset long, timestamp timestamp, key binary, value binary

Options:

=========================  =====================================================================================
``coordinator``            groupcoord address, HOST:PORT (required)
``group``                  consumer group id (required)
``subscribe``              comma-separated topics (``topics`` is the same), or ``subscribePattern``: a regex
``bootstrap.servers``      Kafka bootstrap servers (required; Spark's name ``kafka.bootstrap.servers`` too)
``maxOffsetsPerTrigger``   at most this many records per micro-batch, split across owned partitions in
                           proportion to their lag (default: no limit)
``startingOffsets``        ``earliest``, ``latest`` (default) or JSON: where to start a partition the group has no
                           committed offset for. The start is committed at once, so a later owner resumes there.
                           Spark's other Kafka options (``startingOffsetsByTimestamp``, ``failOnDataLoss``,
                           ``includeHeaders``, ``minPartitions``, ``minOffsetsPerTrigger``, ...) are in
                           `groupcoord.clients.spark_options` and the README's table
``instance.id``            static membership (KIP-345): a stop is then a temporary leave, and the partitions
                           stay with this instance for the session timeout
``server.assignor``        server-side assignor to ask for (e.g. ``lag-sticky``, ``uniform``, ``range``)
``rack.id``                rack of this driver, for rack-aware assignors
``rebalance.timeout.ms``   how long the coordinator waits for this driver to release revoked partitions
                           (default 60000; a revoked partition is released after the running batch)
``fetch.timeout.ms``       a task fails if Kafka does not deliver its ranges within this time (default 60000)
``tasksPerBatch``          Spark tasks per micro-batch (default 2): the owned partitions' ranges are packed into
                           at most this many tasks of about equal size; use the driver's core count
``drain.file``             when this file appears, the source settles its last completed batch, leaves the
                           group, reads nothing more and creates ``<drain.file>.done``: a clean stop with no
                           duplicates (``groupcoord.clients.spark_driver`` uses it on SIGTERM)
``status.file``            the source writes its member id, epoch, partitions and committed offsets here (JSON,
                           replaced atomically) after every trigger
``group.type``             ``consumer`` (default) or ``share``: queue semantics, several drivers on the same
                           partitions (KIP-932; options and guarantees in `groupcoord.clients.spark_share_source`)
``kafka.*``                passed to the confluent-kafka clients without the prefix (e.g. ``kafka.security.protocol``)
``coordinator.tls.ca``     reach the coordinator over TLS, trusting this CA file (PEM)
``coordinator.tls.cert``   client certificate (PEM) for a coordinator that requires one (mTLS), with
``coordinator.tls.key``    its private key; the bearer token, if any, comes from ``$GROUPCOORD_TOKEN`` (an
                           option would show in the query plan)
``staging.dir``,           the sink writes each batch's output (Parquet with ``topic`` and
``publish.dir``            ``partition`` columns) into ``staging.dir``; the source moves it into ``publish.dir`` only
                           once the batch's offsets are committed, and deletes it if the commit is refused
                           (`groupcoord.clients.spark_staging`). Without them the sink publishes itself: at-least-once
=========================  =====================================================================================

What is guaranteed, and how (the theory of operation):

- The stream reader runs in its own Python process on the driver (started by the driver's JVM, one per query
  run) and keeps a `GroupMember` there, heartbeating on a thread, with ``defer_revocation=True``.
- An offset is ``{"topic:partition": [from, to], ...}`` over the partitions the member's `assignment()` held
  when the batch was planned; `partitions(start, end)` reads only ``end`` (a pure function of it) and packs the
  non-empty ranges into ``tasksPerBatch`` Spark tasks. Executors read their ranges with confluent-kafka (assign
  at the range starts; no Kafka consumer group). A partition the member lost (``on_lost``, or gone from
  `assignment()`) is in no batch planned after that.
- Spark calls `latestOffset(start)` for batch N+1 only after batch N (whose end is ``start``) has run and its
  sink has returned. That call settles batch N: its ``to`` offsets are committed to the coordinator with the
  member epoch; with ``staging.dir``, the output of the partitions the coordinator accepted is then published
  (renamed into ``publish.dir``) and the rest discarded. Only then are the partitions the coordinator asked
  back released, so the next owner resumes exactly after the last published batch (`fetch_offsets` when it
  gains it). Spark's own `commit(end)` arrives one batch late and is not used.
- A driver that was fenced while batch N ran (``on_lost`` fired since N was planned, or the coordinator
  refuses the commit: UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, STALE_MEMBER_EPOCH, e.g. after a pause longer
  than the session) commits nothing and discards N's output: another driver may own its partitions already
  and re-read them from the last commit. Its later batches start from the coordinator's offsets again.
- With ``staging.dir`` every record is therefore published exactly once, through rebalances, clean stops
  (``drain.file``), crashes (SIGKILL: the staged batch is never published; the next owner re-reads it) and
  pauses past the session. Two narrow windows remain, both of the order of one RPC: a driver killed after
  the coordinator accepted its commit and before the rename loses that batch's output (missing records), and
  a commit whose reply never arrives (timeout) is sent again at the next trigger, unless the driver was fenced
  meanwhile: then the batch is discarded although the first commit may have been applied (missing records).
  Without ``staging.dir`` delivery is at-least-once: a sink that publishes before the commit publishes
  again what the next owner re-reads after a crash or a fencing of this driver.
- Spark checkpoints are not the source of truth: positions live in the coordinator. A query restarted from an
  old checkpoint is refused (the replayed batch may cover partitions another driver owns now): give every run
  a fresh ``checkpointLocation``.
- Coordinator or Kafka errors in `latestOffset` are logged and the batch is skipped (``start`` is returned):
  an exception there would fail the query at once.

Spark calls `latestOffset` on every trigger; use a processing-time trigger (e.g. 1 s) rather than the default
(which polls continuously and makes the reader call Kafka and the coordinator ~90 times a second).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import grpc
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from groupcoord.clients.credentials import Credentials
from groupcoord.clients.group_member import GroupMember, GroupMemberError
from groupcoord.clients.spark_options import (
    SparkKafkaOptions,
    check_position,
    partitions_gone,
    resolve_start,
    split_ranges,
)
from groupcoord.clients.spark_reader_base import LazyStateReader
from groupcoord.clients.spark_staging import StagingArea

__all__ = ["SCHEMA", "SCHEMA_WITH_HEADERS", "GroupcoordDataSource", "GroupcoordStreamReader", "KafkaRange",
           "ReadTask", "SourceOptions", "allot", "pack"]

log = logging.getLogger("groupcoord.spark_source")

SCHEMA = StructType([
    StructField("topic", StringType(), False),
    StructField("partition", IntegerType(), False),
    StructField("offset", LongType(), False),
    StructField("timestamp", TimestampType(), True),
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
])
# includeHeaders: Spark's `headers` column, null for a record without headers
SCHEMA_WITH_HEADERS = StructType([*SCHEMA.fields, StructField("headers", ArrayType(StructType([
    StructField("key", StringType(), True), StructField("value", BinaryType(), True)])), True)])

TopicPartition = tuple[str, int]
# kafka.* options naming files. Executors read Kafka in a working directory of their own (a worker's
# work/app-.../N): a relative path given to the driver is made absolute where the source loads, in the driver's.
_KAFKA_FILE_OPTIONS = frozenset({"ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
                                 "ssl.keystore.location", "ssl.crl.location", "ssl.engine.location",
                                 "sasl.kerberos.keytab", "sasl.oauthbearer.assertion.private.key.file"})


def _absolute(path: str) -> str:
    """`path` made absolute against this process's directory (librdkafka's ``probe`` is not a path)."""
    if not path or path == "probe" or os.path.isabs(path):
        return path
    return os.path.abspath(path)


Ranges = dict[TopicPartition, tuple[int, int]]  # (from, to): records from <= offset < to


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """The source's options, validated once (at `load()`), so a typo fails the query before it starts."""

    coordinator: str
    group: str
    topics: tuple[str, ...]
    bootstrap_servers: str
    max_offsets_per_trigger: int | None = None
    spark: SparkKafkaOptions = SparkKafkaOptions()  # Spark's Kafka options (clients/spark_options.py)
    instance_id: str | None = None
    server_assignor: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = 60_000
    fetch_timeout_ms: int = 60_000
    tasks_per_batch: int = 2
    drain_file: str | None = None
    status_file: str | None = None
    staging_dir: str | None = None
    publish_dir: str | None = None
    kafka: tuple[tuple[str, str], ...] = ()
    coordinator_tls_ca: str | None = None
    coordinator_tls_cert: str | None = None
    coordinator_tls_key: str | None = None

    def credentials(self) -> Credentials:
        """How the driver reaches the coordinator (clients/credentials.py); the token from $GROUPCOORD_TOKEN."""
        return Credentials.from_files(self.coordinator_tls_ca, self.coordinator_tls_cert, self.coordinator_tls_key)

    @staticmethod
    def parse(options: Mapping[str, str]) -> SourceOptions:
        opts = {k.lower(): str(v) for k, v in options.items()}

        def required(name: str) -> str:
            value = opts.get(name.lower(), "").strip()
            if not value:
                raise ValueError(f"groupcoord source: option {name!r} is required")
            return value

        def integer(name: str, default: int | None, minimum: int) -> int | None:
            raw = opts.get(name.lower())
            if raw is None or raw.strip() == "":
                return default
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"groupcoord source: option {name!r} must be an integer, got {raw!r}") from None
            if value < minimum:
                raise ValueError(f"groupcoord source: option {name!r} must be >= {minimum}, got {value}")
            return value

        max_offsets = integer("maxOffsetsPerTrigger", None, 1)
        spark = SparkKafkaOptions.parse(opts, max_offsets)
        if not opts.get("bootstrap.servers") and opts.get("kafka.bootstrap.servers"):
            opts["bootstrap.servers"] = opts["kafka.bootstrap.servers"]  # Spark's name for it
        kafka = tuple(sorted((k[len("kafka."):], _absolute(v) if k[len("kafka."):] in _KAFKA_FILE_OPTIONS else v)
                             for k, v in opts.items() if k.startswith("kafka.")))
        staging_dir, publish_dir = opts.get("staging.dir") or None, opts.get("publish.dir") or None
        if (staging_dir is None) != (publish_dir is None):
            raise ValueError("groupcoord source: options 'staging.dir' and 'publish.dir' go together")
        tls = {name: opts.get(f"coordinator.tls.{name}") or None for name in ("ca", "cert", "key")}
        if (tls["cert"] is None) != (tls["key"] is None):
            raise ValueError("groupcoord source: options 'coordinator.tls.cert' and 'coordinator.tls.key' go together")
        return SourceOptions(
            coordinator=required("coordinator"),
            group=required("group"),
            topics=spark.topics,
            bootstrap_servers=required("bootstrap.servers"),
            max_offsets_per_trigger=max_offsets,
            spark=spark,
            instance_id=opts.get("instance.id") or None,
            server_assignor=opts.get("server.assignor") or None,
            rack_id=opts.get("rack.id") or None,
            rebalance_timeout_ms=integer("rebalance.timeout.ms", 60_000, 1) or 60_000,
            fetch_timeout_ms=integer("fetch.timeout.ms", 60_000, 1) or 60_000,
            tasks_per_batch=integer("tasksPerBatch", 2, 1) or 2,
            drain_file=opts.get("drain.file") or None,
            status_file=opts.get("status.file") or None,
            staging_dir=staging_dir,
            publish_dir=publish_dir,
            kafka=kafka,
            coordinator_tls_ca=tls["ca"],
            coordinator_tls_cert=tls["cert"],
            coordinator_tls_key=tls["key"],
        )

    def kafka_config(self, **extra: Any) -> dict[str, Any]:
        # log.connection.close: the mock cluster and idle brokers close connections; that is not worth a line
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers, "log.connection.close": False}
        config.update(dict(self.kafka))
        config.update(extra)
        return config


class GroupcoordDataSource(DataSource):
    """``spark.readStream.format("groupcoord")``: see the module docstring for options and guarantees."""

    @classmethod
    def name(cls) -> str:
        return "groupcoord"

    def schema(self) -> StructType:
        headers = str(self.options.get("includeHeaders", self.options.get("includeheaders", ""))).strip().lower()
        return SCHEMA_WITH_HEADERS if headers == "true" else SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from groupcoord.clients import spark_share_source as share  # ``group.type=share``: its own module

        if share.is_share(self.options):
            return share.ShareStreamReader(share.ShareSourceOptions.parse(self.options), schema)
        return GroupcoordStreamReader(SourceOptions.parse(self.options), schema)


@dataclass(frozen=True, slots=True)
class KafkaRange:
    """Records ``start <= offset < end`` of one Kafka partition."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class ReadTask(InputPartition):
    """One Spark task: several ranges, read together by one consumer (a Python task costs ~0.1 s to schedule,
    far more than reading a few thousand records, so ranges are packed into few tasks)."""

    ranges: tuple[KafkaRange, ...]


def pack(ranges: Sequence[KafkaRange], tasks: int) -> list[ReadTask]:
    """At most `tasks` tasks with about equal record counts (largest range first, into the lightest task)."""
    bins: list[list[KafkaRange]] = [[] for _ in range(max(1, min(tasks, len(ranges))))]
    load = [0] * len(bins)
    for r in sorted(ranges, key=lambda r: (-(r.end - r.start), r.topic, r.partition)):
        i = load.index(min(load))
        bins[i].append(r)
        load[i] += r.end - r.start
    return [ReadTask(tuple(sorted(b, key=lambda r: (r.topic, r.partition)))) for b in bins if b]


# --- offsets as JSON -----------------------------------------------------------------------------------------
def encode_offset(ranges: Ranges) -> dict[str, list[int]]:
    """Spark compares offsets as JSON text: build the dict in sorted order so equal offsets serialise equally."""
    return {f"{t}:{p}": [a, b] for (t, p), (a, b) in sorted(ranges.items())}


def decode_offset(offset: Mapping[str, Any] | None) -> Ranges:
    out: Ranges = {}
    for key, value in (offset or {}).items():
        topic, _, partition = key.rpartition(":")
        out[(topic, int(partition))] = (int(value[0]), int(value[1]))
    return out


def allot(available: Mapping[TopicPartition, int], limit: int | None) -> dict[TopicPartition, int]:
    """Split `limit` records across partitions in proportion to what each has available (Spark's Kafka source
    does the same with maxOffsetsPerTrigger); deterministic, and every record of budget is used."""
    total = sum(available.values())
    if limit is None or total <= limit:
        return dict(available)
    share = {tp: n * limit // total for tp, n in available.items()}
    left = limit - sum(share.values())
    for tp in sorted(available, key=lambda tp: (-(available[tp] * limit % total), tp)):
        if left <= 0:
            break
        if share[tp] < available[tp]:
            share[tp] += 1
            left -= 1
    return share


# --- the reader ----------------------------------------------------------------------------------------------
class GroupcoordStreamReader(LazyStateReader[SourceOptions, "_ReaderState"], SupportsTriggerAvailableNow):
    """Runs on the driver (its own process); see `LazyStateReader` for why the member starts late."""

    def _new_state(self) -> _ReaderState:
        return _ReaderState(self.options)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._reader_state().prepare_available_now()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        state = self._planned_state(
            end, "groupcoord source: Spark replays a batch this reader did not plan (a query restarted from an "
                 "existing checkpoint). Partitions may have moved to another driver since, so the batch cannot "
                 "be replayed safely; start the query with a fresh checkpointLocation (offsets live in the "
                 "coordinator).")
        ranges = [KafkaRange(t, p, a, b) for (t, p), (a, b) in sorted(decode_offset(end).items()) if b > a]
        n = self.options.spark.min_partitions
        if n is not None and n > len(ranges):  # Spark's minPartitions: one task per piece
            pieces = split_ranges((((r.topic, r.partition), r.start, r.end) for r in ranges), n)
            tasks = [ReadTask((KafkaRange(t, p, a, b),)) for (t, p), a, b in pieces]
        else:
            tasks = pack(ranges, self.options.tasks_per_batch)
        state.max_tasks = max(state.max_tasks, len(tasks))
        return tasks

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, ReadTask)
        from groupcoord.clients.spark_kafka_read import read_task  # executor side only

        return read_task(self.options, self.schema, partition)


class _ReaderState:
    """The driver-side state of one query run: the group member, a Kafka admin client, and the last offset this
    reader handed to Spark (`issued`). See the module docstring for the protocol."""

    def __init__(self, options: SourceOptions) -> None:
        _configure_logging()
        self.options = options
        self._lock = threading.Lock()
        self._losses = 0  # bumped by on_lost (heartbeat thread)
        self._losses_at_plan = 0  # `_losses` when `issued` was planned
        # (member id, epoch) when `issued` was planned: its batch is committed as that membership, so a loss and
        # a quick rejoin between the plan and the commit get the commit refused rather than accepted.
        self._membership_at_plan: tuple[str, int] | None = None
        self._losses_seen = 0
        self.issued: dict[str, Any] | None = None  # the last end offset returned to Spark
        self._settled: dict[str, Any] | None = None  # the last batch end committed or discarded
        self._next: dict[TopicPartition, int] = {}  # where the next batch starts, per partition still owned
        self._committed: dict[TopicPartition, int] = {}
        self._available_now: dict[TopicPartition, int] | None = None
        self._existed_at_start: frozenset[TopicPartition] | None = None  # partitions created later start earliest
        self._last_batch_at = time.monotonic()  # minOffsetsPerTrigger waits at most maxTriggerDelay from here
        self._drained = False
        self.batches = 0
        self.records_planned = 0
        self.refused_commits = 0
        self.max_tasks = 0  # the most Spark tasks one batch was cut into (status file)
        self.staging = (StagingArea(Path(options.staging_dir), Path(options.publish_dir))
                        if options.staging_dir and options.publish_dir else None)
        if self.staging is not None:
            self.staging.discard(reason="left by an earlier run; never committed")
        self._admin = AdminClient(options.kafka_config(**{"client.id": "groupcoord-spark-source"}))
        self.member = GroupMember(
            options.coordinator, options.group, options.topics, topic_regex=options.spark.topic_pattern,
            instance_id=options.instance_id,
            rack_id=options.rack_id, server_assignor=options.server_assignor,
            rebalance_timeout_ms=options.rebalance_timeout_ms, defer_revocation=True, on_lost=self._on_lost,
            credentials=options.credentials())
        self.member.start()
        _install_sigterm_handler()
        log.info("group %s: member %s started for topics %s", options.group, self.member.member_id,
                 ",".join(options.topics))

    def _on_lost(self, partitions: frozenset[TopicPartition]) -> None:
        with self._lock:
            self._losses += 1
        log.warning("group %s: member %s lost %d partition(s); the batch planned before will not be committed and "
                    "its output is discarded", self.options.group, self.member.member_id, len(partitions))

    def _lost_since_plan(self) -> bool:
        with self._lock:
            return self._losses != self._losses_at_plan

    # --- latestOffset ----------------------------------------------------------------------------------------
    def latest_offset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        if self._drained:
            return start
        if self.member.fatal_error is not None:
            raise RuntimeError(f"groupcoord source: the group member stopped: {self.member.fatal_error}")
        try:
            if self.issued is not None and start == self.issued and self._settled != start:
                self._settle(decode_offset(start))  # raises (and is retried next trigger) if the commit fails
                self._settled = start
                self.batches += 1
            self._release_unread()
            if self._drain_requested():
                self._drain()
                return start
            with self._lock:
                losses = self._losses
            if losses != self._losses_seen:  # positions from before a loss are stale: another driver may have
                self._losses_seen = losses   # read and committed past them since
                self._next.clear()
                self._committed.clear()
            if self._existed_at_start is None:
                self._existed_at_start = self._subscribed_partitions()
            status = self.member.status()  # read after `losses`: a loss in between voids this plan
            owned = status.assignment
            positions = {tp: pos for tp, pos in self._next.items() if tp in owned}
            gained = owned - positions.keys()
            watermarks = self._watermarks(owned, with_log_start=bool(gained))
            if gained:
                positions.update(self._start_positions(gained, watermarks))
            for tp, pos in positions.items():  # below our position: truncated, or recreated under this reader
                if tp in watermarks and watermarks[tp][1] < pos:
                    positions[tp] = check_position(tp, pos, 0, watermarks[tp][1],
                                                   self.options.spark.fail_on_data_loss, "next")
            ends = {tp: watermarks[tp][1] for tp in owned if tp in watermarks}
            if self._available_now is not None:
                ends = {tp: min(e, self._available_now.get(tp, e)) for tp, e in ends.items()}
            positions = {tp: pos for tp, pos in positions.items() if tp in ends}
            self._next = dict(positions)
            available = {tp: max(0, ends[tp] - pos) for tp, pos in positions.items()}
            budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
            take = allot(available, budget)
            ranges = {tp: (pos, pos + take[tp]) for tp, pos in positions.items()}
            self._write_status()
            if not any(b > a for a, b in ranges.values()) and set(ranges) == set(decode_offset(start)):
                return start  # nothing new and the same partitions: no batch
            if self._delay_batch(sum(available.values())):
                return start
            end = encode_offset(ranges)
            with self._lock:
                self._losses_at_plan = losses
                self._membership_at_plan = (status.member_id, status.member_epoch)
            self.issued = end
            self.records_planned += sum(take.values())
            self._last_batch_at = time.monotonic()
            return end
        except (OSError, KafkaException, GroupMemberError, grpc.RpcError) as e:
            log.warning("group %s: skipping this trigger: %s", self.options.group, e)
            return start

    def _settle(self, done: Ranges) -> None:
        """Batch `done` has run and its output is staged: commit its ends with the member epoch, then publish the
        output of the partitions the coordinator accepted and discard the rest (a refused commit means another
        driver may own the partition now and re-read the batch from the last commit)."""
        lost = self._lost_since_plan()
        if lost:
            refused = set(done)
            accepted: set[TopicPartition] = set()
            self._committed.clear()
        else:
            held = self.member.assignment() | self.member.pending_revocation()
            to_commit = {tp: b for tp, (_, b) in done.items() if tp in held and self._committed.get(tp) != b}
            accepted = {tp for tp, (_, b) in done.items() if tp in held and self._committed.get(tp) == b}
            refused = set(done) - held
            if to_commit:
                # A transport error raises here: the outcome is unknown, so nothing is settled and the commit is
                # sent again at the next trigger (it is idempotent).
                errors = self.member.commit_offsets(to_commit, membership=self._membership_at_plan)
                for tp, off in to_commit.items():
                    if errors.get(tp, 0) == 0:
                        accepted.add(tp)
                        self._committed[tp] = off
                    else:
                        refused.add(tp)
                codes = sorted({errors.get(tp, 0) for tp in to_commit} - {0})
                if codes:
                    log.warning("group %s: commit refused for %s (error codes %s)", self.options.group,
                                _fmt(refused), codes)
        if refused:
            self.refused_commits += 1
        if self.staging is not None and lost:
            self.staging.discard(reason="the member lost its partitions after the batch was planned")
        elif self.staging is not None:
            self.staging.settle(accepted, {tp for tp in refused if done[tp][1] > done[tp][0]})
        for tp in accepted:
            self._next[tp] = done[tp][1]
        for tp in refused:  # resume from the coordinator's offset, if still owned
            self._next.pop(tp, None)
            self._committed.pop(tp, None)

    def _release_unread(self) -> None:
        """Release every partition pending revocation: none is in a running batch (latestOffset runs between
        batches), and the last batch that read one has just been settled."""
        pending = self.member.pending_revocation()
        if pending:
            gone = self._gone(pending)  # a deleted topic's partitions are taken back like any others
            self.member.release(pending)
            for tp in pending:
                self._committed.pop(tp, None)
                self._next.pop(tp, None)
            log.info("group %s: released %s", self.options.group, _fmt(pending))
            if gone:
                partitions_gone(gone, self.options.spark.fail_on_data_loss)

    def _start_positions(self, gained: frozenset[TopicPartition] | set[TopicPartition],
                         watermarks: Mapping[TopicPartition, tuple[int, int]]) -> dict[TopicPartition, int]:
        """Committed offsets of newly owned partitions; Spark's starting options for those with none, committed at
        once so that every later owner resumes from the same place. An offset Kafka no longer has is a data loss
        (`check_position`: fails the query unless ``failOnDataLoss=false``)."""
        committed = self.member.fetch_offsets(gained)
        starting, lossy = self.options.spark.starting, self.options.spark.fail_on_data_loss
        specs = {tp: starting.spec(tp, tp in (self._existed_at_start or ()))
                 for tp in gained if tp in watermarks and committed.get(tp, -1) < 0}
        by_time = self._offsets_for_times({tp: ms for tp, (kind, ms) in specs.items() if kind == "timestamp"})
        positions: dict[TopicPartition, int] = {}
        for tp in gained:
            if tp not in watermarks:
                continue
            log_start, end = watermarks[tp]
            if tp not in specs:
                positions[tp] = check_position(tp, committed[tp], log_start, end, lossy, "committed")
                continue
            positions[tp] = resolve_start(tp, specs[tp], log_start, end, by_time.get(tp, -1), self.options.spark)
        pin = {tp: positions[tp] for tp in specs}
        self._committed.update({tp: o for tp, o in committed.items() if tp in positions and tp not in pin and o >= 0})
        if pin:
            errors = self.member.commit_offsets(pin)
            self._committed.update({tp: o for tp, o in pin.items() if errors.get(tp, 0) == 0})
        if gained:
            log.info("group %s: reading %s from %s", self.options.group, _fmt(gained),
                     ", ".join(f"{t}:{p}@{o}" for (t, p), o in sorted(positions.items())))
        return positions

    def _offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Kafka's offsetsForTimes: the first offset at or after each timestamp, -1 if there is none."""
        if not timestamps:
            return {}
        request = {KafkaTopicPartition(t, p): OffsetSpec.for_timestamp(ms) for (t, p), ms in timestamps.items()}
        futures = self._admin.list_offsets(request, request_timeout=10.0)
        return {(tp.topic, tp.partition): f.result(timeout=10.0).offset for tp, f in futures.items()}

    def _subscribed_partitions(self) -> frozenset[TopicPartition]:
        """The subscribed partitions that exist now (the starting options apply to these only)."""
        metadata = self._admin.list_topics(timeout=10)
        return frozenset((t, p) for t, topic in metadata.topics.items() if self.options.spark.matches(t)
                         for p in topic.partitions)

    def _gone(self, partitions: frozenset[TopicPartition]) -> set[TopicPartition]:
        """Partitions whose topic is no longer in the cluster's metadata (a topic with an error is not gone)."""
        topics = self._admin.list_topics(timeout=10).topics
        return {(t, p) for t, p in partitions
                if t not in topics or (topics[t].error is None and p not in topics[t].partitions)}

    def _delay_batch(self, available: int) -> bool:
        """Spark's minOffsetsPerTrigger: no batch while fewer records are available, unless maxTriggerDelay has
        passed since the last batch. Never under availableNow (its last batch may be small)."""
        n = self.options.spark.min_offsets_per_trigger
        if n is None or self._available_now is not None or available >= n:
            return False
        return time.monotonic() - self._last_batch_at < self.options.spark.max_trigger_delay_ms / 1000

    def _watermarks(self, partitions: frozenset[TopicPartition],
                    with_log_start: bool) -> dict[TopicPartition, tuple[int, int]]:
        """(log start, end) per partition from one batched ListOffsets per kind (log start only when needed)."""
        if not partitions:
            return {}
        timeout = 10.0

        def list_offsets(spec: Any) -> dict[TopicPartition, int]:
            request = {KafkaTopicPartition(t, p): spec for t, p in partitions}
            futures = self._admin.list_offsets(request, request_timeout=timeout)
            return {(tp.topic, tp.partition): f.result(timeout=timeout).offset for tp, f in futures.items()}

        ends = list_offsets(OffsetSpec.latest())
        starts = list_offsets(OffsetSpec.earliest()) if with_log_start else {}
        return {tp: (starts.get(tp, 0), end) for tp, end in ends.items()}

    # --- availableNow, drain, status ---------------------------------------------------------------------------
    def prepare_available_now(self, join_timeout_s: float = 60.0) -> None:
        """Read up to the end offsets of now; wait for a first assignment, or the query would end at once."""
        deadline = time.monotonic() + join_timeout_s
        while not self.member.assignment() and time.monotonic() < deadline:
            time.sleep(0.05)
        request = {KafkaTopicPartition(t, p): OffsetSpec.latest() for t, p in self._subscribed_partitions()}
        futures = self._admin.list_offsets(request, request_timeout=10) if request else {}
        self._available_now = {(tp.topic, tp.partition): f.result(timeout=10).offset for tp, f in futures.items()}

    def _drain_requested(self) -> bool:
        return self.options.drain_file is not None and os.path.exists(self.options.drain_file)

    def _drain(self) -> None:
        """The last batch is settled (`_settle` ran first): leave the group and say so."""
        log.info("group %s: draining: member %s leaves the group", self.options.group, self.member.member_id)
        self.member.close()
        self._drained = True
        self._write_status()
        assert self.options.drain_file is not None
        Path(self.options.drain_file + ".done").write_text(json.dumps({"batches": self.batches}))

    def _write_status(self) -> None:
        path = self.options.status_file
        if path is None:
            return
        status = self.member.status()
        doc = {
            "member_id": status.member_id,
            "member_epoch": status.member_epoch,
            "assignment": sorted(f"{t}:{p}" for t, p in status.assignment),
            "pending_revocation": sorted(f"{t}:{p}" for t, p in status.pending_revocation),
            "committed": {f"{t}:{p}": o for (t, p), o in sorted(self._committed.items())},
            "batches": self.batches,
            "records_planned": self.records_planned,
            "losses": self._losses,
            "refused_commits": self.refused_commits,
            "max_tasks": self.max_tasks,
            "published_files": self.staging.published_files if self.staging else 0,
            "discarded_files": self.staging.discarded_files if self.staging else 0,
            "drained": self._drained,
            "pid": os.getpid(),
            "time": time.time(),
        }
        _atomic_write(path, json.dumps(doc, sort_keys=True))

    def close(self) -> None:
        """Query stopped without a drain: leave the group without committing the running batch (it may not have
        completed), so the next owner re-reads it rather than skipping it."""
        if not self._drained:
            self.member.close()
            self._drained = True
            if self.staging is not None:
                self.staging.discard(reason="the query stopped before the batch was committed")
            with contextlib.suppress(OSError):
                self._write_status()


def _configure_logging() -> None:
    """The reader process is started by the JVM with no logging set up; its stderr ends up in the driver's.
    Log this source's and the member's events there (one line each: joined, gained, released, fenced)."""
    logger = logging.getLogger("groupcoord")
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [reader %(process)d]: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def _install_sigterm_handler() -> None:
    """Spark SIGTERMs the reader process when a query stops, and calls `stop()` only if that unwinds the
    process (it does not otherwise): turn the signal into SystemExit so the member leaves the group."""
    if threading.current_thread() is not threading.main_thread():
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_sigterm)


def _atomic_write(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".status-", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _fmt(tps: Any) -> str:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(p)
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in by_topic.items()) or "-"
