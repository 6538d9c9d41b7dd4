"""The local record log in `--state-dir`: append-only, checksummed, group-committed, with snapshots.

Files:
    <gen>.log         frames appended since snapshot <gen - 1> (generation numbers are 8 digits)
    <gen>.snapshot    the whole state as of the end of <gen>.log (written to .tmp, fsynced, renamed)

A frame is `u32 length | u32 crc32(payload) | payload` (little endian); the payload is an encoded record
(`record_codec`). Loading takes the newest complete snapshot, then replays every later log in order. A torn
or corrupt frame ends the log: the file is truncated there (with a log line) and nothing after it is loaded.

Appends come from the event loop; a writer thread writes whole batches and fsyncs once per batch (group
commit), so a burst of commits shares one fsync. The awaitable `append` returns completes when the batch is
durable under the configured policy: `always` (after fsync), `interval` (after write; fsync at most every
`fsync_interval_ms`), `never` (after write; the OS decides).
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from coordinator.runtime import record_codec

log = logging.getLogger("groupcoord.log")

_HEADER = struct.Struct("<II")
MAX_FRAME = 64 * 1024 * 1024
FSYNC_POLICIES = ("always", "interval", "never")


@dataclass
class LoadReport:
    snapshot_generation: int
    snapshot_records: int
    log_records: int
    truncated_bytes: int
    seconds: float


def _frames(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset after the frame, payload) for each intact frame; stops at the first torn/corrupt one."""
    pos = 0
    n = len(data)
    while pos + _HEADER.size <= n:
        length, crc = _HEADER.unpack_from(data, pos)
        end = pos + _HEADER.size + length
        if length > MAX_FRAME or end > n:
            return
        payload = data[pos + _HEADER.size:end]
        if zlib.crc32(payload) != crc:
            return
        yield end, payload
        pos = end


def frame(payload: bytes) -> bytes:
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


