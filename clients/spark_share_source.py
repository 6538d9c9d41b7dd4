"""The groupcoord Spark source's share mode (``group.type=share``): queue semantics (KIP-932) for Spark drivers.

Usage: the ``groupcoord`` source (`groupcoord.clients.spark_source`) with ``.option("group.type", "share")``. Several
drivers read the *same* partitions: a share group hands each driver offset ranges under an acquisition lock,
and a partition count no longer caps how many drivers can work on a topic.

Options (besides the source's ``coordinator``, ``group``, ``topics``, ``bootstrap.servers``,
``maxOffsetsPerTrigger``, ``tasksPerBatch``, ``fetch.timeout.ms``, ``drain.file``, ``status.file``,
``staging.dir``/``publish.dir``, ``kafka.*`` and ``coordinator.tls.*``, which mean the same here):

=========================  =====================================================================================
``group.type``             ``share`` selects this mode (``consumer``, the default, is the consumer-group source)
``maxOffsetsPerTrigger``   records acquired per micro-batch at most (default 10000 here: every acquired record
                           is locked until the batch ends, so a batch is bounded)
``lock.renew``             ``true`` (default): while a batch runs, renew its locks (AcknowledgeType RENEW,
                           KIP-1222) every third of the record lock duration, so a slow batch keeps them;
                           ``false``: a batch slower than the lock duration loses them
``failOnLockExpiry``       ``true``: fail the query when a batch's locks expired before it was acknowledged;
                           ``false`` (default): log it, count it in the status file, and (with ``staging.dir``)
                           discard that output, since the records go to another driver
``acquisitions.file``      append one JSON line per acquired batch (ranges and delivery counts) and per
                           acknowledgement outcome: the history a checker reads
=========================  =====================================================================================

Options of the consumer-group mode that do not apply here are refused: ``startingOffsets`` (a share group
starts where the group config ``share.auto.offset.reset`` says, ``latest`` by default), ``instance.id``,
``server.assignor``, ``rebalance.timeout.ms``.

Theory of operation:

- The stream reader (its own Python process on the driver) keeps a `ShareMember` heartbeating. An offset is
  ``{"batch": N, "ranges": [[topic, partition, first, last, delivery count], ...]}``: the ranges this driver
  acquired for batch N. `latestOffset` acquires (ShareAcquire) up to ``maxOffsetsPerTrigger`` offsets of the
  assigned partitions; `partitions(start, end)` reads only ``end`` and packs its ranges into tasks, which read
  the records from Kafka (assign + seek, as in consumer mode).
- Spark calls `latestOffset` for batch N+1 only after batch N has run and its sink returned: that call
  acknowledges N's ranges (ACCEPT). With ``staging.dir``, the output of the ranges the coordinator accepted is
  then published and the rest discarded (their locks had expired: the records went, or go, to another driver).
  So a record's output is published by the driver whose ACCEPT the coordinator took, once.
- While batch N runs, a thread renews its locks. A driver that dies (kill -9) or freezes stops renewing: its
  locks expire after the record lock duration (``group.share.record.lock.duration.ms`` or the group's
  ``share.record.lock.duration.ms``), and the records are delivered to another driver with a higher delivery
  count. What the dead driver's sink wrote for them was never acknowledged: without ``staging.dir`` it is a
  duplicate (at-least-once); with it, it was never published.
- Lock expiry is visible: a failed renewal or a refused ACCEPT (INVALID_RECORD_STATE) is logged with the batch
  and counts, counted in the status file (``expired_records``), and fails the query with ``failOnLockExpiry``.
- An ACCEPT whose reply is lost (transport error) is sent again at the next trigger; if the first was applied
  the second is refused and the batch counts as expired: with ``staging.dir`` its output is discarded although
  the coordinator accepted it (missing records). That window is one RPC, as in consumer mode.
- A query stopped without a drain leaves the group: the coordinator releases its locks at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from confluent_kafka import KafkaException
from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows

from groupcoord.clients.share_member import ACCEPT, RENEW, AckResult, AcquiredRange, ShareMember
from groupcoord.clients.spark_reader_base import LazyStateReader
from groupcoord.clients.spark_source import (
    KafkaRange,
    ReadTask,
    SourceOptions,
    _atomic_write,
    _configure_logging,
    _install_sigterm_handler,
    pack,
)
from groupcoord.clients.spark_staging import StagingArea, fsync_dir

__all__ = ["ShareSourceOptions", "ShareStreamReader", "decode_share_offset", "encode_share_offset", "is_share",
           "tasks_for"]

log = logging.getLogger("groupcoord.spark_share_source")

DEFAULT_MAX_RECORDS = 10_000
_REFUSED = ("startingoffsets", "instance.id", "server.assignor", "rebalance.timeout.ms")
Range = tuple[str, int, int, int, int]  # topic, partition, first, last (inclusive), delivery count


def is_share(options: Mapping[str, str]) -> bool:
    """True when the options ask for the share mode (``group.type=share``)."""
    value = {k.lower(): str(v) for k, v in options.items()}.get("group.type", "consumer").strip().lower()
    if value not in ("consumer", "share"):
        raise ValueError(f"groupcoord source: option 'group.type' must be consumer or share, got {value!r}")
    return value == "share"


def _flag(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None or raw.strip() == "":
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise ValueError(f"groupcoord source: option {name!r} must be true or false, got {raw!r}")
    return raw.strip().lower() == "true"


@dataclass(frozen=True, slots=True)
class ShareSourceOptions:
    """The consumer mode's options (`SourceOptions`, shared parsing) plus the share mode's own."""

    source: SourceOptions
    max_records: int = DEFAULT_MAX_RECORDS
    lock_renew: bool = True
    fail_on_lock_expiry: bool = False
    acquisitions_file: str | None = None

    @staticmethod
    def parse(options: Mapping[str, str]) -> ShareSourceOptions:
        opts = {k.lower(): str(v) for k, v in options.items()}
        refused = sorted(k for k in _REFUSED if opts.get(k, "").strip())
        if refused:
            raise ValueError(f"groupcoord source: option(s) {', '.join(refused)} do not apply with group.type=share "
                             "(a share group starts where its group config share.auto.offset.reset says)")
        source = SourceOptions.parse(options)
        return ShareSourceOptions(
            source=source,
            max_records=source.max_offsets_per_trigger or DEFAULT_MAX_RECORDS,
            lock_renew=_flag(opts, "lock.renew", True),
            fail_on_lock_expiry=_flag(opts, "failOnLockExpiry", False),
            acquisitions_file=opts.get("acquisitions.file") or None,
        )


# --- offsets as JSON ---------------------------------------------------------------------------------------------
def encode_share_offset(batch: int, ranges: Sequence[AcquiredRange]) -> dict[str, Any]:
    """Sorted, so that Spark (which compares offsets as JSON text) sees equal offsets as equal."""
    return {"batch": batch, "ranges": sorted([r.topic, r.partition, r.first_offset, r.last_offset, r.delivery_count]
                                             for r in ranges)}


def decode_share_offset(offset: Mapping[str, Any] | None) -> list[Range]:
    return [(str(t), int(p), int(a), int(b), int(c)) for t, p, a, b, c in (offset or {}).get("ranges", [])]


def tasks_for(ranges: Sequence[Range], tasks: int) -> list[ReadTask]:
    """Read tasks for a batch's ranges. A task reads at most one range per partition (the executor reads one
    contiguous range per partition), so the k-th range of every partition goes into round k, and each round is
    packed into at most `tasks` tasks. Acquired ranges of one partition are few (they merge when adjacent)."""
    by_tp: dict[tuple[str, int], list[Range]] = {}
    for r in sorted(ranges):
        by_tp.setdefault((r[0], r[1]), []).append(r)
    rounds: list[list[KafkaRange]] = []
    for rs in by_tp.values():
        for k, (t, p, first, last, _) in enumerate(rs):
            if k == len(rounds):
                rounds.append([])
            rounds[k].append(KafkaRange(t, p, first, last + 1))
    return [task for rnd in rounds for task in pack(rnd, tasks)]


# --- the reader --------------------------------------------------------------------------------------------------
class ShareStreamReader(LazyStateReader[ShareSourceOptions, "_ShareReaderState"]):
    """Runs on the driver (its own process); see `LazyStateReader` for why the member starts late."""

    def _new_state(self) -> _ShareReaderState:
        return _ShareReaderState(self.options)

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.options.max_records)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        self._planned_state(
            end, "groupcoord source (share): Spark replays a batch this reader did not acquire (a query restarted "
                 "from an existing checkpoint); its locks are gone and its records may be with another driver. "
                 "Start the query with a fresh checkpointLocation.")
        return tasks_for(decode_share_offset(end), self.options.source.tasks_per_batch)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, ReadTask)
        from groupcoord.clients.spark_kafka_read import read_task  # executor side only

        return read_task(self.options.source, self.schema, partition)


class _ShareReaderState:
    """The driver-side state of one query run: the share member, the batch in flight and its lock renewer."""

    def __init__(self, options: ShareSourceOptions) -> None:
        _configure_logging()
        self.options = options
        src = options.source
        self.issued: dict[str, Any] | None = None  # the last end offset returned to Spark
        self._settled: dict[str, Any] | None = None
        self._in_flight: list[AcquiredRange] = []  # the ranges of `issued`, with topic ids for acknowledging
        self._lost_early: set[tuple[str, int, int]] = set()  # (topic, partition, first) whose renewal was refused
        self._ack_lock = threading.Lock()  # a renewal never interleaves with the batch's ACCEPT
        self._stop = threading.Event()
        self._drained = False
        self.batches = 0
        self.acquired_records = 0
        self.accepted_records = 0
        self.expired_records = 0
        self.renewals = 0
        self.staging = (StagingArea(Path(src.staging_dir), Path(src.publish_dir))
                        if src.staging_dir and src.publish_dir else None)
        if self.staging is not None:
            self.staging.discard(reason="left by an earlier run; never acknowledged")
        self.member = ShareMember(src.coordinator, src.group, src.topics, src.bootstrap_servers,
                                  kafka_config={"log.connection.close": False, **dict(src.kafka)},
                                  channel=src.credentials().channel(src.coordinator))
        self.member.start()
        self._renewer: threading.Thread | None = None
        if options.lock_renew:
            self._renewer = threading.Thread(target=self._renew_loop, name="share-lock-renewer", daemon=True)
            self._renewer.start()
        _install_sigterm_handler()
        log.info("share group %s: member %s started for topics %s", src.group, self.member.member_id,
                 ",".join(src.topics))

    # --- latestOffset ------------------------------------------------------------------------------------------
    def latest_offset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        if self._drained:
            return start
        try:
            if self.issued is not None and start == self.issued and self._settled != start:
                self._settle()  # raises (and is retried next trigger) on a transport error
                self._settled = start
                self.batches += 1
            if self._drain_requested():
                self._drain()
                return start
            budget = limit.max_rows if isinstance(limit, ReadMaxRows) else self.options.max_records
            ranges = self.member.acquire(max_records=max(1, budget))
            self._write_status()
            if not ranges:
                return start
            batch = self.batches + 1
            end = encode_share_offset(batch, ranges)
            with self._ack_lock:
                self._in_flight = ranges
                self._lost_early = set()
            self.issued = end
            self.acquired_records += sum(r.count for r in ranges)
            self._history("acquired", batch, ranges)
            return end
        except (OSError, KafkaException, grpc.RpcError) as e:
            log.warning("share group %s: skipping this trigger: %s", self.options.source.group, e)
            return start

    def _settle(self) -> None:
        """Batch `issued` has run and its sink returned: ACCEPT its ranges, then publish the output of the
        accepted ones and discard the rest (their locks expired: another driver gets, or got, those records)."""
        with self._ack_lock:
            ranges = list(self._in_flight)
            results = self.member.acknowledge_ranges(ranges, ACCEPT)
            self._in_flight = []
        batch = self.batches + 1
        accepted = [r for r, res in zip(ranges, results, strict=True) if res.error_code == 0]
        expired = [r for r, res in zip(ranges, results, strict=True) if res.error_code != 0]
        self.accepted_records += sum(r.count for r in accepted)
        self._history("accepted", batch, accepted)
        if self.staging is not None:
            _settle_staged(self.staging, accepted, expired)
        if expired:
            self._history("expired", batch, expired, [res for res in results if res.error_code != 0])
            self.expired_records += sum(r.count for r in expired)
            codes = sorted({res.error_code for res in results if res.error_code})
            log.warning("share group %s: batch %d: the locks on %d record(s) in %d range(s) were lost before the "
                        "batch was acknowledged (error codes %s): %s; %s", self.options.source.group, batch,
                        sum(r.count for r in expired), len(expired), codes, _fmt(expired),
                        "their output is discarded" if self.staging is not None
                        else "their output may be a duplicate of another driver's")
            if self.options.fail_on_lock_expiry:
                self._write_status()
                raise LockExpiredError(f"groupcoord source (share): batch {batch} lost its locks on "
                                       f"{sum(r.count for r in expired)} record(s) before it was acknowledged "
                                       f"(error codes {codes}); failOnLockExpiry is set")
        self._write_status()

    # --- renewing the locks of the batch in flight ------------------------------------------------------------
    def _renew_loop(self) -> None:
        """RENEW the running batch's locks every third of the lock duration (KIP-1222), so a batch slower than
        the lock duration keeps its records; a renewal refused means the lock is already lost: say so now."""
        while not self._stop.wait(self._renew_interval_s()):
            with self._ack_lock:
                ranges = [r for r in self._in_flight
                          if (r.topic, r.partition, r.first_offset) not in self._lost_early]
                if not ranges:
                    continue
                try:
                    results = self.member.acknowledge_ranges(ranges, RENEW)
                except grpc.RpcError as e:
                    log.warning("share group %s: renewing locks failed: %s", self.options.source.group, e.code())
                    continue
                self.renewals += 1
                lost = [r for r, res in zip(ranges, results, strict=True) if res.error_code != 0]
                self._lost_early.update((r.topic, r.partition, r.first_offset) for r in lost)
            if lost:
                log.warning("share group %s: renewal refused for %s: the batch running now lost those locks; its "
                            "acknowledgement will fail for them", self.options.source.group, _fmt(lost))

    def _renew_interval_s(self) -> float:
        lock_ms = self.member.record_lock_duration_ms or 3000
        return max(0.1, lock_ms / 3000)

    # --- drain, status, history --------------------------------------------------------------------------------
    def _drain_requested(self) -> bool:
        return self.options.source.drain_file is not None and os.path.exists(self.options.source.drain_file)

    def _drain(self) -> None:
        """The last batch is settled (`_settle` ran first): leave the group and say so."""
        log.info("share group %s: draining: member %s leaves the group", self.options.source.group,
                 self.member.member_id)
        self._close_member()
        self._drained = True
        self._write_status()
        assert self.options.source.drain_file is not None
        Path(self.options.source.drain_file + ".done").write_text(json.dumps({"batches": self.batches}))

    def _close_member(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(5)
        self.member.close()  # leaving releases whatever this member still holds

    def _write_status(self) -> None:
        path = self.options.source.status_file
        if path is None:
            return
        doc = {
            "group_type": "share",
            "member_id": self.member.member_id,
            "member_epoch": self.member.member_epoch,
            "assignment": sorted(f"{t}:{p}" for t, p in self.member.assignment()),
            "batches": self.batches,
            "acquired_records": self.acquired_records,
            "accepted_records": self.accepted_records,
            "expired_records": self.expired_records,
            "renewals": self.renewals,
            "record_lock_duration_ms": self.member.record_lock_duration_ms,
            "published_files": self.staging.published_files if self.staging else 0,
            "discarded_files": self.staging.discarded_files if self.staging else 0,
            "drained": self._drained,
            "pid": os.getpid(),
            "time": time.time(),
        }
        _atomic_write(path, json.dumps(doc, sort_keys=True))

    def _history(self, event: str, batch: int, ranges: Sequence[AcquiredRange],
                 results: Sequence[AckResult] = ()) -> None:
        path = self.options.acquisitions_file
        if path is None or not ranges:
            return
        line = {"event": event, "batch": batch, "member_id": self.member.member_id, "time": time.time(),
                "ranges": [[r.topic, r.partition, r.first_offset, r.last_offset, r.delivery_count] for r in ranges]}
        if results:
            line["error_codes"] = sorted({res.error_code for res in results})
        with open(path, "a") as f:
            f.write(json.dumps(line, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())  # the acquisition is on disk before Spark can process it

    def close(self) -> None:
        """Query stopped without a drain: leave the group; the coordinator releases the running batch's locks
        (the batch may not have completed), and its staged output is discarded."""
        if not self._drained:
            self._close_member()
            self._drained = True
            if self.staging is not None:
                self.staging.discard(reason="the query stopped before the batch was acknowledged")
            with contextlib.suppress(OSError):
                self._write_status()


class LockExpiredError(RuntimeError):
    """A batch's acquisition locks expired before it was acknowledged, and ``failOnLockExpiry`` is set."""


