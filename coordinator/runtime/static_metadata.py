"""Topic metadata from configuration: `--topic NAME:PARTITIONS` flags or a TOML `[topics]` table.

This is the metadata source for running without Kafka (demos, Spark jobs whose "partitions" are not Kafka
partitions) and the in-memory implementation of the metadata-source interface that tests of the layers
above use. Topic ids are derived from names (`topic_id_for_name`), so a restart with the same config gives
the same ids and persisted assignments stay valid.

TOML shape::

    [topics]
    orders = 12                                           # partition count
    events = { partitions = 2, racks = [["r1", "r2"], ["r2", "r3"]] }   # racks per partition
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping
from typing import Protocol

from groupcoord.coordinator.core.metadata import MetadataImage, TopicMetadata, topic_id_for_name

__all__ = [
    "MetadataSource",
    "StaticMetadataSource",
    "TopicsConfig",
    "parse_topic_flag",
    "topics_from_toml",
    "validate_topic_name",
]

log = logging.getLogger(__name__)

# name -> partition count, or (partition count, racks of each partition's replicas)
TopicsConfig = Mapping[str, int | tuple[int, list[list[str]]]]

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_MAX_TOPIC_LEN = 249  # Kafka's limit (Topic.MAX_NAME_LENGTH)


class MetadataSource(Protocol):
    """What the coordinator runtime needs from a metadata source (static config or Kafka)."""

    def snapshot(self) -> MetadataImage:
        """The current image; cheap, never blocks on I/O."""
        ...

    def on_change(self, callback: Callable[[MetadataImage], None]) -> None:
        """Call `callback(new_image)` whenever the image changes."""
        ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def age_seconds(self) -> float:
        """Seconds since the image was last known to be current (for a staleness metric)."""
        ...


def validate_topic_name(name: str) -> str:
    """Kafka's topic-name rule (Topic.validate), so a config never names a topic Kafka could not have."""
    if not name:
        raise ValueError("topic name is empty")
    if name in (".", ".."):
        raise ValueError(f"topic name cannot be {name!r}")
    if len(name) > _MAX_TOPIC_LEN:
        raise ValueError(f"topic name {name[:40]!r}... is {len(name)} characters; Kafka allows {_MAX_TOPIC_LEN}")
    if not _LEGAL_TOPIC.fullmatch(name):
        raise ValueError(
            f"topic name {name!r} has characters Kafka does not allow; use ASCII letters, digits, '.', '_', '-'"
        )
    return name


def _validate_partitions(name: str, partitions: object) -> int:
    # bool is an int subclass; `orders = true` is a config mistake, not one partition.
    if isinstance(partitions, bool) or not isinstance(partitions, int):
        raise ValueError(f"topic {name!r}: partition count must be an integer, got {partitions!r}")
    if partitions < 1:
        raise ValueError(f"topic {name!r}: partition count must be >= 1, got {partitions}")
    return partitions


def parse_topic_flag(value: str) -> tuple[str, int]:
    """Parse `NAME:PARTITIONS` (e.g. `orders:12`) as given to `--topic`."""
    name, sep, count = value.rpartition(":")
    if not sep:
        raise ValueError(f"--topic expects NAME:PARTITIONS (e.g. orders:12), got {value!r}")
    try:
        partitions = int(count.strip())
    except ValueError:
        raise ValueError(
            f"--topic {value!r}: partition count {count!r} is not an integer (expected NAME:PARTITIONS)"
        ) from None
    name = validate_topic_name(name.strip())
    return name, _validate_partitions(name, partitions)


def topics_from_toml(table: Mapping[str, object]) -> dict[str, int | tuple[int, list[list[str]]]]:
    """Validate a parsed TOML `[topics]` table into `StaticMetadataSource`'s argument."""
    out: dict[str, int | tuple[int, list[list[str]]]] = {}
    for name, value in table.items():
        validate_topic_name(name)
        if isinstance(value, Mapping):
            unknown = set(value) - {"partitions", "racks"}
            if unknown:
                raise ValueError(
                    f"[topics.{name}]: unknown key(s) {sorted(unknown)}; allowed: partitions, racks"
                )
            if "partitions" not in value:
                raise ValueError(f"[topics.{name}]: missing 'partitions'")
            partitions = _validate_partitions(name, value["partitions"])
            racks_value = value.get("racks", [])
            if not isinstance(racks_value, list) or not all(
                isinstance(rs, list) and all(isinstance(r, str) for r in rs) for rs in racks_value
            ):
                raise ValueError(
                    f"[topics.{name}]: racks must be a list (one per partition) of lists of rack names, "
                    f'e.g. racks = [["r1", "r2"], ["r2", "r3"]]'
                )
            out[name] = (partitions, racks_value)
        else:
            out[name] = _validate_partitions(name, value)
    return out


def _build_image(topics: TopicsConfig) -> MetadataImage:
    items = []
    for name, spec in topics.items():
        validate_topic_name(name)
        if isinstance(spec, tuple):
            partitions, racks = spec
            _validate_partitions(name, partitions)
            if racks and len(racks) != partitions:
                raise ValueError(
                    f"topic {name!r}: racks lists {len(racks)} partition(s) but the topic has {partitions}; "
                    "give one rack list per partition, or none"
                )
            partition_racks = tuple(frozenset(r) for r in racks)
        else:
            partitions = _validate_partitions(name, spec)
            partition_racks = ()
        items.append(TopicMetadata(topic_id_for_name(name), name, partitions, partition_racks))
    return MetadataImage.of(items)


class StaticMetadataSource:
    """A `MetadataSource` over a fixed topic list. `update()` replaces it (tests, config reload)."""

    def __init__(self, topics: TopicsConfig) -> None:
        self._image = _build_image(topics)
        self._topics = dict(topics)
        self._callbacks: list[Callable[[MetadataImage], None]] = []
        self._lock = threading.Lock()

    def snapshot(self) -> MetadataImage:
        return self._image

    def on_change(self, callback: Callable[[MetadataImage], None]) -> None:
        with self._lock:
            self._callbacks.append(callback)

    def update(self, topics: TopicsConfig) -> None:
        """Replace the topic list; callbacks run (on this thread) only if the image actually changed."""
        image = _build_image(topics)
        with self._lock:
            self._topics = dict(topics)
            if image == self._image:
                return
            self._image = image
            callbacks = list(self._callbacks)
        for callback in callbacks:
            try:
                callback(image)
            except Exception:
                log.exception("metadata on_change callback %r failed", callback)

    def add_topics(self, topics: Mapping[str, int]) -> list[str]:
        """Create topics that do not exist yet (the in-memory CreateTopics); returns the names it added."""
        with self._lock:
            merged = dict(self._topics)
        added = [name for name in topics if name not in merged]
        merged.update({name: topics[name] for name in added})
        if added:
            self.update(merged)
        return added

    def start(self) -> None:
        """Nothing to start; present so runtimes treat every source alike."""

    def stop(self) -> None:
        """Nothing to stop."""

    def age_seconds(self) -> float:
        """Always 0: configuration is current by definition."""
        return 0.0
