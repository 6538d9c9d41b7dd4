"""StaticMetadataSource and the --topic / [topics] parsers: bad config fails at start-up with the reason."""

from __future__ import annotations

import tomllib

import pytest

from groupcoord.coordinator.core.metadata import MetadataImage, topic_id_for_name
from groupcoord.coordinator.runtime.static_metadata import (
    MetadataSource,
    StaticMetadataSource,
    parse_topic_flag,
    topics_from_toml,
)


def test_topic_flag_is_name_and_partition_count() -> None:
    assert parse_topic_flag("orders:12") == ("orders", 12)
    assert parse_topic_flag("my.topic_v2-x:1") == ("my.topic_v2-x", 1)


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("orders", "expects NAME:PARTITIONS"),
        ("orders:", "is not an integer"),
        ("orders:twelve", "is not an integer"),
        ("orders:0", "must be >= 1"),
        ("orders:-3", "must be >= 1"),
        (":3", "topic name is empty"),
        ("bad/name:3", "characters Kafka does not allow"),
        ("..:3", "cannot be '..'"),
        ("a" * 250 + ":1", "Kafka allows 249"),
    ],
)
def test_bad_topic_flags_say_what_is_wrong(flag: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_topic_flag(flag)


def test_toml_topics_table_takes_counts_and_racks() -> None:
    table = tomllib.loads(
        """
        [topics]
        orders = 3
        events = { partitions = 2, racks = [["r1", "r2"], ["r2", "r3"]] }
        """
    )["topics"]
    source = StaticMetadataSource(topics_from_toml(table))
    image = source.snapshot()
    assert image.by_name["orders"].partition_count == 3
    assert image.by_name["orders"].partition_racks == ()
    events = image.by_name["events"]
    assert events.topic_id == topic_id_for_name("events")
    assert image.partition_racks(events.topic_id, 1) == frozenset({"r2", "r3"})


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"t": "3"}, "must be an integer"),
        ({"t": True}, "must be an integer"),
        ({"t": {"racks": []}}, "missing 'partitions'"),
        ({"t": {"partitions": 2, "rack": []}}, "unknown key"),
        ({"t": {"partitions": 2, "racks": ["r1", "r2"]}}, "racks must be a list"),
    ],
)
def test_bad_toml_topics_say_what_is_wrong(table: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        topics_from_toml(table)


def test_racks_must_cover_every_partition() -> None:
    with pytest.raises(ValueError, match="racks lists 1 partition"):
        StaticMetadataSource({"t": (2, [["r1"]])})


def test_update_notifies_only_on_a_real_change() -> None:
    source = StaticMetadataSource({"a": 1})
    seen: list[MetadataImage] = []
    source.on_change(seen.append)
    source.update({"a": 1})
    assert seen == []
    source.update({"a": 2})
    assert [im.by_name["a"].partition_count for im in seen] == [2]


def test_static_source_satisfies_the_metadata_source_interface() -> None:
    source: MetadataSource = StaticMetadataSource({"a": 1})
    source.start()
    assert source.age_seconds() == 0.0
    source.stop()
