"""Spark's Kafka options as the source parses them (clients/spark_options.py): names, precedence, one-line errors."""

from __future__ import annotations

import json

import pytest

from groupcoord.clients.spark_options import (
    EARLIEST,
    LATEST,
    DataLossError,
    StartingOffsets,
    check_position,
    parse_duration_ms,
    resolve_start,
    split_ranges,
)
from groupcoord.clients.spark_source import SCHEMA, SCHEMA_WITH_HEADERS, GroupcoordDataSource, SourceOptions

BASE = {"coordinator": "127.0.0.1:1", "group": "g", "bootstrap.servers": "127.0.0.1:2"}


def parse(**options: str) -> SourceOptions:
    return SourceOptions.parse({**BASE, "subscribe": "t", **options})


def test_spark_names_subscribe_subscribe_pattern_and_kafka_bootstrap_servers_are_accepted() -> None:
    assert parse().topics == ("t",)
    spark = {k: v for k, v in BASE.items() if k != "bootstrap.servers"}
    options = SourceOptions.parse({**spark, "kafka.bootstrap.servers": "h:9", "subscribePattern": "orders-.*"})
    assert options.bootstrap_servers == "h:9" and options.topics == ()
    assert options.spark.topic_pattern == "orders-.*"
    assert options.spark.matches("orders-eu") and not options.spark.matches("x-orders-eu")


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribePattern": "x.*"}, "exactly one of"),
    ({"subscribe": ""}, "exactly one of"),
    ({"subscribePattern": "(", "subscribe": ""}, "'subscribePattern' must be a regular expression"),
    ({"startingOffsets": "newest"}, "'startingOffsets' must be earliest, latest or JSON"),
    ({"startingOffsets": '{"t": {"0": -3}}'}, "'startingOffsets' must be values >= -2"),
    ({"startingOffsets": '{"t": [0, 1]}'}, "'startingOffsets' must be JSON"),
    ({"startingOffsetsByTimestamp": '{"t": {"0": -1}}'}, "'startingOffsetsByTimestamp' must be values >= 0"),
    ({"startingTimestamp": "yesterday"}, "'startingTimestamp' must be a timestamp"),
    ({"startingOffsetsByTimestampStrategy": "earliest"}, "must be error or latest"),
    ({"failOnDataLoss": "yes"}, "'failOnDataLoss' must be true or false"),
    ({"includeHeaders": "1"}, "'includeHeaders' must be true or false"),
    ({"minPartitions": "0"}, "'minPartitions' must be a positive integer"),
    ({"minOffsetsPerTrigger": "-5"}, "'minOffsetsPerTrigger' must be a positive integer"),
    ({"minOffsetsPerTrigger": "500", "maxOffsetsPerTrigger": "100"}, "must not exceed 'maxOffsetsPerTrigger'"),
    ({"maxTriggerDelay": "soon"}, "'maxTriggerDelay' must be a duration"),
])
def test_a_bad_value_fails_the_load_with_one_line_naming_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        parse(**options)
    assert "\n" not in str(error.value)


def test_a_long_bad_value_is_not_echoed_whole() -> None:
    with pytest.raises(ValueError) as error:
        parse(startingOffsets="x" * 10_000)
    assert len(str(error.value)) < 300


def test_durations_take_spark_units_and_a_bare_number_is_milliseconds() -> None:
    assert parse_duration_ms("d", "15m") == 900_000
    assert parse_duration_ms("d", "30s") == 30_000
    assert parse_duration_ms("d", "1h") == 3_600_000
    assert parse_duration_ms("d", "500ms") == parse_duration_ms("d", "500") == 500
    assert parse().spark.max_trigger_delay_ms == 900_000  # Spark's default, 15m


def test_defaults_are_spark_defaults() -> None:
    spark = parse().spark
    assert spark.fail_on_data_loss is True and spark.include_headers is False
    assert spark.starting == StartingOffsets(default="latest")
    assert spark.min_partitions is None and spark.min_offsets_per_trigger is None


