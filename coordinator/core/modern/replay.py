"""Replaying what every modern group type records alike (Kafka's ModernGroup state): the group's epoch and
metadata hash, and its target assignment (per member, then its epoch and when it was computed). Each type names
its record types, how its groups are found (`existing`) or created by a record (`group`), and where its target
is kept; its members, current assignments and the rest are its own."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from groupcoord.coordinator.core.modern.group import ModernGroup


def modern_replayers(group: Callable[[str], ModernGroup], existing: Callable[[str], ModernGroup | None],
                     target: Callable[[Any], MutableMapping[str, Any]], metadata: type, target_member: type,
                     target_member_tombstone: type, target_metadata: type) -> dict[type, Callable[[Any], None]]:
    def replay_metadata(r: Any) -> None:
        g = group(r.group_id)
        g.group_epoch, g.metadata_hash = r.epoch, r.metadata_hash

    def replay_target_member(r: Any) -> None:
        target(group(r.group_id))[r.member_id] = r.partitions

    def replay_target_member_tombstone(r: Any) -> None:
        g = existing(r.group_id)
        if g is not None and r.member_id in target(g):
            del target(g)[r.member_id]

    def replay_target_metadata(r: Any) -> None:
        g = group(r.group_id)
        g.target_assignment_epoch, g.assignment_timestamp_ms = r.assignment_epoch, r.timestamp_ms

    return {metadata: replay_metadata, target_member: replay_target_member,
            target_member_tombstone: replay_target_member_tombstone, target_metadata: replay_target_metadata}
