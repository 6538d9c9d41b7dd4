"""The source's pure parts: offsets as JSON, the per-batch budget, task packing, options, output counting."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from groupcoord.clients.spark_driver import BatchRange, coverage
from groupcoord.clients.spark_source import (
    SCHEMA,
    GroupcoordStreamReader,
    KafkaRange,
    SourceOptions,
    allot,
    decode_offset,
    encode_offset,
    pack,
)
from groupcoord.clients.spark_staging import StagingArea

OPTIONS = {"coordinator": "127.0.0.1:1", "group": "g", "topics": "b, a", "bootstrap.servers": "127.0.0.1:2"}


def test_equal_offsets_serialise_to_equal_json_whatever_the_insertion_order() -> None:
    one = encode_offset({("t", 10): (5, 7), ("t", 2): (1, 3), ("s", 0): (0, 0)})
    other = encode_offset({("s", 0): (0, 0), ("t", 2): (1, 3), ("t", 10): (5, 7)})
    assert json.dumps(one) == json.dumps(other)
    assert decode_offset(json.loads(json.dumps(one))) == {("t", 10): (5, 7), ("t", 2): (1, 3), ("s", 0): (0, 0)}


def test_budget_is_split_in_proportion_to_available_records_and_used_in_full() -> None:
    share = allot({("t", 0): 900, ("t", 1): 100, ("t", 2): 0}, 100)
    assert sum(share.values()) == 100
    assert share[("t", 0)] == 90 and share[("t", 1)] == 10 and share[("t", 2)] == 0


def test_budget_never_gives_a_partition_more_than_it_has() -> None:
    share = allot({("t", 0): 1, ("t", 1): 1, ("t", 2): 1000}, 7)
    assert sum(share.values()) == 7
    assert all(share[tp] <= n for tp, n in {("t", 0): 1, ("t", 1): 1, ("t", 2): 1000}.items())


def test_everything_available_is_taken_without_a_limit_or_under_it() -> None:
    available = {("t", 0): 5, ("t", 1): 3}
    assert allot(available, None) == available
    assert allot(available, 100) == available


def test_ranges_are_packed_into_at_most_the_task_count_with_balanced_sizes() -> None:
    ranges = [KafkaRange("t", p, 0, n) for p, n in enumerate([100, 90, 10, 10, 5, 5])]
    tasks = pack(ranges, 2)
    assert len(tasks) == 2
    sizes = sorted(sum(r.end - r.start for r in t.ranges) for t in tasks)
    assert sizes == [110, 110]
    assert {r for t in tasks for r in t.ranges} == set(ranges)
    assert len(pack(ranges[:1], 4)) == 1


def test_options_are_validated_when_the_source_loads() -> None:
    options = SourceOptions.parse({**OPTIONS, "maxOffsetsPerTrigger": "10", "startingOffsets": "EARLIEST",
                                   "kafka.security.protocol": "PLAINTEXT"})
    assert options.topics == ("a", "b") and options.max_offsets_per_trigger == 10
    assert options.spark.starting.default == "earliest"
    assert options.kafka_config()["security.protocol"] == "PLAINTEXT"
    with pytest.raises(ValueError, match="'group' is required"):
        SourceOptions.parse({k: v for k, v in OPTIONS.items() if k != "group"})
    with pytest.raises(ValueError, match="startingOffsets"):
        SourceOptions.parse({**OPTIONS, "startingOffsets": "newest"})
    with pytest.raises(ValueError, match="maxOffsetsPerTrigger"):
        SourceOptions.parse({**OPTIONS, "maxOffsetsPerTrigger": "0"})
    with pytest.raises(ValueError, match="go together"):
        SourceOptions.parse({**OPTIONS, "staging.dir": "/tmp/staged"})


def test_relative_kafka_file_options_become_absolute_where_the_source_loads_so_executors_find_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An executor reads Kafka in its worker's directory (work/app-.../N), not the driver's."""
    monkeypatch.chdir(tmp_path)
    options = SourceOptions.parse({**OPTIONS, "kafka.ssl.ca.location": "certs/ca.pem",
                                   "kafka.ssl.key.location": "/etc/key.pem", "kafka.client.id": "certs/x"})
    kafka = dict(options.kafka)
    assert kafka["ssl.ca.location"] == str(tmp_path / "certs" / "ca.pem")
    assert kafka["ssl.key.location"] == "/etc/key.pem"
    assert kafka["client.id"] == "certs/x"  # not a file option: as given
    assert dict(SourceOptions.parse({**OPTIONS, "kafka.ssl.ca.location": "probe"}).kafka)["ssl.ca.location"] == "probe"
    # what executors get is the pickled reader: the absolute path travels with it
    reader = pickle.loads(pickle.dumps(GroupcoordStreamReader(options, SCHEMA)))
    assert dict(reader.options.kafka)["ssl.ca.location"] == str(tmp_path / "certs" / "ca.pem")


