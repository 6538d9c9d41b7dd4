"""Committed offsets: the store (state rebuilt from OffsetCommit records) and the commit/fetch rules.

Who may commit is the group's business (`validate_offset_commit`, group.py): consumer groups check
the member epoch (KIP-848; a commit from an older epoch is accepted for partitions the member has held since
at least that epoch, so a scale-out does not falsely fence commits), classic groups the generation.
A commit from outside any group (empty member id, epoch -1) is accepted only while the group has no members.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.messages import (
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionError,
)
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.core.principals import check_member_principal
from groupcoord.coordinator.core.records import OffsetCommit, OffsetCommitTombstone
from groupcoord.coordinator.core.results import Result

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard


class OffsetStore:
    def __init__(self) -> None:
        self._by_group: dict[str, dict[tuple[str, int], OffsetCommit]] = {}

    def replay_commit(self, r: OffsetCommit) -> None:
        self._by_group.setdefault(r.group_id, {})[(r.topic, r.partition)] = r

    def replay_tombstone(self, r: OffsetCommitTombstone) -> None:
        group = self._by_group.get(r.group_id)
        if group is not None:
            group.pop((r.topic, r.partition), None)
            if not group:
                del self._by_group[r.group_id]

    def committed(self, group_id: str) -> Mapping[tuple[str, int], OffsetCommit]:
        return self._by_group.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._by_group.get(group_id))

    def __bool__(self) -> bool:
        return bool(self._by_group)

    def group_ids(self) -> list[str]:
        return list(self._by_group)

    def count(self) -> int:
        return sum(len(g) for g in self._by_group.values())


def handle_offset_commit(shard: GroupCoordinatorShard, request: OffsetCommitRequest,
                         now: int) -> Result[OffsetCommitResponse]:
    result: Result[OffsetCommitResponse] = Result(OffsetCommitResponse(Errors.NONE, "", ()))
    keys = [(c.topic, c.partition) for c in request.partitions]

    def fail(code: Errors, message: str) -> Result[OffsetCommitResponse]:
        return Result(OffsetCommitResponse(code, message, [PartitionError(t, p, code, message) for t, p in keys]))

    if not request.group_id:
        return fail(Errors.INVALID_GROUP_ID, "group_id can't be empty.")
    group = shard.groups.get(request.group_id)
    epoch = request.generation_id_or_member_epoch
    try:
        if group is None:
            if request.member_id or epoch >= 0:
                raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND,
                                       f"Group {request.group_id} does not exist; members must join before committing.")
            per_partition: dict[tuple[str, int], Errors] = {}
        else:
            member = group.members.get(request.member_id) if request.member_id else None
            if member is not None:
                check_member_principal(member.principal, request.principal, request.member_id, request.group_id)
            per_partition = dict(group.validate_offset_commit(request.member_id, request.group_instance_id, epoch,
                                                              keys, shard.metadata))
    except CoordinatorError as e:
        return fail(e.code, e.message)

    max_metadata = shard.config["offset.metadata.max.bytes"]
    image: MetadataImage = shard.metadata
    out: list[PartitionError] = []
    for c in request.partitions:
        key = (c.topic, c.partition)
        code = per_partition.get(key, Errors.NONE)
        message = ""
        t = image.by_name.get(c.topic)
        if code is Errors.NONE:
            if not c.topic or c.partition < 0 or t is None or c.partition >= t.partition_count:
                code, message = Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{c.topic}-{c.partition} does not exist."
            elif c.committed_offset < 0:
                code, message = Errors.OFFSET_OUT_OF_RANGE, f"offset {c.committed_offset} is negative."
            elif c.metadata is not None and len(c.metadata.encode()) > max_metadata:
                code, message = Errors.OFFSET_METADATA_TOO_LARGE, f"metadata exceeds {max_metadata} bytes."
        elif code is Errors.STALE_MEMBER_EPOCH:
            message = (f"epoch {epoch} is older than the epoch at which {c.topic}-{c.partition} was assigned "
                       "(or the partition is not assigned to this member).")
        if code is Errors.NONE:
            shard._write(result, OffsetCommit(request.group_id, c.topic, c.partition, c.committed_offset,
                                              c.leader_epoch, c.metadata or "", now))
        out.append(PartitionError(c.topic, c.partition, code, message))
    result.response = OffsetCommitResponse(Errors.NONE, "", out)
    return result


def handle_offset_fetch(shard: GroupCoordinatorShard, request: OffsetFetchRequest,
                        now: int) -> Result[OffsetFetchResponse]:
    if not request.group_id:
        return Result(OffsetFetchResponse(Errors.INVALID_GROUP_ID, "group_id can't be empty."))
    group = shard.groups.get(request.group_id)
    if request.member_id and group is not None:
        try:
            group.validate_offset_fetch(request.member_id, request.member_epoch)
        except CoordinatorError as e:
            return Result(OffsetFetchResponse(e.code, e.message))
    elif request.member_id and group is None:
        return Result(OffsetFetchResponse(Errors.GROUP_ID_NOT_FOUND, f"Group {request.group_id} does not exist."))
    committed = shard.offsets.committed(request.group_id)
    out: list[FetchedOffset] = []
    if request.topics is None:
        for (topic, p), c in sorted(committed.items()):
            out.append(FetchedOffset(topic, p, c.committed_offset, c.leader_epoch, c.metadata))
    else:
        for topic, parts in request.topics.items():
            wanted = parts if parts is not None else sorted(p for (t, p) in committed if t == topic)
            for p in wanted:
                found = committed.get((topic, p))
                if found is None:
                    out.append(FetchedOffset(topic, p, -1, -1, ""))
                else:
                    out.append(FetchedOffset(topic, p, found.committed_offset, found.leader_epoch, found.metadata))
    return Result(OffsetFetchResponse(Errors.NONE, "", out))
