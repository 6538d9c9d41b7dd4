"""Committed offsets in snapshots: one frame per batch of a group's offsets, in columns.

Why: a snapshot of 10,000 groups and 1,000,000 offsets is nearly all OffsetCommit records. As one protobuf
frame each, a restart spent ~8 us per offset on framing, checksums, protobuf parsing and the dataclass
constructor; in columns a batch costs one checksum and a few `struct` unpacks, and building the records
skips the frozen dataclass's per-field `object.__setattr__` (the slots are set directly, same values).

A batch payload (little endian; strings are u32 length + UTF-8):
    u8 OFFSETS_FORMAT (3) | u32 count | str group_id | u32 topic count | str topic * topics
    | u32 topic index * count | i32 partition * count | i64 committed offset * count | i32 leader epoch * count
    | i64 commit timestamp ms * count | u32 metadata length * count | metadata UTF-8 bytes, concatenated
Byte 3 can start neither an operation (2) nor a `LogRecord` (its first byte is the tag 0x08), so a
snapshot mixes batches with one-record frames and older snapshots (one record per frame) still load.
Only snapshots hold batches; the log keeps one frame per operation.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from typing import Any

from groupcoord.coordinator.core.records import OffsetCommit
from groupcoord.coordinator.runtime.record_codec import RecordDecodeError

OFFSETS_FORMAT = 3
BATCH_LIMIT = 8192  # offsets per frame: large enough to amortise, small enough to stay far below MAX_FRAME
_U32 = struct.Struct("<I")
_HEAD = struct.Struct("<BI")
_FIELDS = ("group_id", "topic", "partition", "committed_offset", "leader_epoch", "metadata", "commit_timestamp_ms")
_SET = tuple(OffsetCommit.__dict__[f].__set__ for f in _FIELDS)  # slot descriptors: bypass the frozen __setattr__


def _str(s: str) -> bytes:
    data = s.encode()
    return _U32.pack(len(data)) + data


def encode_offsets(batch: list[OffsetCommit]) -> bytes:
    """One batch payload for `batch` (all of one group)."""
    n = len(batch)
    topics: dict[str, int] = {}
    tidx = [topics.setdefault(o.topic, len(topics)) for o in batch]
    meta = [o.metadata.encode() for o in batch]
    parts = [_HEAD.pack(OFFSETS_FORMAT, n), _str(batch[0].group_id), _U32.pack(len(topics))]
    parts += map(_str, topics)
    parts += (
        struct.pack(f"<{n}I", *tidx),
        struct.pack(f"<{n}i", *(o.partition for o in batch)),
        struct.pack(f"<{n}q", *(o.committed_offset for o in batch)),
        struct.pack(f"<{n}i", *(o.leader_epoch for o in batch)),
        struct.pack(f"<{n}q", *(o.commit_timestamp_ms for o in batch)),
        struct.pack(f"<{n}I", *map(len, meta)),
        b"".join(meta),
    )
    return b"".join(parts)


def decode_offsets(payload: bytes) -> list[OffsetCommit]:
    """The records of one batch payload; `RecordDecodeError` if it is not one."""
    try:
        return _decode(payload)
    except (struct.error, UnicodeDecodeError, IndexError, ValueError) as e:
        raise RecordDecodeError(f"not an offsets batch: {e}") from None


def _decode(payload: bytes) -> list[OffsetCommit]:
    fmt, n = _HEAD.unpack_from(payload, 0)
    if fmt != OFFSETS_FORMAT:
        raise ValueError(f"format {fmt}")
    pos = _HEAD.size
    group_id, pos = _read_str(payload, pos)
    (n_topics,) = _U32.unpack_from(payload, pos)
    pos += _U32.size
    names = []
    for _ in range(n_topics):
        name, pos = _read_str(payload, pos)
        names.append(name)
    columns = []
    for code, width in (("I", 4), ("i", 4), ("q", 8), ("i", 4), ("q", 8), ("I", 4)):
        columns.append(struct.unpack_from(f"<{n}{code}", payload, pos))
        pos += n * width
    tidx, partitions, offsets, epochs, stamps, meta_len = columns
    total_meta = sum(meta_len)
    if pos + total_meta != len(payload):
        raise ValueError(f"{len(payload) - pos - total_meta} bytes left over")
    if total_meta:
        blob = payload[pos:]
        starts = [0]
        for length in meta_len:
            starts.append(starts[-1] + length)
        metas = [blob[a:b].decode() for a, b in zip(starts, starts[1:], strict=False)]
    else:
        metas = [""] * n
    topic_of = [names[i] for i in tidx]  # IndexError on a bad topic index
    out: list[OffsetCommit] = list(map(object.__new__, repeat(OffsetCommit, n)))
    for set_field, column in zip(_SET, (repeat(group_id, n), topic_of, partitions, offsets, epochs, metas, stamps),
                                 strict=True):
        deque(map(set_field, out, column), maxlen=0)  # column by column, the loop in C
    return out


def _read_str(payload: bytes, pos: int) -> tuple[str, int]:
    (length,) = _U32.unpack_from(payload, pos)
    pos += _U32.size
    if pos + length > len(payload):
        raise ValueError("string runs past the end")
    return payload[pos:pos + length].decode(), pos + length


def snapshot_payloads(records: Iterable[Any], encode: Callable[[Any], bytes]) -> Iterator[tuple[bytes, int]]:
    """(payload, records in it) for a snapshot: runs of one group's OffsetCommit records become batches of
    up to `BATCH_LIMIT`, every other record a frame of its own (`encode`)."""
    batch: list[OffsetCommit] = []
    for rec in records:
        if type(rec) is OffsetCommit:
            if batch and (rec.group_id != batch[0].group_id or len(batch) >= BATCH_LIMIT):
                yield encode_offsets(batch), len(batch)
                batch = []
            batch.append(rec)
            continue
        if batch:
            yield encode_offsets(batch), len(batch)
            batch = []
        yield encode(rec), 1
    if batch:
        yield encode_offsets(batch), len(batch)
