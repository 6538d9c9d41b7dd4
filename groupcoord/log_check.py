"""`groupcoord log check|repair DIR`: what damage a state directory has, and truncating it on request.

Check reads every snapshot and log the loader would read, the way the loader does (`log.scan_file`), and
says per file: frames (one per operation), records, and for a damaged file the first bad byte, why, whether
it is a torn tail (the loader truncates it) or corruption (the loader refuses to start), and what a repair
would drop. Repair truncates the first damaged log at its first bad byte and removes every later log (they
follow a gap, so replaying them would apply operations whose predecessors are lost); it changes nothing
unless asked (`--yes`), and it does not touch a damaged snapshot (a snapshot's logs are gone once it is
written, so there is nothing to repair it from: restore the directory from a backup).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from groupcoord.coordinator.runtime.log_frames import FileScan, LogCorruptError, fsync_dir, read_snapshot, scan_file


@dataclass
class DirCheck:
    directory: Path
    snapshot: Path | None = None
    snapshot_records: int = 0
    snapshot_damage: tuple[int, str] | None = None
    logs: list[FileScan] = field(default_factory=list)

    @property
    def first_damaged(self) -> int | None:
        return next((i for i, s in enumerate(self.logs) if s.bad_offset is not None), None)

    @property
    def damaged(self) -> bool:
        return self.snapshot_damage is not None or self.first_damaged is not None

    def dropped_by_repair(self) -> tuple[int, int, int, list[FileScan]]:
        """(bytes, frames, records, files removed) a repair drops: the damaged log from its first bad byte,
        plus every later log."""
        i = self.first_damaged
        if i is None:
            return 0, 0, 0, []
        bad = self.logs[i]
        assert bad.bad_offset is not None
        later = self.logs[i + 1:]
        return (bad.size - bad.bad_offset + sum(s.size for s in later),
                bad.dropped_frames + sum(s.frames + s.dropped_frames for s in later),
                bad.dropped_records + sum(s.records + s.dropped_records for s in later), later)


def _gens(directory: Path, suffix: str) -> list[int]:
    return sorted(int(p.name[: -len(suffix)]) for p in directory.glob(f"*{suffix}") if p.name[: -len(suffix)].isdigit())


def check_directory(directory: Path) -> DirCheck:
    """Raises FileNotFoundError (no such directory) or ValueError (no snapshot or log in it)."""
    if not directory.is_dir():
        raise FileNotFoundError(f"no such state directory: {directory}")
    snapshots, logs = _gens(directory, ".snapshot"), _gens(directory, ".log")
    if not snapshots and not logs:
        raise ValueError(f"{directory} holds no *.log or *.snapshot files: is it a --state-dir?")
    check = DirCheck(directory)
    snapshot_gen = 0
    if snapshots:
        snapshot_gen = snapshots[-1]
        check.snapshot = directory / f"{snapshot_gen:08d}.snapshot"
        records, check.snapshot_damage = read_snapshot(check.snapshot)
        check.snapshot_records = len(records)
    for gen in logs:
        if gen > snapshot_gen:
            check.logs.append(scan_file(directory / f"{gen:08d}.log"))
    return check


def describe(check: DirCheck) -> list[str]:
    lines: list[str] = []
    if check.snapshot is not None:
        state = "intact" if check.snapshot_damage is None else \
            f"CORRUPT at byte {check.snapshot_damage[0]} ({check.snapshot_damage[1]}); the server will not start " \
            "and repair cannot fix it: restore the directory from a backup"
        lines.append(f"{check.snapshot.name}: {check.snapshot_records} records, {state}")
    last = len(check.logs) - 1
    for i, s in enumerate(check.logs):
        head = f"{s.path.name}: {s.size} bytes, {s.frames} operations (frames), {s.records} records"
        if s.bad_offset is None:
            lines.append(f"{head}, intact")
        elif s.torn and i == last:
            lines.append(f"{head} intact, then a torn final frame at byte {s.bad_offset} ({s.reason}): "
                         f"loading truncates its {s.size - s.bad_offset} bytes")
        else:
            where = f"intact frames resume at byte {s.resumes_at}" if s.resumes_at is not None else \
                "a newer log follows"
            lines.append(f"{head} intact, then CORRUPT at byte {s.bad_offset} ({s.reason}; {where}): "
                         "the server will not start")
    if check.first_damaged is not None:
        size, frames, records, later = check.dropped_by_repair()
        bad = check.logs[check.first_damaged]
        lines.append(f"a repair would truncate {bad.path.name} at byte {bad.bad_offset} and drop {size} bytes: "
                     f"{frames} intact frames, {records} records"
                     + (f" (including later logs {', '.join(s.path.name for s in later)})" if later else ""))
    lines.append(f"{check.directory}: " + ("DAMAGED" if check.damaged else "intact"))
    return lines


def repair(check: DirCheck) -> list[str]:
    """Truncate the first damaged log at its first bad byte and remove later logs; returns what was done."""
    if check.snapshot_damage is not None:
        assert check.snapshot is not None
        raise LogCorruptError(check.snapshot, *check.snapshot_damage)
    i = check.first_damaged
    if i is None:
        return [f"{check.directory}: intact; nothing to repair"]
    size, frames, records, later = check.dropped_by_repair()
    bad = check.logs[i]
    assert bad.bad_offset is not None
    with open(bad.path, "r+b") as f:
        f.truncate(bad.bad_offset)
        f.flush()
        os.fsync(f.fileno())
    for s in later:
        s.path.unlink()
    fsync_dir(check.directory)
    return [f"truncated {bad.path.name} at byte {bad.bad_offset}"
            + (f" and removed {', '.join(s.path.name for s in later)}" if later else "")
            + f": dropped {size} bytes, {frames} intact frames, {records} records"]
