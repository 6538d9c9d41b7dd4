"""Administrative operations: describe, list and delete groups, delete offsets; describe and alter configs.

A group known only by its committed offsets (standalone commits, no membership) is shown as Kafka shows its
"simple consumer group": type classic, state Empty, protocol type "".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core.config import GROUP_CONFIG_DEFS, altered_group_configs, render_value
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.group import OffsetGroup
from groupcoord.coordinator.core.messages import (
    ConfigEntry,
    DescribedGroup,
    DescribedGroupConfig,
    GroupResult,
    ListedGroup,
    PartitionError,
)
from groupcoord.coordinator.core.records import GroupConfig, GroupEmptySinceTombstone, OffsetCommitTombstone
from groupcoord.coordinator.core.results import Result

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard

OFFSET_ONLY_TYPE = "classic"
OFFSET_ONLY_STATE = "Empty"


def describe_groups(shard: GroupCoordinatorShard, group_ids: Sequence[str]) -> list[DescribedGroup]:
    out: list[DescribedGroup] = []
    for gid in group_ids:
        group = shard.groups.get(gid)
        if group is not None:
            out.append(group.describe())
        elif shard.offsets.has_offsets(gid):
            out.append(DescribedGroup(gid, group_type=OFFSET_ONLY_TYPE, group_state=OFFSET_ONLY_STATE))
        else:
            out.append(DescribedGroup(gid, Errors.GROUP_ID_NOT_FOUND, f"Group {gid} does not exist.",
                                      group_state="DEAD"))
    return out


def list_groups(shard: GroupCoordinatorShard, states: Sequence[str], types: Sequence[str]) -> list[ListedGroup]:
    want_states = {s.upper() for s in states}
    want_types = {t.lower() for t in types}
    out: list[ListedGroup] = []
    for gid in sorted(set(shard.groups).union(shard.offsets.group_ids())):
        group = shard.groups.get(gid)
        listed = group.listed() if group is not None else ListedGroup(gid, "", OFFSET_ONLY_STATE, OFFSET_ONLY_TYPE)
        if want_states and listed.group_state.upper() not in want_states:
            continue
        if want_types and listed.group_type.lower() not in want_types:
            continue
        out.append(listed)
    return out


def delete_groups(shard: GroupCoordinatorShard, group_ids: Sequence[str]) -> Result[list[GroupResult]]:
    """Delete empty groups and their committed offsets (tombstones for everything they wrote)."""
    result: Result[list[GroupResult]] = Result([])
    deleted: set[str] = set()  # deleted by this operation (its records are applied after it)
    for gid in group_ids:
        group = shard.groups.get(gid)
        if gid in deleted or group is None and not shard.offsets.has_offsets(gid):
            result.response.append(GroupResult(gid, Errors.GROUP_ID_NOT_FOUND, f"Group {gid} does not exist."))
            continue
        if group is not None and not group.is_empty():
            result.response.append(GroupResult(gid, Errors.NON_EMPTY_GROUP,
                                               f"Group {gid} still has members; they must leave first."))
            continue
        write_group_deletion(shard, gid, group, result)
        deleted.add(gid)
        result.response.append(GroupResult(gid))
    return result


def delete_offsets(shard: GroupCoordinatorShard, group_id: str,
                   partitions: Sequence[tuple[str, int]]) -> Result[tuple[GroupResult, list[PartitionError]]]:
    """Kafka's OffsetDelete (KIP-496): tombstone committed offsets of topics the group does not consume.

    Whole request: GROUP_ID_NOT_FOUND for an unknown group; what the group's `validate_offset_delete` raises
    (a classic group with members that does not use the consumer protocol type: NON_EMPTY_GROUP). Per
    partition: GROUP_SUBSCRIBED_TO_TOPIC (86) for a topic in the group's `topics_in_use` (our classic groups
    keep subscriptions opaque, so a classic group with members counts as subscribed to every topic: Kafka's
    answer when it cannot read the subscriptions)."""
    result: Result[tuple[GroupResult, list[PartitionError]]] = Result((GroupResult(group_id), []))
    group = shard.groups.get(group_id)
    if group is None and not shard.offsets.has_offsets(group_id):
        result.response = (GroupResult(group_id, Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} does not exist."),
                           [])
        return result
    subscribed: set[str] | None = set()  # None: every topic
    if group is not None:
        try:
            group.validate_offset_delete()
        except CoordinatorError as e:
            result.response = (GroupResult(group_id, e.code, e.message), [])
            return result
        subscribed = group.topics_in_use()
    committed = shard.offsets.committed(group_id)
    deleted: set[tuple[str, int]] = set()  # tombstoned by this operation (applied after it)
    out: list[PartitionError] = []
    for topic, p in partitions:
        if subscribed is None or topic in subscribed:
            out.append(PartitionError(topic, p, Errors.GROUP_SUBSCRIBED_TO_TOPIC,
                                      "The group is subscribed to the topic."))
            continue
        if (topic, p) in committed and (topic, p) not in deleted:
            shard._write(result, OffsetCommitTombstone(group_id, topic, p))
            deleted.add((topic, p))
        out.append(PartitionError(topic, p, Errors.NONE))
    result.response = (GroupResult(group_id), out)
    return result


def write_group_deletion(shard: GroupCoordinatorShard, gid: str, group: OffsetGroup | None,
                         result: Result[Any]) -> None:
    """Tombstones for everything an empty group wrote: its offsets, its records, when it became empty."""
    for (topic, p) in list(shard.offsets.committed(gid)):
        shard._write(result, OffsetCommitTombstone(gid, topic, p))
    if group is not None:
        for record in group.deletion_records():
            shard._write(result, record)
    if gid in shard.empty_since:
        shard._write(result, GroupEmptySinceTombstone(gid))


def describe_group_configs(shard: GroupCoordinatorShard, group_ids: Sequence[str]) -> list[DescribedGroupConfig]:
    out: list[DescribedGroupConfig] = []
    for gid in group_ids:
        if not gid:
            out.append(DescribedGroupConfig(gid, Errors.INVALID_GROUP_ID, "group id can't be empty."))
            continue
        overrides = shard.group_configs.get(gid, {})
        entries = []
        for name, d in sorted(GROUP_CONFIG_DEFS.items()):
            if name in overrides:
                entries.append(ConfigEntry(name, render_value(overrides[name]), False))
            else:
                entries.append(ConfigEntry(name, "" if d.default is None else render_value(d.default), True))
        out.append(DescribedGroupConfig(gid, configs=entries))
    return out


def alter_group_configs(shard: GroupCoordinatorShard, group_id: str, updates: Mapping[str, str | None],
                        validate_only: bool) -> Result[GroupResult]:
    """Incremental alter: set the named overrides, delete those given as None; all-or-nothing."""
    if not group_id:
        return Result(GroupResult(group_id, Errors.INVALID_GROUP_ID, "group id can't be empty."))
    try:
        merged = altered_group_configs(shard.group_configs.get(group_id, {}), updates, shard.config)
    except CoordinatorError as e:
        return Result(GroupResult(group_id, e.code, e.message))
    result: Result[GroupResult] = Result(GroupResult(group_id))
    if validate_only:
        return result
    shard._write(result, GroupConfig(group_id, merged))
    return result