class FileLog:
    """The record sink of the runtime (see `RecordSink`), plus loading and snapshots."""

    def __init__(self, directory: Path, fsync: str = "always", fsync_interval_ms: int = 1000,
                 encode: Callable[[Any], bytes] = record_codec.encode,
                 decode: Callable[[bytes], Any] = record_codec.decode) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync policy {fsync!r} must be one of {', '.join(FSYNC_POLICIES)}")
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self.fsync_interval_s = fsync_interval_ms / 1000
        self._encode = encode
        self._decode = decode
        self.generation = 0
        self._file: BinaryIO | None = None
        self._lock = threading.Condition()  # guards _pending, _closed and swapping _file
        self._io_lock = threading.Lock()  # held while a batch is written; never taken before _lock
        self._pending: list[tuple[bytes, Future[None] | None]] = []
        self._closed = False
        self._writer: threading.Thread | None = None
        self._last_fsync = time.monotonic()
        self.records_since_snapshot = 0
        self.appended_records = 0
        self.fsyncs = 0
        self.batches = 0

    # --- loading ----------------------------------------------------------------------------------------------
    def _gens(self, suffix: str) -> list[int]:
        out = []
        for p in self.dir.glob(f"*{suffix}"):
            stem = p.name[: -len(suffix)]
            if stem.isdigit():
                out.append(int(stem))
        return sorted(out)

    def _path(self, gen: int, suffix: str) -> Path:
        return self.dir / f"{gen:08d}{suffix}"

    def load(self, apply: Callable[[Any], None]) -> LoadReport:
        """Replay the newest valid snapshot and every later log into `apply`; then open a log for appends."""
        started = time.monotonic()
        snapshot_gen, snapshot_records, log_records, truncated = 0, 0, 0, 0
        for gen in reversed(self._gens(".snapshot")):
            records = self._read_snapshot(self._path(gen, ".snapshot"))
            if records is None:
                log.warning("snapshot %s is incomplete or corrupt; trying an older one", self._path(gen, ".snapshot"))
                continue
            for rec in records:
                apply(rec)
            snapshot_gen, snapshot_records = gen, len(records)
            break
        logs = [g for g in self._gens(".log") if g > snapshot_gen]
        for i, gen in enumerate(logs):
            path = self._path(gen, ".log")
            data = path.read_bytes()
            good = 0
            for end, payload in _frames(data):
                try:
                    rec = self._decode(payload)
                except record_codec.RecordDecodeError as e:
                    log.error("%s: undecodable record at byte %d (%s); truncating there", path, good, e)
                    break
                apply(rec)
                log_records += 1
                good = end
            if good < len(data):
                truncated += len(data) - good
                log.warning("%s: torn or corrupt tail at byte %d (%d bytes dropped); truncating", path, good,
                            len(data) - good)
                with open(path, "r+b") as f:
                    f.truncate(good)
                    f.flush()
                    os.fsync(f.fileno())
                for later in logs[i + 1:]:  # nothing after a corrupt frame can be trusted
                    log.warning("%s follows a corrupt log; removing it", self._path(later, ".log"))
                    self._path(later, ".log").unlink()
                break
        self.generation = max([snapshot_gen + 1, *logs]) if logs else snapshot_gen + 1
        self._file = open(self._path(self.generation, ".log"), "ab")  # noqa: SIM115 (kept open for appends)
        self.records_since_snapshot = log_records
        self._start_writer()
        return LoadReport(snapshot_gen, snapshot_records, log_records, truncated, time.monotonic() - started)

    def _read_snapshot(self, path: Path) -> list[Any] | None:
        data = path.read_bytes()
        records: list[Any] = []
        end = 0
        for end, payload in _frames(data):
            if payload == b"END":
                return records if end == len(data) else None
            try:
                records.append(self._decode(payload))
            except record_codec.RecordDecodeError:
                return None
        return None

    # --- appending --------------------------------------------------------------------------------------------
    def _start_writer(self) -> None:
        self._writer = threading.Thread(target=self._write_loop, name="groupcoord-log", daemon=True)
        self._writer.start()

    def append(self, records: list[Any]) -> Any:
        """Queue `records`; returns an awaitable that completes when they are durable (per the policy)."""
        data = b"".join(frame(self._encode(r)) for r in records)
        future: Future[None] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("log is closed")
            self._pending.append((data, future))
            self._lock.notify()
        self.records_since_snapshot += len(records)
        self.appended_records += len(records)
        return asyncio.wrap_future(future)

    def append_sync(self, records: Iterable[Any]) -> None:
        """Append and wait (for tools and tests outside an event loop)."""
        data = b"".join(frame(self._encode(r)) for r in records)
        future: Future[None] = Future()
        with self._lock:
            self._pending.append((data, future))
            self._lock.notify()
        future.result()

    def _write_loop(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closed:
                    self._lock.wait(timeout=self.fsync_interval_s if self.fsync == "interval" else None)
                    if self.fsync == "interval" and not self._pending:
                        self._maybe_interval_fsync()
                if not self._pending and self._closed:
                    return
                batch, self._pending = self._pending, []
                self._io_lock.acquire()
            try:
                file = self._file
                assert file is not None
                file.write(b"".join(d for d, _ in batch))
                file.flush()
                if self.fsync == "always":
                    os.fsync(file.fileno())
                    self.fsyncs += 1
                elif self.fsync == "interval":
                    self._maybe_interval_fsync()
                self.batches += 1
            except OSError as e:
                log.error("log write failed: %s", e)
                for _, fut in batch:
                    if fut is not None and not fut.done():
                        fut.set_exception(e)
                continue
            finally:
                self._io_lock.release()
            for _, fut in batch:
                if fut is not None and not fut.done():
                    fut.set_result(None)

    def _maybe_interval_fsync(self) -> None:
        now = time.monotonic()
        if self._file is not None and now - self._last_fsync >= self.fsync_interval_s:
            self._file.flush()
            os.fsync(self._file.fileno())
            self.fsyncs += 1
            self._last_fsync = now

    # --- snapshots --------------------------------------------------------------------------------------------
    def rotate(self) -> int:
        """Start a new log generation (call between operations); returns the generation a snapshot of the
        current state must be written for."""
        with self._lock:
            old = self.generation
            # Everything queued so far belongs to the old file: flush it there first.
            while self._pending:
                self._lock.wait(0.01)
            with self._io_lock:  # the batch being written (if any) finishes in the old file
                assert self._file is not None
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
                self.generation = old + 1
                self._file = open(self._path(self.generation, ".log"), "ab")  # noqa: SIM115
            self.records_since_snapshot = 0
        return old

    def write_snapshot(self, generation: int, records: Iterable[Any]) -> int:
        """Write the state as of the end of log `generation`, atomically; then drop what it supersedes."""
        final = self._path(generation, ".snapshot")
        tmp = final.with_suffix(".snapshot.tmp")
        count = 0
        with open(tmp, "wb") as f:
            buf: list[bytes] = []
            for rec in records:
                buf.append(frame(self._encode(rec)))
                count += 1
                if len(buf) >= 4096:
                    f.write(b"".join(buf))
                    buf.clear()
            buf.append(frame(b"END"))
            f.write(b"".join(buf))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        dir_fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        for gen in self._gens(".log"):
            if gen <= generation:
                self._path(gen, ".log").unlink(missing_ok=True)
        for gen in self._gens(".snapshot"):
            if gen < generation:
                self._path(gen, ".snapshot").unlink(missing_ok=True)
        log.info("snapshot %s written: %d records", final.name, count)
        return count

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        if self._writer is not None:
            self._writer.join(timeout=30)
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None
