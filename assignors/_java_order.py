"""The orders Kafka's Java assignors visit topics in, so `uniform` hands out the same partitions.

Kafka's UniformHomogeneousAssignmentBuilder lists the unassigned partitions topic by topic in the
iteration order of a `java.util.HashSet<Uuid>` built from the subscription: by bucket, that is by the
spread `Uuid.hashCode()` masked to the table size. Which partitions a new member gets therefore depends
on that order; visiting topics the same way gives Kafka's answer on Kafka's inputs.

Members likewise: Kafka's broker hands its assignors the members in a `java.util.HashMap<String, ...>`
filled one by one (TargetAssignmentBuilder), so they are visited by the spread `String.hashCode()` masked
to that map's table size (Kafka's own tests pass a TreeMap; for their one-letter member ids both orders
agree). Using that order, never the caller's, also keeps the result independent of how members are listed.

Topic ids arrive as canonical UUID text (the coordinator's form), as Kafka's base64 form (Kafka's tests),
or as any other string (hand-made inputs: hashed as a Java `String`).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Collection, Iterable
from functools import lru_cache

import numpy as np

_MASK64 = (1 << 64) - 1


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


@lru_cache(maxsize=65536)
def uuid_bits(topic_id: str) -> tuple[int, int] | None:
    """(most, least) significant bits as Java's signed longs, or None when the id is not a UUID."""
    raw: bytes | None = None
    if len(topic_id) == 36:
        try:
            raw = uuid.UUID(topic_id).bytes
        except ValueError:
            raw = None
    elif len(topic_id) == 22:
        try:
            raw = base64.urlsafe_b64decode(topic_id + "==")
        except (ValueError, TypeError):
            raw = None
        if raw is not None and len(raw) != 16:
            raw = None
    if raw is None:
        return None
    return _signed(int.from_bytes(raw[:8], "big"), 64), _signed(int.from_bytes(raw[8:], "big"), 64)


@lru_cache(maxsize=1 << 17)
def string_hash(s: str) -> int:
    """`String.hashCode()`, as an unsigned 32-bit value."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


@lru_cache(maxsize=65536)
def java_hash(topic_id: str) -> int:
    """`Uuid.hashCode()` (or `String.hashCode()` for a non-UUID id), as an unsigned 32-bit value."""
    bits = uuid_bits(topic_id)
    if bits is None:
        return string_hash(topic_id)
    hilo = (bits[0] ^ bits[1]) & _MASK64
    return ((hilo >> 32) ^ hilo) & 0xFFFFFFFF


def _table_size(n: int) -> int:
    """The table size of `new HashSet<>(collection of n)`: max(n / 0.75 + 1, 16), up to a power of two."""
    cap = max(int(n / 0.75) + 1, 16)
    return 1 << (cap - 1).bit_length()


def _grown_table_size(n: int) -> int:
    """The table size of a default `HashMap` after n puts: 16, doubled while n > 0.75 of it."""
    cap = 16
    while n > cap * 3 // 4:
        cap *= 2
    return cap


def member_key(cap: int) -> Callable[[str], tuple[int, str]]:
    """Sort key of a member id in a `HashMap` of table size `cap` (ties: by id)."""
    mask = cap - 1

    def key(m: str) -> tuple[int, str]:
        h = string_hash(m)
        return (h ^ (h >> 16)) & mask, m

    return key


def member_table_size(n: int) -> int:
    return _grown_table_size(n)


def hash_map_member_order(member_ids: Iterable[str], n: int) -> list[str]:
    """The iteration order of Kafka's member map of n members (ties in a bucket: by id): `member_key`'s.
    Why not `sorted(key=member_key(...))`: a Python key call per member and tuple comparisons cost a few ms
    for 10,000 members on every run; sorting the ids (C string comparisons) and then stably by bucket (numpy)
    gives the same order."""
    mask = _grown_table_size(n) - 1
    ids = sorted(member_ids)
    h = np.fromiter(map(string_hash, ids), dtype=np.int64, count=len(ids))
    order = np.argsort((h ^ (h >> 16)) & mask, kind="stable")
    return list(map(ids.__getitem__, order.tolist()))


def member_map_key(n: int) -> Callable[[str], tuple[int, str]]:
    """Sort key of a topic id in one member's assignment of n topics as Kafka keeps it: a
    `HashMap<Uuid, ...>` filled topic by topic (a target assignment record read back), so its table size
    follows its own size."""
    mask = _grown_table_size(n) - 1

    def bucket(t: str) -> tuple[int, str]:
        h = java_hash(t)
        return (h ^ (h >> 16)) & mask, t

    return bucket


def member_map_order(topic_ids: Collection[str]) -> list[str]:
    """The iteration order of one member's assignment as Kafka keeps it (`member_map_key`)."""
    if len(topic_ids) < 2:
        return list(topic_ids)
    return sorted(topic_ids, key=member_map_key(len(topic_ids)))


def hash_set_order(topic_ids: Collection[str]) -> list[str]:
    """The iteration order of `new HashSet<>(topic_ids)`. Ids in one bucket keep Java's insertion order,
    which depends on the source set; here they follow the id, the one thing both sides share."""
    mask = _table_size(len(topic_ids)) - 1

    def bucket(t: str) -> tuple[int, str]:
        h = java_hash(t)
        return (h ^ (h >> 16)) & mask, t

    return sorted(topic_ids, key=bucket)


def uuid_sort_key(topic_id: str) -> tuple[int, int, str]:
    """`Uuid.compareTo`: most then least significant bits, signed. Non-UUID ids sort after, by text."""
    bits = uuid_bits(topic_id)
    if bits is None:
        return (1 << 63, 0, topic_id)
    return bits[0], bits[1], ""