def _settle_staged(staging: StagingArea, accepted: Sequence[AcquiredRange], expired: Sequence[AcquiredRange]) -> None:
    """Publish the staged rows of accepted ranges, discard those of expired ones. The ranges of one batch share
    one lock deadline, so in practice all or none expire; a mix is filtered by offset (files with an ``offset``
    column), or else published whole (duplicates are then possible, and logged)."""
    if not expired:
        staging.settle(accepted={(r.topic, r.partition) for r in accepted}, refused=())
        return
    if not accepted:
        staging.discard(reason="the batch's locks expired before it was acknowledged")
        return
    keep = [(r.topic, r.partition, r.first_offset, r.last_offset) for r in accepted]
    files = staging.staged()
    for f in files:
        if not _filter_by_offset(f, staging.publish / f.name, keep):
            os.replace(f, staging.publish / f.name)
            log.warning("published %s whole: it has no offset column to drop the expired ranges by", f.name)
            continue
        f.unlink()
    fsync_dir(staging.publish)
    staging.filtered_files += len(files)


def _filter_by_offset(src: Path, dst: Path, keep: Sequence[tuple[str, int, int, int]]) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(src)
    if "offset" not in table.column_names:
        return False
    rows = zip(table.column("topic").to_pylist(), table.column("partition").to_pylist(),
               table.column("offset").to_pylist(), strict=True)
    mask = pa.array([any(t == kt and p == kp and a <= o <= b for kt, kp, a, b in keep) for t, p, o in rows],
                    pa.bool_())
    tmp = dst.with_name("." + dst.name + ".tmp")
    pq.write_table(pc.filter(table, mask), tmp)
    os.replace(tmp, dst)
    return True


def _fmt(ranges: Sequence[AcquiredRange]) -> str:
    return " ".join(f"{r.topic}:{r.partition}@{r.first_offset}-{r.last_offset}" for r in ranges) or "-"
