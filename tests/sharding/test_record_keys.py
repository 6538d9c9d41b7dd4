"""Every record type the core can write has a compaction key of its own. In transactional mode each record is
one message keyed by `record_key`, and compaction keeps only the last message per key: two live records sharing
a key would lose one of them, and a tombstone under another key than its record would never supersede it."""

from __future__ import annotations

import dataclasses
import itertools
import json
import typing
from typing import Any

from groupcoord.coordinator.core import records as r
from groupcoord.coordinator.core.classic.records import CLASSIC_RECORD_TYPES
from groupcoord.coordinator.core.mixed.group import MIXED_RECORD_TYPES
from groupcoord.coordinator.runtime import record_codec
from groupcoord.coordinator.runtime.kafka_log import _KEY_KIND, record_key
from groupcoord.coordinator.runtime.kafka_tombstones import deleted_keys, deletes

# The fields that say which thing a record is about; every other field is its value.
IDENTITY = ("group_id", "member_id", "regex", "topic", "partition")


def record_types() -> list[type]:
    """The core's records (coordinator/core/records.py) and those the codec carries as GenericRecord (classic,
    mixed-group classic members, regex, GroupEmptySince, and whatever a later change registers)."""
    out = {t for t in vars(r).values() if dataclasses.is_dataclass(t) and isinstance(t, type)}
    out |= set(CLASSIC_RECORD_TYPES) | set(MIXED_RECORD_TYPES) | set(record_codec._GENERIC.values())
    return sorted(out, key=lambda t: t.__name__)


def make(cls: type, identity: dict[str, Any]) -> Any:
    """An instance of `cls` about `identity`, its value fields filled with placeholders."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in IDENTITY:
            values[f.name] = identity[f.name]
        elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        else:
            hint = str(hints[f.name])
            values[f.name] = (1 if "int" in hint else {} if "Mapping" in hint or "dict" in hint
                              else () if "tuple" in hint else "x" if "str" in hint else None)
    return cls(**values)


IDENTITIES = [dict(zip(IDENTITY, values, strict=True)) for values in itertools.product(
    ("g", "h", "g\",\"m"), ("m1", "m2"), ("orders-.*", "billing-.*"), ("orders", "billing"), (0, 1))]


# Tombstones named other than "<record>Tombstone".
_LIVE_NAMES = {"StreamsGroupTopologyTombstone": "StreamsGroupTopologyRecord"}


def live_name(tombstone: type) -> str:
    """The name of the record type a tombstone deletes."""
    return _LIVE_NAMES.get(tombstone.__name__, tombstone.__name__.removesuffix("Tombstone"))


def test_the_enumeration_sees_every_kind_of_record_the_core_writes() -> None:
    names = {t.__name__ for t in record_types()}
    assert {"ConsumerGroupMetadata", "ConsumerGroupMemberMetadata", "ConsumerGroupTargetAssignmentMember",
            "ConsumerGroupTargetAssignmentMetadata", "ConsumerGroupCurrentMemberAssignment", "OffsetCommit",
            "GroupConfig", "ConsumerGroupRegularExpression", "GroupEmptySince", "ClassicGroupMetadata",
            "ConsumerGroupClassicMemberMetadata"} <= names
    assert len([n for n in names if n.endswith("Tombstone")]) >= 9


def test_every_record_type_has_a_key_kind_of_its_own_and_its_tombstone_shares_it() -> None:
    types = record_types()
    missing = [t.__name__ for t in types if t not in _KEY_KIND]
    assert not missing, f"record types keyed by the fallback (give each and its tombstone a kind): {missing}"
    live = [t for t in types if not t.__name__.endswith("Tombstone")]
    kinds = [_KEY_KIND[t] for t in live]
    assert len(set(kinds)) == len(kinds), f"two live record types share a key kind: {sorted(kinds)}"
    for tombstone in (t for t in types if t.__name__.endswith("Tombstone")):
        live_type = next((t for t in live if t.__name__ == live_name(tombstone)), None)
        assert live_type is not None, tombstone.__name__
        assert _KEY_KIND[tombstone] == _KEY_KIND[live_type], tombstone.__name__


def test_distinct_identities_get_distinct_keys_and_each_tombstone_the_key_of_its_record() -> None:
    """Across every record type and identity: one key per (type's kind, identity the type carries), and a
    tombstone's key, and the key its Kafka tombstone (null) deletes, are its record's."""
    by_key: dict[bytes, tuple[str, tuple[Any, ...]]] = {}
    types = record_types()
    for cls in types:
        fields = [f.name for f in dataclasses.fields(cls) if f.name in IDENTITY]
        for identity in IDENTITIES:
            record = make(cls, identity)
            key = record_key(record)
            what = (_KEY_KIND[cls], tuple(identity[f] for f in fields))
            assert by_key.setdefault(key, what) == what, f"{cls.__name__} {identity} collides on {key!r}"
            assert json.loads(key)[:2] == [_KEY_KIND[cls], identity["group_id"]]
            if cls.__name__.endswith("Tombstone"):
                live_type = next(t for t in types if t.__name__ == live_name(cls))
                assert key == record_key(make(live_type, identity)), cls.__name__
                assert deletes(record), f"{cls.__name__} leaves no Kafka tombstone: its key would stay forever"
                assert (identity["group_id"], key) in deleted_keys([record], record_key)
