"""The local record log in `--state-dir`: append-only, checksummed, group-committed, with snapshots.

Files:
    <gen>.log         frames appended since snapshot <gen - 1> (generation numbers are 8 digits)
    <gen>.snapshot    the whole state as of the end of <gen>.log (written to .tmp, fsynced, renamed)

A frame is `u32 length | u32 crc32(payload) | payload` (little endian). In a log, one frame holds all
records of one operation (`record_codec.encode_operation`), so replay applies an operation whole or not at
all; frames written before operations existed hold one record each and still load. In a snapshot, a frame
holds one record or a batch of one group's committed offsets in columns (`snapshot_codec`: restarts read
a million offsets in about a second), and the file ends with a frame `END`.

Damage. Loading takes the newest snapshot, then replays every later log in order. At the first frame that is
not intact (cut short, bad length, checksum mismatch, undecodable) the loader looks for any intact frame
later in the same file (a byte-by-byte scan):
- none, and the file is the newest log: a torn tail (a crash in the middle of a write). It is truncated, with
  a log line giving the bytes dropped; it was never acknowledged under `fsync=always`.
- an intact frame follows, or a newer log exists (rotation fsyncs a log before starting the next), or the
  frame is intact but undecodable, or a snapshot is damaged: corruption. Loading stops with
  `LogCorruptError` naming the file and byte offset; nothing is truncated. `groupcoord log check DIR` shows
  the damage; `groupcoord log repair DIR --yes` truncates there and removes later logs, saying what it drops.

Appends come from the event loop; a writer thread writes whole batches and fsyncs once per batch (group
commit), so a burst of commits shares one fsync. The awaitable `append` returns completes when the batch is
durable under the configured policy: `always` (after fsync), `interval` (after write; fsync at most every
`fsync_interval_ms`), `never` (after write; the OS decides). An operation the loader could not read back (over
`MAX_FRAME`) is refused with `RecordTooLargeError` before anything is written. Creating, renaming and removing
files is followed by an fsync of the directory, so a new file survives a crash along with its contents.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from groupcoord.coordinator.runtime import record_codec, snapshot_codec
from groupcoord.coordinator.runtime.log_frames import (
    MAX_FRAME,
    LogCorruptError,
    frame,
    fsync_dir,
    read_snapshot,
    scan_file,
)
from groupcoord.coordinator.runtime.record_codec import RecordTooLargeError

log = logging.getLogger("groupcoord.log")

FSYNC_POLICIES = ("always", "interval", "never")


Waiter = Future[None] | asyncio.Future[None] | None  # what an append's caller waits on, if anyone
ROTATE = b""  # in the writer's queue, not a frame: start the next generation here (`rotate_async`)


def _settle(batch: list[tuple[bytes, Waiter]], error: BaseException | None) -> None:
    """Complete a written batch's waiters, from the writer thread. The event loop's futures are settled by one
    callback per loop and batch: one wake-up of the loop (and one GIL hand-over) for a group commit of hundreds
    of operations, rather than one per operation as `asyncio.wrap_future` gives."""
    on_loops: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    here: list[Future[None]] = []
    for _, waiter in batch:
        if isinstance(waiter, asyncio.Future):
            on_loops.setdefault(waiter.get_loop(), []).append(waiter)
        elif waiter is not None:
            here.append(waiter)
    _complete(here, error)
    for loop, waiters in on_loops.items():
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_complete, waiters, error)


def _complete(waiters: list[Future[None]] | list[asyncio.Future[None]], error: BaseException | None) -> None:
    for waiter in waiters:
        if not waiter.done():  # a waiter may have been cancelled
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)


@dataclass
class LoadReport:
    snapshot_generation: int
    snapshot_records: int
    log_records: int
    truncated_bytes: int
    seconds: float


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a load builds millions of long-lived, acyclic record objects:
    the collector would walk the growing heap again and again (about 60% of loading a million offsets).
    Reference counting still frees everything it can; collection resumes as before afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class FileLog:
    """The record sink of the runtime (see `RecordSink`), plus loading and snapshots."""

    def __init__(self, directory: Path, fsync: str = "always", fsync_interval_ms: int = 1000,
                 encode: Callable[[Any], bytes] = record_codec.encode,
                 decode: Callable[[bytes], Any] = record_codec.decode, max_frame_bytes: int = MAX_FRAME) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync policy {fsync!r} must be one of {', '.join(FSYNC_POLICIES)}")
        if not 0 < max_frame_bytes <= MAX_FRAME:
            raise ValueError(f"max_frame_bytes must be in 1..{MAX_FRAME} (what the loader reads back)")
        self.max_frame_bytes = max_frame_bytes
        self.dir = directory
        self.dir_fsyncs = 0  # fsyncs of the directory (creations, renames, removals made durable)
        if not self.dir.is_dir():
            self.dir.mkdir(parents=True, exist_ok=True)
            fsync_dir(self.dir.parent)
        self.fsync = fsync
        self.fsync_interval_s = fsync_interval_ms / 1000
        self._encode = encode
        self._decode = decode
        self.generation = 0
        self._file: BinaryIO | None = None
        self._lock = threading.Condition()  # guards _pending, _closed and swapping _file
        self._io_lock = threading.Lock()  # held while a batch is written; never taken before _lock
        self._pending: list[tuple[bytes, Waiter]] = []
        self._closed = False
        # The first write error: the file may end in a torn frame now, so nothing more is written behind it (a
        # load truncates a torn tail only when it is the last thing in the newest log). Fail-stop.
        self.write_error: OSError | None = None
        self._writer: threading.Thread | None = None
        self._last_fsync = time.monotonic()
        self.records_since_snapshot = 0
        self.batches = 0
        self.on_flush: Callable[[float], None] | None = None  # seconds one batch took to write (and fsync)

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

    def _fsync_dir(self) -> None:
        fsync_dir(self.dir)
        self.dir_fsyncs += 1

    def _decode_operation(self, payload: bytes) -> list[Any]:
        return record_codec.decode_operation(payload, self._decode)

    def _operation_decoder(self) -> Callable[[bytes], list[Any]]:
        if self._decode is record_codec.decode:
            return record_codec.decode_operation  # one call layer less per frame on the replay path
        return self._decode_operation

    def load(self, apply: Callable[[Any], None]) -> LoadReport:
        """Replay the newest snapshot and every later log into `apply`; then open a log for appends. Raises
        `LogCorruptError` on damage other than a torn tail of the newest log (see the module docstring)."""
        with gc_paused():
            return self._load(apply)

    def _load(self, apply: Callable[[Any], None]) -> LoadReport:
        started = time.monotonic()
        snapshot_gen, snapshot_records, log_records, truncated = 0, 0, 0, 0
        snapshots = self._gens(".snapshot")
        if snapshots:
            snapshot_gen = snapshots[-1]
            path = self._path(snapshot_gen, ".snapshot")
            records, bad = read_snapshot(path, self._decode)
            if bad is not None:
                raise LogCorruptError(path, *bad)
            for rec in records:
                apply(rec)
            snapshot_records = len(records)
        logs = [g for g in self._gens(".log") if g > snapshot_gen]

        def replay(records: list[Any]) -> None:
            for rec in records:
                apply(rec)

        decoder = self._operation_decoder()
        for i, gen in enumerate(logs):
            path = self._path(gen, ".log")
            scan = scan_file(path, decoder, replay)
            log_records += scan.records
            if scan.bad_offset is None:
                continue
            if not scan.torn or i != len(logs) - 1:
                raise LogCorruptError(path, scan.bad_offset, scan.reason)
            truncated = scan.size - scan.good_end
            log.warning("%s: torn final frame at byte %d (%s): truncating %d bytes; %d operations kept", path,
                        scan.good_end, scan.reason, truncated, scan.frames)
            with open(path, "r+b") as f:
                f.truncate(scan.good_end)
                f.flush()
                os.fsync(f.fileno())
        self.generation = max([snapshot_gen + 1, *logs]) if logs else snapshot_gen + 1
        path = self._path(self.generation, ".log")
        created = not path.exists()
        self._file = open(path, "ab")  # noqa: SIM115 (kept open for appends)
        if created:
            self._fsync_dir()
        self.records_since_snapshot = log_records
        self._start_writer()
        return LoadReport(snapshot_gen, snapshot_records, log_records, truncated, time.monotonic() - started)

    # --- appending --------------------------------------------------------------------------------------------
    def _start_writer(self) -> None:
        self._writer = threading.Thread(target=self._write_loop, name="groupcoord-log", daemon=True)
        self._writer.start()

    def _operation_frame(self, records: list[Any]) -> bytes:
        """One frame for all of `records`; refuses what the loader could not read back."""
        payload = record_codec.encode_operation(records, self._encode)
        if len(payload) > self.max_frame_bytes:
            raise RecordTooLargeError(len(payload), self.max_frame_bytes,
                                      frozenset(getattr(r, "group_id", "") for r in records))
        return frame(payload)

    def append(self, records: list[Any]) -> Any:
        """Queue one operation's `records` (one frame); returns an awaitable that completes when they are
        durable (per the policy). Raises `RecordTooLargeError`, writing nothing, if the frame would be too large.
        On an event loop the awaitable is that loop's future, which the writer settles together with the rest
        of its batch (`_settle`)."""
        data = self._operation_frame(records)
        waiter: Waiter
        try:
            waiter = asyncio.get_running_loop().create_future()
        except RuntimeError:  # no loop (tools): a thread future, awaited as one
            waiter = Future()
        self._queue(data, waiter)
        self.records_since_snapshot += len(records)
        return waiter if isinstance(waiter, asyncio.Future) else asyncio.wrap_future(waiter)

    def append_sync(self, records: Iterable[Any]) -> None:
        """Append one operation and wait (for tools and tests outside an event loop)."""
        records = list(records)
        if records:
            future: Future[None] = Future()
            self._queue(self._operation_frame(records), future)
            future.result()

    def _queue(self, data: bytes, waiter: Future[None] | asyncio.Future[None]) -> None:
        """Hand a frame (or a rotation mark) to the writer; after a write error, fail `waiter` as the write that
        broke the log failed (fail-stop: the caller's failure path runs)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("log is closed")
            if self.write_error is not None:
                waiter.set_exception(self.write_error)
            else:
                self._pending.append((data, waiter))
                self._lock.notify()

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
                if self.write_error is not None:
                    _settle(batch, self.write_error)
                    continue
                started = time.perf_counter()
                frames: list[bytes] = []
                for data, _ in batch:
                    if data is ROTATE:
                        self._write_frames(frames)
                        frames = []
                        self._next_generation()
                    else:
                        frames.append(data)
                self._write_frames(frames)
                self.batches += 1
                if self.on_flush is not None:
                    self.on_flush(time.perf_counter() - started)
            except OSError as e:
                log.critical("log write failed: %s; nothing more is written to %s", e, self.dir)
                self.write_error = e
                _settle(batch, e)
                continue
            finally:
                self._io_lock.release()
            _settle(batch, None)

    def _write_frames(self, frames: list[bytes]) -> None:
        file = self._file
        assert file is not None
        if frames:
            file.write(b"".join(frames))
        file.flush()
        if self.fsync == "always":
            os.fsync(file.fileno())
        elif self.fsync == "interval":
            self._maybe_interval_fsync()

    def _next_generation(self) -> None:
        """On the writer thread, at a rotation mark: everything before it is in the old file, made durable."""
        assert self._file is not None
        os.fsync(self._file.fileno())
        self._file.close()
        self.generation += 1
        self._file = open(self._path(self.generation, ".log"), "ab")  # noqa: SIM115
        self._fsync_dir()

    def _maybe_interval_fsync(self) -> None:
        now = time.monotonic()
        if self._file is not None and now - self._last_fsync >= self.fsync_interval_s:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._last_fsync = now

    # --- snapshots --------------------------------------------------------------------------------------------
    def rotate(self) -> int:
        """`rotate_async`, waited for (tools and tests, off the event loop): returns the generation a snapshot of
        the current state must be written for."""
        future: Future[None] = Future()
        old = self._rotate(future)
        future.result()
        return old

    def rotate_async(self) -> tuple[int, asyncio.Future[None]]:
        """Start a new log generation behind every append queued so far, without waiting for the writer (call on
        the event loop, between operations). Returns the generation a snapshot must be written for, and a future
        that completes once the writer has closed it: then every record of that generation is durable."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        return self._rotate(waiter), waiter

    def _rotate(self, waiter: Future[None] | asyncio.Future[None]) -> int:
        with self._lock:
            old = self.generation + sum(1 for data, _ in self._pending if data is ROTATE)
            self._queue(ROTATE, waiter)
            self.records_since_snapshot = 0
        return old

    def write_snapshot(self, generation: int, records: Iterable[Any]) -> int:
        """Write the state as of the end of log `generation`, atomically; then drop what it supersedes."""
        final = self._path(generation, ".snapshot")
        tmp = final.with_suffix(".snapshot.tmp")
        count = 0
        with open(tmp, "wb") as f:
            buf: list[bytes] = []
            for payload, in_frame in snapshot_codec.snapshot_payloads(records, self._encode):
                buf.append(frame(payload))
                count += in_frame
                if len(buf) >= 4096:
                    f.write(b"".join(buf))
                    buf.clear()
            buf.append(frame(b"END"))
            f.write(b"".join(buf))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        self._fsync_dir()
        for gen in self._gens(".log"):
            if gen <= generation:
                self._path(gen, ".log").unlink(missing_ok=True)
        for gen in self._gens(".snapshot"):
            if gen < generation:
                self._path(gen, ".snapshot").unlink(missing_ok=True)
        self._fsync_dir()
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
