"""Topic metadata as the core sees it: an immutable image, replaced whole when the source refreshes.

The image doubles as the assignors' `TopicDescriber`. Topic ids are stable UUIDs; for sources that do not
have ids (the static config) they are derived from the topic name, so the same name always has the same id.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

_TOPIC_NAMESPACE = uuid.UUID("6f1d2a8e-4b7c-4f7e-9a51-3c0de5c0ffee")


def topic_id_for_name(name: str) -> str:
    """A stable UUID for a topic name (uuid5), used where the metadata source has no ids of its own."""
    return str(uuid.uuid5(_TOPIC_NAMESPACE, name))


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: str
    name: str
    partition_count: int
    partition_racks: tuple[frozenset[str], ...] = ()  # per partition; empty tuple = racks unknown


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """All known topics. Build with `MetadataImage.of(...)`; compare subscriptions with `topics_hash`."""

    by_id: Mapping[str, TopicMetadata] = field(default_factory=dict)
    by_name: Mapping[str, TopicMetadata] = field(default_factory=dict)

    @staticmethod
    def of(topics: Iterable[TopicMetadata]) -> MetadataImage:
        items = list(topics)
        return MetadataImage(by_id={t.topic_id: t for t in items}, by_name={t.name: t for t in items})

    # --- TopicDescriber -------------------------------------------------------------------------------
    def partition_count(self, topic_id: str) -> int:
        t = self.by_id.get(topic_id)
        return -1 if t is None else t.partition_count

    def partition_racks(self, topic_id: str, partition: int) -> frozenset[str]:
        t = self.by_id.get(topic_id)
        if t is None or partition >= len(t.partition_racks):
            return frozenset()
        return t.partition_racks[partition]

    # --- helpers ----------------------------------------------------------------------------------------
    def topics_hash(self, topic_names: Iterable[str]) -> int:
        """A hash of the metadata of the named topics (id, partition count, racks); Kafka 4.x bumps the
        group epoch when the hash of the subscribed topics' metadata changes."""
        h = hashlib.blake2b(digest_size=8)
        for name in sorted(set(topic_names)):
            t = self.by_name.get(name)
            if t is None:
                continue
            h.update(f"{t.name}\0{t.topic_id}\0{t.partition_count}\0".encode())
            for racks in t.partition_racks:
                h.update(",".join(sorted(racks)).encode() + b";")
        return int.from_bytes(h.digest(), "big", signed=True)


EMPTY_IMAGE = MetadataImage()