def test_the_reader_pickles_without_starting_a_member() -> None:
    reader = GroupcoordStreamReader(SourceOptions.parse(OPTIONS), SCHEMA)
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.options == reader.options and copy._state is None


def _r(driver: str, batch: int, first: int, last: int, partition: int = 0) -> BatchRange:
    return BatchRange(driver, "run", batch, "t", partition, first, last, last - first + 1)


def test_counting_finds_overlaps_as_duplicates_and_holes_as_missing() -> None:
    ranges = [_r("a", 0, 0, 9), _r("a", 1, 10, 19), _r("c", 0, 15, 24), _r("c", 1, 30, 39)]
    cov = coverage(ranges, {("t", 0): (0, 40), ("t", 1): (0, 2)})
    assert cov.produced == 42 and cov.processed == 40
    assert cov.duplicates == 5
    assert cov.missing == 5 + 2
    assert cov.duplicate_batches == (("a", "run", 1), ("c", "run", 0))
    assert ("t", 0, 25, 29) in cov.gaps and ("t", 1, 0, 1) in cov.gaps


def test_counting_rejects_a_batch_range_with_holes() -> None:
    with pytest.raises(AssertionError, match="non-contiguous"):
        coverage([BatchRange("a", "run", 0, "t", 0, 0, 9, 5)], {("t", 0): (0, 10)})


def _stage(area: StagingArea, name: str, partitions: list[int]) -> None:
    pq.write_table(pa.table({"topic": ["t"] * len(partitions), "partition": partitions}), area.staging / name)


def test_staged_output_is_published_when_committed_and_deleted_when_refused(tmp_path: Path) -> None:
    area = StagingArea(tmp_path / "staging", tmp_path / "published")
    _stage(area, "r-1.parquet", [0, 1])
    area.settle(accepted={("t", 0), ("t", 1)}, refused=set())
    assert [f.name for f in area.publish.iterdir()] == ["r-1.parquet"] and area.staged() == []
    _stage(area, "r-2.parquet", [0, 1])
    area.settle(accepted=set(), refused={("t", 0), ("t", 1)})
    assert [f.name for f in area.publish.iterdir()] == ["r-1.parquet"] and area.staged() == []
    assert (area.published_files, area.discarded_files) == (1, 1)


def test_only_the_committed_partitions_rows_are_published_when_a_commit_is_partly_refused(tmp_path: Path) -> None:
    area = StagingArea(tmp_path / "staging", tmp_path / "published")
    _stage(area, "r-3.parquet", [0, 1, 2, 2])
    area.settle(accepted={("t", 0), ("t", 1)}, refused={("t", 2)})
    assert area.staged() == []
    assert pq.read_table(area.publish / "r-3.parquet").column("partition").to_pylist() == [0, 1]
    assert sorted(f.name for f in area.publish.iterdir()) == ["r-3.parquet"]  # no temporary file left
