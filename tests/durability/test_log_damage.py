"""Damage to the file log: a torn tail is truncated at load, corruption stops the load (naming file and offset),
an operation is replayed whole or not at all, oversized operations are refused before anything is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from groupcoord.coordinator.core import records as r
from groupcoord.coordinator.runtime import record_codec
from groupcoord.coordinator.runtime.log import FileLog
from groupcoord.coordinator.runtime.log_frames import LogCorruptError, frame
from groupcoord.coordinator.runtime.record_codec import RecordTooLargeError


def commit(i: int, group: str = "g") -> r.OffsetCommit:
    return r.OffsetCommit(group, "orders", i % 12, i, -1, "", 1_700_000_000_000 + i)


def write_ops(directory: Path, ops: list[list[Any]]) -> Path:
    log = FileLog(directory)
    log.load(lambda rec: None)
    for op in ops:
        log.append_sync(op)
    log.close()
    (path,) = sorted(directory.glob("*.log"))
    return path


def loaded(directory: Path) -> tuple[list[Any], Any]:
    out: list[Any] = []
    log = FileLog(directory)
    report = log.load(out.append)
    log.close()
    return out, report


def groupcoord(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "groupcoord", *args], capture_output=True, text=True, timeout=60)


def test_a_torn_final_frame_is_truncated_and_every_complete_operation_loads(tmp_path: Path) -> None:
    ops = [[commit(i), commit(i + 1000)] for i in range(40)]
    path = write_ops(tmp_path, ops)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 5)  # a crash in the middle of writing the last operation
    records, report = loaded(tmp_path)
    assert records == [rec for op in ops[:-1] for rec in op]
    last_frame = len(frame(record_codec.encode_operation(ops[-1])))
    assert report.truncated_bytes == last_frame - 5
    assert path.stat().st_size == size - last_frame


def test_an_operation_torn_in_the_middle_of_its_frame_applies_none_of_its_records(tmp_path: Path) -> None:
    big_op = [commit(i, "big") for i in range(500)]
    path = write_ops(tmp_path, [[commit(1)], big_op])
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - len(frame(record_codec.encode_operation(big_op))) // 2)
    records, report = loaded(tmp_path)
    assert records == [commit(1)]
    assert report.truncated_bytes > 0


def test_a_flipped_byte_mid_log_stops_the_load_naming_the_file_and_offset_and_truncates_nothing(
        tmp_path: Path) -> None:
    ops = [[commit(i)] for i in range(200)]
    path = write_ops(tmp_path, ops)
    data = bytearray(path.read_bytes())
    start = sum(len(frame(record_codec.encode_operation(op))) for op in ops[:100])
    data[start + 12] ^= 0x40  # inside the payload of the 101st operation
    path.write_bytes(bytes(data))
    with pytest.raises(LogCorruptError) as e:
        FileLog(tmp_path).load(lambda rec: None)
    assert e.value.path == path and e.value.offset == start
    assert "checksum" in str(e.value) and str(path) in str(e.value)
    assert path.read_bytes() == bytes(data)  # nothing truncated


def test_a_damaged_log_followed_by_a_newer_log_is_corruption_not_a_torn_tail(tmp_path: Path) -> None:
    log = FileLog(tmp_path)
    log.load(lambda rec: None)
    log.append_sync([commit(1)])
    log.append_sync([commit(2)])
    log.rotate()
    log.append_sync([commit(3)])
    log.close()
    first = sorted(tmp_path.glob("*.log"))[0]
    with open(first, "r+b") as f:
        f.truncate(first.stat().st_size - 3)
    with pytest.raises(LogCorruptError) as e:
        FileLog(tmp_path).load(lambda rec: None)
    assert e.value.path == first


def test_logs_of_one_record_per_frame_from_before_operations_still_load(tmp_path: Path) -> None:
    old = [commit(i) for i in range(10)]
    (tmp_path / "00000001.log").write_bytes(b"".join(frame(record_codec.encode(rec)) for rec in old))
    records, report = loaded(tmp_path)
    assert records == old and report.truncated_bytes == 0


def test_an_operation_over_the_loaders_limit_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    log = FileLog(tmp_path, max_frame_bytes=4096)
    log.load(lambda rec: None)
    log.append_sync([commit(1)])
    (path,) = tmp_path.glob("*.log")
    size = path.stat().st_size
    with pytest.raises(RecordTooLargeError) as e:
        log.append([commit(i) for i in range(200)])
    assert e.value.limit == 4096 and e.value.size > 4096 and e.value.group_ids == frozenset({"g"})
    log.append_sync([commit(2)])
    log.close()
    assert path.stat().st_size > size
    records, _ = loaded(tmp_path)
    assert records == [commit(1), commit(2)]


def test_the_directory_is_fsynced_after_creating_rotating_and_snapshotting(tmp_path: Path) -> None:
    state = tmp_path / "state"
    log = FileLog(state)
    log.load(lambda rec: None)
    created = log.dir_fsyncs
    assert created >= 1 and (state / "00000001.log").exists()
    log.append_sync([commit(1)])
    generation = log.rotate()
    assert log.dir_fsyncs > created and (state / "00000002.log").exists()
    rotated = log.dir_fsyncs
    log.write_snapshot(generation, [commit(1)])
    assert log.dir_fsyncs > rotated
    assert (state / "00000001.snapshot").exists() and not (state / "00000001.snapshot.tmp").exists()
    assert not (state / "00000001.log").exists()
    log.close()


def test_log_check_and_repair_say_one_line_for_a_missing_directory(tmp_path: Path) -> None:
    for cmd in (["check"], ["repair", "--yes"]):
        done = groupcoord("log", *cmd, str(tmp_path / "nope"))
        assert done.returncode == 2
        assert done.stderr.strip().splitlines() == [f"groupcoord: no such state directory: {tmp_path / 'nope'}"]


def test_log_check_of_an_intact_directory_exits_zero(tmp_path: Path) -> None:
    write_ops(tmp_path, [[commit(i), commit(i + 1)] for i in range(5)])
    done = groupcoord("log", "check", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 operations (frames), 10 records" in done.stdout and done.stdout.strip().endswith("intact")


def test_a_damaged_snapshot_stops_the_load_and_repair_refuses_to_guess(tmp_path: Path) -> None:
    log = FileLog(tmp_path)
    log.load(lambda rec: None)
    log.append_sync([commit(1)])
    generation = log.rotate()
    log.write_snapshot(generation, [commit(1), commit(2)])
    log.close()
    (snapshot,) = tmp_path.glob("*.snapshot")
    data = bytearray(snapshot.read_bytes())
    data[10] ^= 0x01
    snapshot.write_bytes(bytes(data))
    with pytest.raises(LogCorruptError) as e:
        FileLog(tmp_path).load(lambda rec: None)
    assert e.value.path == snapshot and e.value.offset == 0
    check = groupcoord("log", "check", str(tmp_path))
    assert check.returncode == 1 and "CORRUPT at byte 0 (checksum mismatch)" in check.stdout
    repair = groupcoord("log", "repair", str(tmp_path), "--yes")
    assert repair.returncode == 1 and repair.stderr.count("\n") == 1 and "restore the directory" in repair.stderr
    assert snapshot.read_bytes() == bytes(data)


def test_log_check_of_a_directory_without_logs_says_so_in_one_line(tmp_path: Path) -> None:
    done = groupcoord("log", "check", str(tmp_path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no *.log or *.snapshot" in done.stderr
