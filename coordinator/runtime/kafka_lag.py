"""Log-start and end offsets from Kafka, cached for lag-aware assignors.

Why a cache refreshed in the background: the assignor runs on the coordinator's background executor and
must get its `LagSnapshot` without waiting on the network, and a Kafka outage must not stop assignments:
the assignor then works from the last offsets seen (lag-aware balancing tolerates stale lag far better
than no assignment), and `snapshot_age_seconds()` tells the operator how stale.

Each refresh is two ListOffsets calls covering every partition of interest, one for the earliest offsets
(log start) and one for the latest (end), issued together; librdkafka groups each call's partitions into
one request per partition leader. One call per partition would cost one round trip per partition.

Partitions of interest are those the `partitions` callable returns (typically every partition in the
metadata image, see `partitions_of`) plus every partition ever asked for through `offsets()`. A partition
Kafka reports as unknown (topic deleted) is dropped from both the interest set and the cache.

Log start is real data, not 0: the broker deletes old segments (and the mock cluster keeps a bounded log),
so lag for a member without a committed offset under `auto.offset.reset=earliest` is end - log start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from groupcoord.assignors.api import LagSnapshot, PartitionOffsets
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.runtime.kafka_common import BackgroundRefresh, admin_client

__all__ = ["KafkaLagSource", "TopicPartitionKey", "build_lag_snapshot", "partitions_of"]

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]  # (topic name, partition)
_AUTO_OFFSET_RESET = ("earliest", "latest", "none")


def partitions_of(image: MetadataImage) -> list[TopicPartitionKey]:
    """Every (topic name, partition) in a metadata image: the usual `partitions` for `KafkaLagSource`."""
    return [(t.name, p) for t in image.by_name.values() for p in range(t.partition_count)]


class KafkaLagSource(BackgroundRefresh):
    """(log start, end) offsets per partition, refreshed every `refresh_interval_s` on a daemon thread.

    `isolation_level` picks what "end" means: READ_UNCOMMITTED gives the high watermark, READ_COMMITTED
    the last stable offset (what a read_committed consumer can reach). `client_config` is merged over the
    defaults (security settings...). `clock` (monotonic seconds) is injectable for tests.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        partitions: Callable[[], Iterable[TopicPartitionKey]] | None = None,
        refresh_interval_s: float = 5.0,
        request_timeout_s: float = 10.0,
        isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
        client_config: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__("kafka offsets refresh", "kafka-lag-refresh", log, refresh_interval_s, request_timeout_s,
                         clock)
        self._partitions = partitions
        self._isolation_level = isolation_level
        self._admin = admin_client(bootstrap_servers, "groupcoord-lag", __name__, client_config)

        self._cache: dict[TopicPartitionKey, tuple[int, int]] = {}  # replaced whole, never mutated
        self._interest: set[TopicPartitionKey] = set()
        self._warm_topics: set[str] = set()  # topics already in the client's metadata cache
        self._interest_lock = threading.Lock()

    # --- reading ---------------------------------------------------------------------------------------
    def offsets(self, topic_partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, tuple[int, int]]:
        """(log start, end) for each requested partition that has been fetched; never waits on the network.

        Partitions not fetched yet are missing from the result; they join the interest set and the
        background thread is woken to fetch them.
        """
        cache = self._cache
        wanted = list(topic_partitions)
        result = {tp: cache[tp] for tp in wanted if tp in cache}
        if len(result) < len(wanted):
            with self._interest_lock:
                new = [tp for tp in wanted if tp not in self._interest]
                self._interest.update(new)
            if new:
                self._wake.set()
        return result

    def snapshot_age_seconds(self) -> float:
        """Seconds since the last refresh that fetched every partition of interest; infinity before one.
        A partial refresh (one leader unreachable) updates the partitions it got but not this age."""
        return self.age_seconds()

    def _refresh(self) -> bool:
        with self._interest_lock:
            if self._partitions is not None:
                self._interest.update(self._partitions())
            wanted = sorted(self._interest)
        if not wanted:
            self._failures.success()
            return True
        self._warm_metadata_cache({topic for topic, _ in wanted})
        tps = [TopicPartition(topic, partition) for topic, partition in wanted]
        kwargs = {"request_timeout": self.request_timeout_s, "isolation_level": self._isolation_level}
        try:
            earliest = self._admin.list_offsets({tp: OffsetSpec.earliest() for tp in tps}, **kwargs)
            latest = self._admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, **kwargs)
        finally:
            self._admin.poll(0)  # hand queued librdkafka log lines to the Python logger
        by_key_earliest = {(tp.topic, tp.partition): f for tp, f in earliest.items()}
        by_key_latest = {(tp.topic, tp.partition): f for tp, f in latest.items()}

        cache = dict(self._cache)
        gone: list[TopicPartitionKey] = []
        errors: dict[str, int] = {}
        for key in wanted:
            try:
                start = self._offset(by_key_earliest[key])
                end = self._offset(by_key_latest[key])
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    gone.append(key)
                    cache.pop(key, None)
                else:
                    reason = err.str() if isinstance(err, KafkaError) else str(exc)
                    errors[reason] = errors.get(reason, 0) + 1
                continue
            except Exception as exc:  # e.g. the futures' safety timeout
                errors[repr(exc)] = errors.get(repr(exc), 0) + 1
                continue
            cache[key] = (start, end)
        self._cache = cache
        if gone:
            with self._interest_lock:
                self._interest.difference_update(gone)
            self._warm_topics.difference_update(topic for topic, _ in gone)
            log.info("dropped %d partition(s) Kafka no longer knows, e.g. %s", len(gone), gone[0])
        if errors:
            summary = "; ".join(f"{n} partition(s): {reason}" for reason, n in errors.items())
            self._failures.failure(self._kept_on_failure(),
                                   f"{sum(errors.values())} of {len(wanted)} partition(s) failed: {summary}")
            return False
        self._failures.success()
        return True

    def _warm_metadata_cache(self, topics: set[str]) -> None:
        """Fetch cluster metadata once when topics the client has not seen join the interest set.

        ListOffsets needs each partition's leader. For a topic missing from librdkafka's metadata cache the
        Admin client asks for it and re-checks on a 1 s timer, so the first ListOffsets for a new topic took
        1-3 s (or timed out under a short request timeout) against the mock cluster; one Metadata request
        first makes it answer in milliseconds. Best effort: a failure here shows up in ListOffsets anyway.
        """
        if topics <= self._warm_topics:
            return
        try:
            self._admin.list_topics(timeout=self.request_timeout_s)
        except KafkaException:
            return
        self._warm_topics = topics | self._warm_topics

    def _offset(self, future: Future[Any]) -> int:
        # The Admin call enforces request_timeout itself; the margin only guards against a lost callback.
        offset = int(future.result(timeout=self.request_timeout_s + 5).offset)
        if offset < 0:
            # librdkafka reports some failures (e.g. a dropped connection) as offset -1001 (OFFSET_INVALID)
            raise KafkaException(KafkaError(KafkaError._FAIL, f"no offset returned (got {offset})"))
        return offset

    def _kept_on_failure(self) -> str:
        return "keeping the previous offsets"


