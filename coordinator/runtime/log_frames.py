"""Frames on disk, read back: what one log or snapshot file holds, where it is damaged, and why.

A frame is `u32 length | u32 crc32(payload) | payload` (little endian). The loader (`log.FileLog`), `groupcoord
log check` and `groupcoord log repair` all read files through `scan_file` and `read_snapshot`, so they agree on
what is intact, what is a torn tail and what is corruption.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groupcoord.coordinator.runtime import record_codec, snapshot_codec

_HEADER = struct.Struct("<II")
MAX_FRAME = 64 * 1024 * 1024  # the loader's limit on one payload; the writer refuses anything larger
_FIRST_BYTES = (record_codec.OPERATION_FORMAT, 0x08)  # an operation, or one record in the older format


class LogCorruptError(RuntimeError):
    """Damage that is not a torn tail: loading stops rather than drop acknowledged records."""

    def __init__(self, path: Path, offset: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt at byte {offset} ({reason}); run `groupcoord log check {path.parent}` "
                         f"to see the damage and `groupcoord log repair {path.parent} --yes` to truncate there")
        self.path = path
        self.offset = offset
        self.reason = reason


@dataclass
class FileScan:
    """What one file holds: intact frames from the start, then (if damaged) where and why it stops."""

    path: Path
    size: int
    frames: int = 0
    records: int = 0
    good_end: int = 0
    bad_offset: int | None = None
    reason: str = ""
    resumes_at: int | None = None  # an intact frame after the damage (or the damaged frame itself is intact)
    dropped_frames: int = 0  # intact frames from bad_offset on: what truncating there loses
    dropped_records: int = 0

    @property
    def torn(self) -> bool:
        return self.bad_offset is not None and self.resumes_at is None


def frame(payload: bytes) -> bytes:
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def frame_at(data: bytes, pos: int) -> tuple[int, bytes] | str:
    """(end, payload) of the intact frame at `pos`, or why there is none."""
    n = len(data)
    if pos + _HEADER.size > n:
        return "frame header cut short"
    length, crc = _HEADER.unpack_from(data, pos)
    if length == 0 or length > MAX_FRAME:
        return f"frame length {length} out of range"
    end = pos + _HEADER.size + length
    if end > n:
        return "frame runs past the end of the file"
    payload = data[pos + _HEADER.size:end]
    if zlib.crc32(payload) != crc:
        return "checksum mismatch"
    return end, payload


def _next_intact_frame(data: bytes, start: int) -> int | None:
    """The first offset >= `start` where an intact frame begins (a torn tail has none)."""
    n = len(data)
    unpack = _HEADER.unpack_from
    for q in range(start, n - _HEADER.size):
        length, crc = unpack(data, q)
        end = q + _HEADER.size + length
        if 0 < length <= MAX_FRAME and end <= n and data[q + _HEADER.size] in _FIRST_BYTES \
                and zlib.crc32(data[q + _HEADER.size:end]) == crc:
            return q
    return None


def scan_file(path: Path, decode: Callable[[bytes], list[Any]] = record_codec.decode_operation,
              on_operation: Callable[[list[Any]], None] | None = None) -> FileScan:
    """Walk a log's frames, passing each decoded operation to `on_operation`, up to the first damage."""
    data = path.read_bytes()
    scan = FileScan(path, len(data))
    pos, n = 0, len(data)
    frames = count = 0
    unpack, crc32, header = _HEADER.unpack_from, zlib.crc32, _HEADER.size
    while pos < n:
        # The intact case inline (start-up replays every frame through here); frame_at says why one is not.
        if pos + header <= n:
            length, crc = unpack(data, pos)
            end = pos + header + length
            payload = data[pos + header:end]
            intact = 0 < length <= MAX_FRAME and end <= n and crc32(payload) == crc
        else:
            intact = False
        if not intact:
            scan.bad_offset, scan.reason = pos, str(frame_at(data, pos))
            scan.resumes_at = _next_intact_frame(data, pos + 1)
            break
        try:
            records = decode(payload)
        except record_codec.RecordDecodeError as e:
            scan.bad_offset, scan.reason, scan.resumes_at = pos, f"undecodable operation: {e}", pos
            break
        frames += 1
        count += len(records)
        if on_operation is not None:
            on_operation(records)
        pos = end
    scan.frames, scan.records, scan.good_end = frames, count, pos
    if scan.resumes_at is not None:
        scan.dropped_frames, scan.dropped_records = _count_intact(data, scan.resumes_at, decode)
    return scan


def _count_intact(data: bytes, pos: int, decode: Callable[[bytes], list[Any]]) -> tuple[int, int]:
    frames = records = 0
    while pos < len(data):
        got = frame_at(data, pos)
        if isinstance(got, str):
            nxt = _next_intact_frame(data, pos + 1)
            if nxt is None:
                break
            pos = nxt
            continue
        end, payload = got
        with contextlib.suppress(record_codec.RecordDecodeError):  # still a frame a repair drops
            records += len(decode(payload))
        frames += 1
        pos = end
    return frames, records


def read_snapshot(path: Path, decode: Callable[[bytes], Any] = record_codec.decode
                  ) -> tuple[list[Any], tuple[int, str] | None]:
    """The snapshot's records, and (offset, reason) if it is damaged: a snapshot is complete once renamed
    into place, so any damage is corruption. A frame holds one record or a batch of offsets
    (`snapshot_codec`)."""
    data = path.read_bytes()
    records: list[Any] = []
    append, extend = records.append, records.extend
    pos, n = 0, len(data)
    unpack, crc32, header = _HEADER.unpack_from, zlib.crc32, _HEADER.size
    while pos < n:
        if pos + header <= n:  # the intact case inline, as in scan_file; frame_at says why one is not
            length, crc = unpack(data, pos)
            end = pos + header + length
            payload = data[pos + header:end]
            intact = 0 < length <= MAX_FRAME and end <= n and crc32(payload) == crc
        else:
            intact = False
        if not intact:
            return records, (pos, str(frame_at(data, pos)))
        if payload == b"END":
            return records, None if end == len(data) else (end, "data after the END frame")
        try:
            if payload[0] == snapshot_codec.OFFSETS_FORMAT:
                extend(snapshot_codec.decode_offsets(payload))
            else:
                append(decode(payload))
        except record_codec.RecordDecodeError as e:
            return records, (pos, f"undecodable record: {e}")
        pos = end
    return records, (pos, "no END frame")


def fsync_dir(directory: Path) -> None:
    """Make a created, renamed or removed name in `directory` durable (the file's own fsync does not)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