def test_starting_options_take_precedence_as_in_spark_and_new_partitions_start_earliest() -> None:
    offsets = json.dumps({"t": {"0": 23, "1": -1, "2": -2}})
    by_ts = json.dumps({"t": {"0": 1000}})
    only_json = parse(startingOffsets=offsets).spark.starting
    assert only_json.spec(("t", 0), True) == ("offset", 23)
    assert only_json.spec(("t", 1), True) == ("offset", LATEST)
    assert only_json.spec(("t", 2), True) == ("offset", EARLIEST)
    assert only_json.spec(("t", 9), False) == ("offset", EARLIEST)  # created after the start: earliest
    with pytest.raises(ValueError, match="startingOffsets names no value for t:3"):
        only_json.spec(("t", 3), True)
    by_time = parse(startingOffsets=offsets, startingOffsetsByTimestamp=by_ts).spark.starting
    assert by_time.spec(("t", 0), True) == ("timestamp", 1000)
    every = parse(startingOffsets=offsets, startingOffsetsByTimestamp=by_ts, startingTimestamp="5").spark.starting
    assert every.spec(("t", 7), True) == ("timestamp", 5)
    assert parse(startingOffsets="earliest").spark.starting.spec(("t", 0), True) == ("offset", EARLIEST)


def test_an_offset_kafka_no_longer_has_fails_with_fail_on_data_loss_and_moves_without() -> None:
    assert check_position(("t", 0), 60, 50, 100, True, "committed") == 60
    with pytest.raises(DataLossError, match=r"data lost in t:0: committed offset 10, but records 10-49 were "
                                            r"deleted \(log start 50\); set failOnDataLoss=false"):
        check_position(("t", 0), 10, 50, 100, True, "committed")
    assert check_position(("t", 0), 10, 50, 100, False, "committed") == 50
    with pytest.raises(DataLossError, match="the log ends at 100"):
        check_position(("t", 0), 120, 0, 100, True, "startingOffsets")
    assert check_position(("t", 0), 120, 0, 100, False, "startingOffsets") == 100


def test_min_partitions_cuts_ranges_in_proportion_to_their_size_into_contiguous_pieces() -> None:
    pieces = split_ranges([(("t", 0), 100, 1000), (("t", 1), 0, 100), (("t", 2), 5, 5)], 10)
    assert len(pieces) == 10
    assert sum(1 for tp, _, _ in pieces if tp == ("t", 0)) == 9
    for tp, start, end in [(("t", 0), 100, 1000), (("t", 1), 0, 100)]:
        mine = sorted((a, b) for p, a, b in pieces if p == tp)
        assert mine[0][0] == start and mine[-1][1] == end
        assert all(b == a2 for (_, b), (a2, _) in zip(mine, mine[1:], strict=False))
    assert split_ranges([(("t", 0), 0, 3)], 10) == [(("t", 0), 0, 1), (("t", 0), 1, 2), (("t", 0), 2, 3)]
    few = [(("t", 0), 0, 10), (("t", 1), 0, 10)]
    assert split_ranges(few, 2) == few


def test_include_headers_adds_spark_headers_column() -> None:
    assert GroupcoordDataSource({**BASE, "subscribe": "t"}).schema() == SCHEMA
    with_headers = GroupcoordDataSource({**BASE, "subscribe": "t", "includeHeaders": "true"}).schema()
    assert with_headers == SCHEMA_WITH_HEADERS
    assert with_headers.simpleString().endswith("headers:array<struct<key:string,value:binary>>>")


def test_a_start_resolves_to_the_log_start_the_end_an_offset_or_the_first_record_at_a_timestamp() -> None:
    spark = parse().spark
    assert resolve_start(("t", 0), ("offset", EARLIEST), 5, 90, -1, spark) == 5
    assert resolve_start(("t", 0), ("offset", LATEST), 5, 90, -1, spark) == 90
    assert resolve_start(("t", 0), ("offset", 40), 5, 90, -1, spark) == 40
    with pytest.raises(DataLossError, match="startingOffsets offset 2, but records 2-4 were deleted"):
        resolve_start(("t", 0), ("offset", 2), 5, 90, -1, spark)
    assert resolve_start(("t", 0), ("timestamp", 1000), 5, 90, 33, spark) == 33
    with pytest.raises(RuntimeError, match="t:0 has no record at or after timestamp 1000"):
        resolve_start(("t", 0), ("timestamp", 1000), 5, 90, -1, spark)
    latest = parse(startingOffsetsByTimestampStrategy="latest").spark
    assert resolve_start(("t", 0), ("timestamp", 1000), 5, 90, -1, latest) == 90