def build_lag_snapshot(
    offsets_by_partition: Mapping[TopicPartitionKey, tuple[int, int]],
    committed: Mapping[TopicPartitionKey, int],
    topic_ids: Mapping[str, str],
    auto_offset_reset: str,
) -> LagSnapshot:
    """Combine Kafka's (log start, end) offsets with the group's committed offsets into the assignors'
    `LagSnapshot`, keyed by (topic id, partition).

    Partitions without Kafka offsets are left out (the assignor counts unknown lag as 0, rather than
    guessing); partitions of topics missing from `topic_ids` are left out (not in the metadata image, so no
    assignor can place them). A negative committed offset is Kafka's "no offset" (-1) and means none.
    `auto_offset_reset` is the group's `auto.offset.reset`: earliest, latest, none or by_duration:<ISO-8601>
    (KIP-1106; for lag it counts like earliest, an upper bound).
    """
    if auto_offset_reset not in _AUTO_OFFSET_RESET and not auto_offset_reset.startswith("by_duration:"):
        raise ValueError(
            f"auto_offset_reset must be one of {', '.join(_AUTO_OFFSET_RESET)} or by_duration:<ISO-8601>, "
            f"got {auto_offset_reset!r}"
        )
    result: dict[tuple[str, int], PartitionOffsets] = {}
    for (topic, partition), (log_start, end) in offsets_by_partition.items():
        topic_id = topic_ids.get(topic)
        if topic_id is None:
            continue
        c = committed.get((topic, partition))
        result[(topic_id, partition)] = PartitionOffsets(
            end_offset=end,
            committed_offset=c if c is not None and c >= 0 else None,
            log_start_offset=log_start,
        )
    return LagSnapshot(offsets=result, auto_offset_reset=auto_offset_reset)
