"""Topic metadata from a Kafka cluster, refreshed in the background and served as an immutable image.

Why a background refresh and a cached image: the coordinator consults metadata on every heartbeat (KIP-848
members subscribe by name, the group epoch is bumped when the subscribed topics' metadata hash changes),
so reading it must never wait on the network. A refresh builds a whole new `MetadataImage` and swaps it in;
readers see either the old or the new image, never a mix. A failed refresh keeps the previous image: a
Kafka outage must not make topics look deleted, which would revoke every partition of every group.

One refresh is two Admin requests:
  1. Metadata (`list_topics`) for the topic names;
  2. DescribeTopics (`describe_topics`) for topic ids, partitions and each replica's broker with its rack.
Topic ids are Kafka's own (a topic deleted and re-created under the same name gets a new id, as in Kafka's
coordinator). They are converted to the canonical UUID text form (8-4-4-4-12) that `topic_id_for_name`
produces, so ids look alike whichever source made them; Kafka's tools print the same 128 bits in base64.

Fallback: a broker too old for DescribeTopics (error UNSUPPORTED_VERSION / _UNSUPPORTED_FEATURE) gives no
ids and no racks. The image is then built from the Metadata response alone, with ids from
`topic_id_for_name(name)` and racks unknown, and a warning is logged once. Any other DescribeTopics failure
fails the refresh: switching ids back and forth would look like every topic being re-created.

The librdkafka mock cluster answers DescribeTopics only when it has a controller (`EmbeddedKafka` sets
one); it then returns real topic ids and the racks set with `set_broker_rack`.

Internal topics (names starting with `__`, e.g. `__consumer_offsets`) are left out: groups never
subscribe to them through the coordinator.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection

from groupcoord.coordinator.core.metadata import EMPTY_IMAGE, MetadataImage, TopicMetadata, topic_id_for_name
from groupcoord.coordinator.runtime.kafka_common import BackgroundRefresh, admin_client

__all__ = ["KafkaMetadataSource", "kafka_uuid_to_str"]

log = logging.getLogger(__name__)

_UNSUPPORTED = frozenset({KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION})
_MASK64 = (1 << 64) - 1


def kafka_uuid_to_str(kafka_uuid: Any) -> str:
    """confluent_kafka's `Uuid` in canonical UUID text form (its `str()` is Kafka's base64 form)."""
    msb = kafka_uuid.get_most_significant_bits() & _MASK64
    lsb = kafka_uuid.get_least_significant_bits() & _MASK64
    return str(uuid.UUID(int=(msb << 64) | lsb))


def _is_internal(name: str) -> bool:
    return name.startswith("__")


class KafkaMetadataSource(BackgroundRefresh):
    """Topic ids, partition counts and partition racks of a Kafka cluster, refreshed every
    `refresh_interval_s` on a daemon thread (`start()`/`stop()`), or on demand with `refresh_now()`.

    `client_config` is merged over the defaults, for security settings (`security.protocol`, SASL...).
    `clock` (monotonic seconds) and `wall_clock` (epoch seconds) are injectable for tests.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        refresh_interval_s: float = 30.0,
        request_timeout_s: float = 10.0,
        client_config: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__("kafka metadata refresh", "kafka-metadata-refresh", log, refresh_interval_s,
                         request_timeout_s, clock)
        self._wall_clock = wall_clock
        self._admin = admin_client(bootstrap_servers, "groupcoord-metadata", __name__, client_config)

        self._image: MetadataImage = EMPTY_IMAGE
        self._callbacks: list[Callable[[MetadataImage], None]] = []
        self._callbacks_lock = threading.Lock()
        self.last_refresh_ok_ms: int | None = None  # epoch ms of the last successful refresh
        self._warned_no_describe = False

    # --- reading ---------------------------------------------------------------------------------------
    def snapshot(self) -> MetadataImage:
        """The last image built (empty before the first successful refresh). Never blocks."""
        return self._image

    def on_change(self, callback: Callable[[MetadataImage], None]) -> None:
        """Call `callback(new_image)` (on the refreshing thread) each time a refresh yields a different
        image, so the coordinator can bump the epoch of groups whose subscribed topics changed. Keep it
        short (e.g. enqueue an event): the next refresh waits for it."""
        with self._callbacks_lock:
            self._callbacks.append(callback)

    # --- refreshing ------------------------------------------------------------------------------------
    def _refresh(self) -> bool:
        """The image is now current; a failure (raised) keeps the previous one (see the module docstring)."""
        image = self._fetch()
        self._failures.success()
        self.last_refresh_ok_ms = int(self._wall_clock() * 1000)
        previous, self._image = self._image, image
        if image != previous:
            self._notify(image)  # under the refresh lock, so callbacks see images in the order they were made
        return True

    def _notify(self, image: MetadataImage) -> None:
        with self._callbacks_lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            try:
                callback(image)
            except Exception:
                log.exception("metadata on_change callback %r failed", callback)

    def _kept_on_failure(self) -> str:
        return f"keeping the previous image ({len(self._image.by_name)} topics)"

    # --- fetching ------------------------------------------------------------------------------------
    def _fetch(self) -> MetadataImage:
        try:
            cluster = self._admin.list_topics(timeout=self.request_timeout_s)
        finally:
            self._admin.poll(0)  # hand queued librdkafka log lines to the Python logger
        names = sorted(name for name in cluster.topics if not _is_internal(name))
        if not names:
            return EMPTY_IMAGE
        try:
            return self._describe(names)
        except KafkaException as exc:
            if _code(exc) not in _UNSUPPORTED:
                raise
        if not self._warned_no_describe:
            self._warned_no_describe = True
            log.warning(
                "the Kafka cluster does not support DescribeTopics: topic ids derived from names, racks unknown"
            )
        topics = []
        for name in names:
            topic = cluster.topics[name]
            if topic.error is None:
                topics.append(TopicMetadata(topic_id_for_name(name), name, len(topic.partitions)))
            elif (kept := self._kept(name, KafkaException(topic.error))) is not None:
                topics.append(kept)
        return MetadataImage.of(topics)

    def _describe(self, names: list[str]) -> MetadataImage:
        futures = self._admin.describe_topics(TopicCollection(names), request_timeout=self.request_timeout_s)
        topics = []
        for name in names:
            try:
                # The Admin call enforces request_timeout; the margin only guards against a lost callback.
                description = futures[name].result(timeout=self.request_timeout_s + 5)
            except KafkaException as exc:
                if (kept := self._kept(name, exc)) is not None:
                    topics.append(kept)
                continue
            partitions = sorted(description.partitions, key=lambda p: p.id)
            if [p.id for p in partitions] != list(range(len(partitions))):
                raise RuntimeError(f"topic {name!r}: partition ids are not 0..n-1: {[p.id for p in partitions]}")
            racks = tuple(frozenset(r.rack for r in p.replicas if r.rack) for p in partitions)
            topics.append(
                TopicMetadata(
                    topic_id=kafka_uuid_to_str(description.topic_id),
                    name=name,
                    partition_count=len(partitions),
                    # () means "racks unknown": keep the image small when no broker has a rack
                    partition_racks=racks if any(racks) else (),
                )
            )
        return MetadataImage.of(topics)

    def _kept(self, name: str, exc: KafkaException) -> TopicMetadata | None:
        """What to do with a topic whose entry came back with an error.

        UNKNOWN_TOPIC_OR_PART: it was deleted between the two requests, so it is gone. Another broker error
        (e.g. LEADER_NOT_AVAILABLE during an election) says nothing about the topic's shape: keep what the
        previous image had, so a blip does not look like a deletion. A local error (negative code: timeout,
        transport) means the cluster did not answer, and UNSUPPORTED_VERSION means the broker cannot
        describe topics at all: both are re-raised, failing the refresh or switching to the fallback.
        """
        code = _code(exc)
        if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        if code < 0 or code in _UNSUPPORTED:
            raise exc
        return self._image.by_name.get(name)


def _code(exc: KafkaException) -> int:
    err = exc.args[0] if exc.args else None
    return err.code() if isinstance(err, KafkaError) else KafkaError._FAIL
