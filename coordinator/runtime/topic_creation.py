"""Creating a streams group's missing internal topics: the runtime half of Kafka's
AutoTopicCreationManager.createStreamsInternalTopics.

The core decides which topics and how many partitions (a `CreateInternalTopics` task with every heartbeat
while they are missing); a creator here performs it without blocking the event loop. As Kafka's manager it
skips a topic whose creation is in flight and one whose last failure is younger than the task's
`error_ttl_ms` (twice the heartbeat interval), so heartbeats do not turn into a CreateTopics storm. A topic
that already exists counts as created. The group leaves NotReady by itself once the metadata source shows
the topics: the creator only asks that source to refresh at once.

`KafkaTopicCreator` uses the Admin client's CreateTopics (replication factor -1: the broker's default, unless
the topology names one; the topology's topic configs are passed on). `StaticTopicCreator` is the in-memory
implementation over a `StaticMetadataSource`, for a coordinator that runs without Kafka. `FunctionTopicCreator`
calls a function per topic: `serve --embedded-kafka` creates them in librdkafka's mock cluster, which has no
CreateTopics API.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaError
from confluent_kafka.admin import NewTopic

from groupcoord.coordinator.core.streams.topology import TopicInfo
from groupcoord.coordinator.runtime.kafka_common import admin_client
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource

log = logging.getLogger(__name__)


class TopicCreator(Protocol):
    def create(self, topics: Sequence[TopicInfo], error_ttl_ms: int) -> None:
        """Start creating `topics` (never blocks); failures are kept `error_ttl_ms` before a retry."""

    def errors(self, names: Sequence[str]) -> dict[str, str]:
        """The unexpired creation failures among `names`, by topic."""


class _Backoff:
    """In-flight topics and recent failures, shared by the request path and the completion callbacks."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.inflight: set[str] = set()
        self.failed: dict[str, tuple[str, float]] = {}  # name -> (message, expires at, clock seconds)

    def claim(self, topics: Sequence[TopicInfo]) -> list[TopicInfo]:
        now = self.clock()
        with self.lock:
            out = []
            for t in topics:
                failure = self.failed.get(t.name)
                if failure is not None and failure[1] > now:
                    continue
                if t.name in self.inflight:
                    continue
                self.failed.pop(t.name, None)
                self.inflight.add(t.name)
                out.append(t)
            return out

    def done(self, name: str, error: str | None, ttl_ms: int) -> None:
        with self.lock:
            self.inflight.discard(name)
            if error is not None:
                self.failed[name] = (error[:300], self.clock() + ttl_ms / 1000)

    def errors(self, names: Sequence[str]) -> dict[str, str]:
        now = self.clock()
        with self.lock:
            return {n: f[0] for n in names if (f := self.failed.get(n)) is not None and f[1] > now}


class KafkaTopicCreator:
    def __init__(self, bootstrap_servers: str, on_created: Callable[[], Any] | None = None,
                 request_timeout_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._admin = admin_client(bootstrap_servers, "groupcoord-topic-creation", __name__)
        self._backoff = _Backoff(clock)
        self._on_created = on_created
        self._timeout_s = request_timeout_s

    def create(self, topics: Sequence[TopicInfo], error_ttl_ms: int) -> None:
        claimed = self._backoff.claim(topics)
        if not claimed:
            return
        new = [NewTopic(t.name, num_partitions=t.partitions, replication_factor=t.replication_factor or -1,
                        config=dict(t.topic_configs)) for t in claimed]
        log.info("creating streams internal topics: %s", ", ".join(f"{t.name}({t.partitions})" for t in claimed)[:500])
        try:
            futures = self._admin.create_topics(new, operation_timeout=self._timeout_s,
                                                request_timeout=self._timeout_s)
        except Exception as e:  # a local refusal (e.g. a bad argument): every topic failed
            for t in claimed:
                self._backoff.done(t.name, str(e), error_ttl_ms)
            return
        for name, future in futures.items():
            future.add_done_callback(functools.partial(self._done, name, ttl_ms=error_ttl_ms))

    def _done(self, name: str, future: Any, *, ttl_ms: int) -> None:
        error: str | None = None
        exc = future.exception()
        if exc is not None:
            kafka_error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if kafka_error is None or kafka_error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                error = kafka_error.str() if kafka_error is not None else str(exc)
                log.warning("creating streams internal topic %s failed: %s", name[:249], error[:300])
        self._backoff.done(name, error, ttl_ms)
        if error is None and self._on_created is not None:  # off librdkafka's callback thread
            threading.Thread(target=self._on_created, name="topic-created-refresh", daemon=True).start()

    def errors(self, names: Sequence[str]) -> dict[str, str]:
        return self._backoff.errors(names)


class StaticTopicCreator:
    """In-memory CreateTopics: the topics appear in the static metadata source at once."""

    def __init__(self, source: StaticMetadataSource) -> None:
        self.source = source
        self.created: list[str] = []

    def create(self, topics: Sequence[TopicInfo], error_ttl_ms: int) -> None:
        self.created += self.source.add_topics({t.name: t.partitions for t in topics})

    def errors(self, names: Sequence[str]) -> dict[str, str]:
        return {}


class FunctionTopicCreator:
    """Creates each topic with `create(name, partitions)` on the calling thread (fast, in-process creators);
    a failure is kept `error_ttl_ms` like Kafka's."""

    def __init__(self, create: Callable[[str, int], Any], exists: Callable[[str], bool],
                 on_created: Callable[[], Any] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._create, self._exists, self._on_created = create, exists, on_created
        self._backoff = _Backoff(clock)

    def create(self, topics: Sequence[TopicInfo], error_ttl_ms: int) -> None:
        made = False
        for t in self._backoff.claim(topics):
            error = None
            if not self._exists(t.name):
                try:
                    self._create(t.name, t.partitions)
                    made = True
                except Exception as e:
                    error = str(e)
                    log.warning("creating streams internal topic %s failed: %s", t.name[:249], error[:300])
            self._backoff.done(t.name, error, error_ttl_ms)
        if made and self._on_created is not None:
            threading.Thread(target=self._on_created, name="topic-created-refresh", daemon=True).start()

    def errors(self, names: Sequence[str]) -> dict[str, str]:
        return self._backoff.errors(names)
