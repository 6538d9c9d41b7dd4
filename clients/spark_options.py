"""Spark's Kafka source options for the groupcoord source: the names and semantics of Spark's Structured
Streaming + Kafka integration guide, parsed and checked once when the source loads.

Why a module of its own: the source (`groupcoord.clients.spark_source`) is about ownership and exactly-once publication;
these options only decide where a partition starts, how a batch is cut into tasks and when a batch may run.
All of it is pure (no Kafka, no Spark): the reader does the I/O and asks these functions what to do.

One difference in meaning runs through all of them. Spark's own source keeps its positions in the query's
checkpoint, so ``startingOffsets`` applies "when a new query is started". Here positions live in the group's
committed offsets, so the starting options apply to a partition *the group has no committed offset for*;
the position chosen is committed at once, and every later owner of the partition resumes from it.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import re2

__all__ = ["EARLIEST", "LATEST", "DataLossError", "SparkKafkaOptions", "StartingOffsets", "check_position",
           "parse_duration_ms", "partitions_gone", "resolve_start", "split_ranges"]

log = logging.getLogger("groupcoord.spark_source")

TopicPartition = tuple[str, int]
EARLIEST = -2  # Spark's JSON sentinels (KafkaOffsetRangeLimit)
LATEST = -1
_STRATEGIES = ("error", "latest")
_DURATION = re.compile(r"^\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_SHOWN = 60  # characters of a bad value echoed in an error


class DataLossError(RuntimeError):
    """Records the query was to read are gone (deleted by retention or DeleteRecords, or the partition
    vanished): raised only with ``failOnDataLoss=true`` (Spark's default), and it fails the query."""


def _bad(name: str, raw: str, want: str) -> ValueError:
    shown = raw if len(raw) <= _SHOWN else raw[:_SHOWN] + "..."
    return ValueError(f"groupcoord source: option {name!r} must be {want}, got {shown!r}")


def parse_duration_ms(name: str, raw: str) -> int:
    """Spark's "time with units" (``15m``, ``30s``, ``500ms``; a bare number is milliseconds)."""
    m = _DURATION.match(raw)
    if m is None:
        raise _bad(name, raw, "a duration such as 30s, 15m or 500ms")
    return int(int(m.group(1)) * _UNIT_MS[(m.group(2) or "ms").lower()])


def _boolean(name: str, raw: str | None, default: bool) -> bool:
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise _bad(name, raw, "true or false")
    return value == "true"


def _partition_json(name: str, raw: str, minimum: int) -> tuple[tuple[TopicPartition, int], ...]:
    """``{"topicA":{"0":23,"1":-1}}`` as sorted ((topic, partition), value) pairs."""
    want = 'JSON like {"topic":{"0":23,"1":-2}}'
    try:
        doc = json.loads(raw)
    except ValueError:
        raise _bad(name, raw, want) from None
    if not isinstance(doc, dict) or not doc:
        raise _bad(name, raw, want)
    out: dict[TopicPartition, int] = {}
    for topic, partitions in doc.items():
        if not isinstance(partitions, dict):
            raise _bad(name, raw, want)
        for p, value in partitions.items():
            if not (isinstance(p, str) and p.isdigit()) or isinstance(value, bool) or not isinstance(value, int):
                raise _bad(name, raw, want)
            if value < minimum:
                raise _bad(name, raw, f"values >= {minimum}")
            out[(topic, int(p))] = value
    return tuple(sorted(out.items()))


@dataclass(frozen=True, slots=True)
class StartingOffsets:
    """Where a partition with no committed offset starts. Precedence as in Spark: ``startingTimestamp``, then
    ``startingOffsetsByTimestamp``, then ``startingOffsets``. A partition created after the reader started
    (a new partition, or a new topic matching ``subscribePattern``) starts at the earliest offset, as Spark's
    "newly discovered partitions"."""

    default: str = "latest"  # earliest | latest
    offsets: tuple[tuple[TopicPartition, int], ...] = ()  # startingOffsets as JSON: -2 earliest, -1 latest
    timestamps: tuple[tuple[TopicPartition, int], ...] = ()  # startingOffsetsByTimestamp
    timestamp: int | None = None  # startingTimestamp
    by_timestamp_strategy: str = "error"  # startingOffsetsByTimestampStrategy

    def spec(self, tp: TopicPartition, existed_at_start: bool) -> tuple[str, int]:
        """("offset", n) with n >= 0 or EARLIEST / LATEST, or ("timestamp", ms)."""
        if not existed_at_start:
            return ("offset", EARLIEST)
        if self.timestamp is not None:
            return ("timestamp", self.timestamp)
        if self.timestamps:
            return ("timestamp", _named(dict(self.timestamps), tp, "startingOffsetsByTimestamp"))
        if self.offsets:
            return ("offset", _named(dict(self.offsets), tp, "startingOffsets"))
        return ("offset", EARLIEST if self.default == "earliest" else LATEST)


def _named(values: Mapping[TopicPartition, int], tp: TopicPartition, option: str) -> int:
    """Spark requires the JSON to name every partition; here only those that need a start must be named."""
    if tp not in values:
        raise ValueError(f"groupcoord source: {option} names no value for {tp[0]}:{tp[1]}, which has no committed "
                         f"offset; name every partition (-2 earliest, -1 latest)")
    return values[tp]


@dataclass(frozen=True, slots=True)
class SparkKafkaOptions:
    """The options of Spark's Kafka source that this source speaks (see the README's table)."""

    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    starting: StartingOffsets = StartingOffsets()
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000

    @staticmethod
    def parse(opts: Mapping[str, str], max_offsets_per_trigger: int | None) -> SparkKafkaOptions:
        """`opts` with lower-case keys (Spark's option names are case-insensitive)."""
        named = [n for n in ("topics", "subscribe", "subscribepattern") if opts.get(n, "").strip()]
        if len(named) != 1:
            raise ValueError("groupcoord source: give exactly one of the options 'subscribe' (or 'topics') and "
                             "'subscribePattern'")
        topics: tuple[str, ...] = ()
        pattern = None
        if named[0] == "subscribepattern":
            pattern = opts["subscribepattern"].strip()
            _check_regex(pattern)
        else:
            topics = tuple(sorted({t.strip() for t in opts[named[0]].split(",") if t.strip()}))
        min_rows = _positive(opts, "minOffsetsPerTrigger")
        if min_rows is not None and max_offsets_per_trigger is not None and min_rows > max_offsets_per_trigger:
            raise ValueError(f"groupcoord source: option 'minOffsetsPerTrigger' ({min_rows}) must not exceed "
                             f"'maxOffsetsPerTrigger' ({max_offsets_per_trigger})")
        delay = opts.get("maxtriggerdelay")
        return SparkKafkaOptions(
            topics=topics,
            topic_pattern=pattern,
            starting=_starting(opts),
            fail_on_data_loss=_boolean("failOnDataLoss", opts.get("failondataloss"), True),
            include_headers=_boolean("includeHeaders", opts.get("includeheaders"), False),
            min_partitions=_positive(opts, "minPartitions"),
            min_offsets_per_trigger=min_rows,
            max_trigger_delay_ms=parse_duration_ms("maxTriggerDelay", delay) if delay else 15 * 60_000,
        )

    def matches(self, topic: str) -> bool:
        """Whether the reader subscribes to `topic` (for the partitions that exist when it starts)."""
        if self.topic_pattern is None:
            return topic in self.topics
        return _compiled(self.topic_pattern).fullmatch(topic) is not None


def _positive(opts: Mapping[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None or raw.strip() == "":
        return None
    if not raw.strip().isdigit() or int(raw) < 1:
        raise _bad(name, raw, "a positive integer")
    return int(raw)


@functools.lru_cache(maxsize=16)
def _compiled(pattern: str) -> Any:
    options = re2.Options()
    options.log_errors = False  # the error is ours to report, in one line
    return re2.compile(pattern, options)


def _check_regex(pattern: str) -> None:
    """KIP-848 subscriptions are RE2 (Kafka's RE2/J); Spark's are Java regexes. Most patterns are both."""
    try:
        _compiled(pattern)
    except re2.error:
        raise _bad("subscribePattern", pattern, "a regular expression (RE2 syntax)") from None


def _starting(opts: Mapping[str, str]) -> StartingOffsets:
    raw = opts.get("startingoffsets", "latest").strip()
    default = raw.lower()
    offsets: tuple[tuple[TopicPartition, int], ...] = ()
    if raw.startswith("{"):
        default, offsets = "latest", _partition_json("startingOffsets", raw, EARLIEST)
    elif default not in ("earliest", "latest"):
        raise _bad("startingOffsets", raw, 'earliest, latest or JSON like {"topic":{"0":23,"1":-2}}')
    by_ts = opts.get("startingoffsetsbytimestamp", "").strip()
    timestamps = _partition_json("startingOffsetsByTimestamp", by_ts, 0) if by_ts else ()
    ts_raw = opts.get("startingtimestamp", "").strip()
    if ts_raw and not ts_raw.isdigit():
        raise _bad("startingTimestamp", ts_raw, "a timestamp in milliseconds since the epoch")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in _STRATEGIES:
        raise _bad("startingOffsetsByTimestampStrategy", strategy, "error or latest")
    return StartingOffsets(default, offsets, timestamps, int(ts_raw) if ts_raw else None, strategy)


def check_position(tp: TopicPartition, offset: int, log_start: int, end: int, fail_on_data_loss: bool,
                   what: str) -> int:
    """`offset` if Kafka still has it; else a data loss: raised with ``failOnDataLoss``, logged and moved into
    [log start, end] without. `what` says where the offset came from (committed, startingOffsets)."""
    if log_start <= offset <= end:
        return offset
    if offset < log_start:
        problem = f"records {offset}-{log_start - 1} were deleted (log start {log_start})"
    else:
        problem = f"the log ends at {end} (truncated, or the topic was recreated)"
    message = f"groupcoord source: data lost in {tp[0]}:{tp[1]}: {what} offset {offset}, but {problem}"
    if fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to skip them")
    moved = min(max(offset, log_start), end)
    log.warning("%s; resuming at %d (failOnDataLoss=false)", message, moved)
    return moved


def resolve_start(tp: TopicPartition, spec: tuple[str, int], log_start: int, end: int, by_time: int,
                  options: SparkKafkaOptions) -> int:
    """The start of a partition with no committed offset, from its `StartingOffsets.spec`; `by_time` is Kafka's
    answer to ListOffsets by timestamp (-1: no record at or after it)."""
    kind, value = spec
    if kind == "timestamp":
        if by_time >= 0:
            return by_time
        if options.starting.by_timestamp_strategy == "error":
            raise RuntimeError(f"groupcoord source: {tp[0]}:{tp[1]} has no record at or after timestamp {value}; "
                               "set startingOffsetsByTimestampStrategy=latest to start at the end")
        return end
    if value == EARLIEST:
        return log_start
    if value == LATEST:
        return end
    return check_position(tp, value, log_start, end, options.fail_on_data_loss, "startingOffsets")


def partitions_gone(partitions: Iterable[TopicPartition], fail_on_data_loss: bool) -> None:
    """Partitions this reader owned whose topic was deleted (Spark: "are gone. Some data may have been missed")."""
    gone = sorted(partitions)
    names = ", ".join(f"{t}:{p}" for t, p in gone[:10]) + (f" and {len(gone) - 10} more" if len(gone) > 10 else "")
    message = f"groupcoord source: data lost: {names} gone (topic deleted); some data may have been missed"
    if fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to go on without them")
    log.warning("%s (failOnDataLoss=false)", message)


def split_ranges(ranges: Iterable[tuple[TopicPartition, int, int]],
                 min_partitions: int) -> list[tuple[TopicPartition, int, int]]:
    """Spark's ``minPartitions``: when there are fewer non-empty ranges than `min_partitions`, cut each into
    parts in proportion to its size (at least one), so there are about `min_partitions` parts
    (KafkaOffsetRangeCalculator does the same); each part is read by its own task."""
    nonempty = [r for r in ranges if r[2] > r[1]]
    if len(nonempty) >= min_partitions:
        return nonempty
    total = sum(end - start for _, start, end in nonempty)
    out: list[tuple[TopicPartition, int, int]] = []
    for tp, start, end in nonempty:
        size = end - start
        parts = min(size, max(1, round(size / total * min_partitions)))
        for i in range(parts):
            a, b = start + size * i // parts, start + size * (i + 1) // parts
            out.append((tp, a, b))
    return out
