"""Kafka tombstones for the state topic: a null-valued message under each key an operation deleted.

Why: a tombstone record (a member left, an offset or a group deleted) is written as an ordinary value under
the key of what it deletes, so replay applies it in order; but compaction then keeps that record, and the
key, forever. A null value after it is Kafka's own tombstone: compaction drops the key altogether once
`delete.retention.ms` has passed, so the topic shrinks to live state, as `__consumer_offsets` does. Replay
skips null values; the tombstone record before the null has already done the deletion.

Dropping a key is safe only if nothing left under another key brings the deleted thing back on replay:
  - a consumer group's tombstone also nulls the group's target-assignment metadata key, the one key of a
    group with no tombstone record of its own (replaying it would re-create the group);
  - a key is nulled only if the operation does not write it again after deleting it (a group deleted and
    re-created in one operation keeps its new records).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from groupcoord.coordinator.core import records as r
from groupcoord.coordinator.core.share import records as sr
from groupcoord.coordinator.core.streams import records as st

__all__ = ["deleted_keys", "deletes"]

# A group's target-assignment metadata has no tombstone of its own: it goes with the group's metadata.
_GOES_WITH: dict[type, type] = {
    r.ConsumerGroupMetadataTombstone: r.ConsumerGroupTargetAssignmentMetadata,
    sr.ShareGroupMetadataTombstone: sr.ShareGroupTargetAssignmentMetadata,
    st.StreamsGroupMetadataTombstone: st.StreamsGroupTargetAssignmentMetadata,
}


def deletes(record: Any) -> bool:
    """True for a record whose key is gone after it: a tombstone, or a group's configs set to none."""
    return isinstance(record, r.Tombstone) or (isinstance(record, r.GroupConfig) and not record.configs)


def deleted_keys(records: Sequence[Any], key_of: Callable[[Any], bytes]) -> list[tuple[str, bytes]]:
    """(group id, key) of every key the operation `records` leaves deleted, in the order first deleted."""
    deleted: dict[bytes, str] = {}
    for record in records:
        key = key_of(record)
        if not deletes(record):
            deleted.pop(key, None)
            continue
        deleted[key] = record.group_id
        target_metadata = _GOES_WITH.get(type(record))
        if target_metadata is not None:
            deleted[key_of(target_metadata(record.group_id, 0, 0))] = record.group_id
    return [(group_id, key) for key, group_id in deleted.items()]
