"""Committed offsets in snapshots travel as column batches per group, and load back exactly."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from groupcoord.coordinator.core import records as r
from groupcoord.coordinator.runtime import record_codec, snapshot_codec
from groupcoord.coordinator.runtime.log import FileLog
from groupcoord.coordinator.runtime.log_frames import LogCorruptError, frame, read_snapshot


def offsets(group: str, n: int, topics: int = 3) -> list[r.OffsetCommit]:
    return [r.OffsetCommit(group, f"tópic-{i % topics}", i, 10 * i + 7, (i % 5) - 1,
                           "" if i % 4 else f"meta-{i}-ü", 1_700_000_000_000 + i) for i in range(n)]


def snapshot_of(tmp_path: Path, records: list[object]) -> Path:
    log = FileLog(tmp_path, fsync="never")
    log.load(lambda rec: None)
    generation = log.rotate()
    log.write_snapshot(generation, records)
    log.close()
    (path,) = tmp_path.glob("*.snapshot")
    return path


def frames_in(path: Path) -> int:
    data, pos, count = path.read_bytes(), 0, 0
    while pos < len(data):
        pos += 8 + int.from_bytes(data[pos:pos + 4], "little")
        count += 1
    return count


def test_offsets_in_a_snapshot_load_back_exactly_and_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot_codec, "BATCH_LIMIT", 50)
    records: list[object] = [r.ConsumerGroupMetadata("g1", 3, 0), *offsets("g1", 120),
                             r.GroupConfig("g2", {}), *offsets("g2", 7, topics=1), *offsets("g3", 1)]
    path = snapshot_of(tmp_path, records)
    loaded, damage = read_snapshot(path)
    assert damage is None and loaded == records
    assert [type(x) for x in loaded] == [type(x) for x in records]
    assert frames_in(path) == 1 + 3 + 1 + 1 + 1 + 1  # g1 in batches of 50, one each for g2, g3, END
    seen: list[object] = []
    report = FileLog(tmp_path).load(seen.append)
    assert seen == records and report.snapshot_records == len(records)


def test_a_snapshot_written_one_record_per_frame_still_loads(tmp_path: Path) -> None:
    records = [r.ConsumerGroupMetadata("g1", 3, 0), *offsets("g1", 10)]
    path = tmp_path / "00000001.snapshot"
    path.write_bytes(b"".join(frame(record_codec.encode(x)) for x in records) + frame(b"END"))
    seen: list[object] = []
    FileLog(tmp_path).load(seen.append)
    assert seen == records


def test_an_offsets_batch_that_does_not_decode_is_corruption(tmp_path: Path) -> None:
    good = snapshot_codec.encode_offsets(offsets("g1", 4))
    assert snapshot_codec.decode_offsets(good) == offsets("g1", 4)
    broken = bytearray(good)
    broken[-1 - 4 * 4 - 8 * 4 - 4 * 4 - 8 * 4 - 4 * 4 - len("meta-0-ü".encode())] = 0xFF  # last topic index
    path = tmp_path / "00000001.snapshot"
    path.write_bytes(frame(bytes(broken)) + frame(b"END"))
    records, damage = read_snapshot(path)
    assert records == [] and damage is not None and damage[0] == 0 and "offsets batch" in damage[1]
    with pytest.raises(LogCorruptError):
        FileLog(tmp_path).load(lambda rec: None)


def test_loading_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path) -> None:
    snapshot_of(tmp_path, offsets("g1", 10))
    seen_enabled: list[bool] = []
    assert gc.isenabled()
    FileLog(tmp_path).load(lambda rec: seen_enabled.append(gc.isenabled()))
    assert gc.isenabled() and seen_enabled and not any(seen_enabled)  # paused while loading, then back on
    (tmp_path / "00000099.snapshot").write_bytes(b"garbage")
    with pytest.raises(LogCorruptError):
        FileLog(tmp_path).load(lambda rec: None)
    assert gc.isenabled()
    gc.disable()
    try:
        FileLog(tmp_path / "other").load(lambda rec: None)
        assert not gc.isenabled()
    finally:
        gc.enable()
