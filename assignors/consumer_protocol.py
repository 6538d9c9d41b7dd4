"""The "consumer" embedded protocol of the classic group protocol: what consumers put in the opaque bytes.

Pure and shared: the classic clients (leader assignment) and the coordinator core (classic members of a
consumer group, online upgrade and downgrade, as Kafka's `ConsumerProtocol`) both read and write it.
The encoding is Kafka's own (`ConsumerProtocolSubscription` / `ConsumerProtocolAssignment`, versions 0-3,
big-endian, non-flexible), so a Kafka consumer's bytes decode here and ours decode there:

    Subscription => Version Topics UserData [OwnedPartitions (v1+)] [GenerationId (v2+)] [RackId (v3+)]
      Version        => int16
      Topics         => [string]
      UserData       => nullable bytes
      OwnedPartitions => [Topic [Partition]]     (cooperative rebalancing: what the member still holds)
      GenerationId   => int32, -1 when unknown   (which generation the owned partitions come from)
      RackId         => nullable string
    Assignment => Version AssignedPartitions UserData
      AssignedPartitions => [Topic [int32]]
      UserData           => nullable bytes

Versioning (the seed's "versioned encoding"): a reader decodes the fields of every version it knows and
ignores bytes after them, so a member that is upgraded first writes a newer version that older members still
read (Kafka's rule); a version below 0 or a truncated payload is an error.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3  # the newest version this module writes and reads
ASSIGNMENT_VERSION = 3

TopicPartition = tuple[str, int]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ProtocolDecodeError(ValueError):
    """Bytes that are not a consumer protocol subscription or assignment."""


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


# --- writing ---------------------------------------------------------------------------------------------------
class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def string(self, v: str | None) -> None:
        if v is None:
            self.i16(-1)
            return
        data = v.encode("utf-8")
        self.i16(len(data))
        self.parts.append(data)

    def bytes_(self, v: bytes | None) -> None:
        if v is None:
            self.i32(-1)
            return
        self.i32(len(v))
        self.parts.append(v)

    def topic_partitions(self, tps: Iterable[TopicPartition]) -> None:
        by_topic: dict[str, list[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, []).append(p)
        self.i32(len(by_topic))
        for topic in sorted(by_topic):
            self.string(topic)
            partitions = sorted(by_topic[topic])
            self.i32(len(partitions))
            for p in partitions:
                self.i32(p)

    def done(self) -> bytes:
        return b"".join(self.parts)


def encode_subscription(s: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    if not 0 <= version <= SUBSCRIPTION_VERSION:
        raise ValueError(f"subscription version {version} is not in [0, {SUBSCRIPTION_VERSION}]")
    w = _Writer()
    w.i16(version)
    w.i32(len(s.topics))
    for topic in s.topics:
        w.string(topic)
    w.bytes_(s.user_data)
    if version >= 1:
        w.topic_partitions(s.owned_partitions)
    if version >= 2:
        w.i32(s.generation)
    if version >= 3:
        w.string(s.rack_id)
    return w.done()


def encode_assignment(a: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    if not 0 <= version <= ASSIGNMENT_VERSION:
        raise ValueError(f"assignment version {version} is not in [0, {ASSIGNMENT_VERSION}]")
    w = _Writer()
    w.i16(version)
    w.topic_partitions(a.partitions)
    w.bytes_(a.user_data)
    return w.done()


# --- reading ---------------------------------------------------------------------------------------------------
class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolDecodeError(f"truncated: need {n} bytes at offset {self.pos} of {len(self.data)}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def string(self) -> str | None:
        n = self.i16()
        if n == -1:
            return None
        try:
            return bytes(self._take(n)).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolDecodeError(f"string is not UTF-8: {e}") from None

    def required_string(self) -> str:
        s = self.string()
        if s is None:
            raise ProtocolDecodeError(f"null string at offset {self.pos}")
        return s

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n == -1 else bytes(self._take(n))

    def count(self) -> int:
        n = self.i32()
        if n < 0 or n > len(self.data):
            raise ProtocolDecodeError(f"invalid array length {n}")
        return n

    def topic_partitions(self) -> tuple[TopicPartition, ...]:
        out: list[TopicPartition] = []
        for _ in range(self.count()):
            topic = self.required_string()
            out.extend((topic, self.i32()) for _ in range(self.count()))
        return tuple(out)

    def version(self) -> int:
        version = self.i16()
        if version < 0:
            raise ProtocolDecodeError(f"negative version {version}")
        return version


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(data)
    version = r.version()
    topics = tuple(r.required_string() for _ in range(r.count()))
    user_data = r.bytes_()
    owned = r.topic_partitions() if version >= 1 else ()
    generation = r.i32() if version >= 2 else -1
    rack_id = r.string() if version >= 3 else None
    return Subscription(topics, user_data, owned, generation, rack_id)


def decode_version(data: bytes) -> int:
    """The version a subscription or assignment was written in (Kafka answers a member in its own version)."""
    return _Reader(data).version()


def decode_assignment(data: bytes) -> Assignment:
    if not data:  # the coordinator's "no assignment" (a member the leader left out)
        return Assignment(())
    r = _Reader(data)
    r.version()
    partitions = r.topic_partitions()
    return Assignment(partitions, r.bytes_())
