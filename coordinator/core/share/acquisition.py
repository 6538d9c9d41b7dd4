"""Share-partition operations on the shard: acquire (ShareFetch without the records), ShareAcknowledge and
DescribeShareGroupOffsets, and `PartitionWrites`, the overlay through which every share-group operation (these,
and a member's removal and lock expiry in `share/handlers.py`) writes share-partition states and their lock timers.

They are here, apart from the heartbeat, because their job is the records' delivery state (`share/partition.py`),
not membership or assignment: they read a member's assignment and never change it. Each is pure (issue 26): it
returns a `Result` with the share-partition records and lock timers it wrote, and reads back what it wrote from
`PartitionWrites`, never from the group or the shard, which stay as they were until `GroupCoordinatorShard.apply`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.results import Result, TimerKey
from groupcoord.coordinator.core.share.group import (
    ShareGroup,
    lock_timer,
    partition_record,
    share_group,
    share_member,
)
from groupcoord.coordinator.core.share.partition import AcknowledgeType, SharePartition
from groupcoord.coordinator.core.share.records import (
    AcknowledgeResult,
    AcquiredPartition,
    AcquirePartition,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcquireRequest,
    ShareAcquireResponse,
)

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard


class PartitionWrites:
    """The share-partitions and lock-timer deadlines an operation has written so far: a handler reads these, not the
    group's or the shard's, which stay as they were until its result is applied."""

    __slots__ = ("shard", "group", "result", "partitions", "deadlines")

    def __init__(self, shard: GroupCoordinatorShard, group: ShareGroup, result: Result[Any],
                 fired: TimerKey | None = None) -> None:
        self.shard, self.group, self.result = shard, group, result
        self.partitions: dict[tuple[str, int], SharePartition] = {}
        # A fired timer is gone, whether or not the shard still lists its deadline.
        self.deadlines: dict[TimerKey, int | None] = {fired: None} if fired is not None else {}

    def partition(self, tp: tuple[str, int]) -> SharePartition | None:
        return self.partitions[tp] if tp in self.partitions else self.group.partitions.get(tp)

    def deadline(self, key: TimerKey) -> int | None:
        return self.deadlines[key] if key in self.deadlines else self.shard.timer_deadlines.get(key)

    def write_partition(self, topic_id: str, partition: int, sp: SharePartition) -> None:
        """`sp` is the share-partition's new state: its record when it changed, its lock timer (re)armed for the
        next lock deadline, or cancelled when it holds no lock."""
        tp = (topic_id, partition)
        if self.partition(tp) != sp:
            self.shard._write(self.result, partition_record(self.group.group_id, topic_id, partition, sp))
            self.partitions[tp] = sp
        key = lock_timer(self.group.group_id, topic_id, partition)
        deadline = sp.next_lock_deadline()
        if deadline is None:
            self.disarm(key)
        elif self.deadline(key) != deadline:
            self.shard.arm_timer(self.result, key, deadline)
            self.deadlines[key] = deadline

    def disarm(self, key: TimerKey) -> None:
        if self.deadline(key) is not None:
            self.shard.cancel_timer(self.result, key)
            self.deadlines[key] = None


def acquire(shard: GroupCoordinatorShard, r: ShareAcquireRequest, now: int) -> Result[ShareAcquireResponse]:
    try:
        if r.max_records < 1:
            raise CoordinatorError(Errors.INVALID_REQUEST, "max_records must be at least 1.")
        group, member = share_member(shard, r.group_id, r.member_id, r.principal)
    except CoordinatorError as e:
        return Result(ShareAcquireResponse(e.code, e.message))
    configs = shard.share_configs
    gid = group.group_id
    lock_ms = configs.record_lock_duration_ms(gid)
    limit = configs.delivery_count_limit(gid)
    max_locks = configs.max_record_locks(gid)
    result: Result[ShareAcquireResponse] = Result(ShareAcquireResponse())
    writes = PartitionWrites(shard, group, result)
    out: list[AcquiredPartition] = []
    budget = r.max_records
    for req in r.partitions:
        tid, p = req.topic_id, req.partition
        if req.log_end_offset < 0:  # not sent: the runtime's last known offsets (the Kafka lag source)
            req = _with_known_offsets(shard, req)
        if p not in member.assigned_partitions.get(tid, frozenset()):
            out.append(AcquiredPartition(tid, p, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                         "the partition is not assigned to this member"))
            continue
        if req.log_end_offset < 0:
            out.append(AcquiredPartition(tid, p, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                         "no log end offset: send it, or run with a Kafka offsets source"))
            continue
        if req.log_start_offset < 0 or req.log_end_offset < req.log_start_offset:
            out.append(AcquiredPartition(tid, p, Errors.INVALID_REQUEST, "invalid log start/end offsets"))
            continue
        sp = writes.partition((tid, p))
        if sp is None:
            start = req.log_end_offset if configs.auto_offset_reset(gid) == "latest" else req.log_start_offset
            sp = SharePartition(start, start)
        sp = sp.expire_locks(now, limit).skip_to(req.log_start_offset)
        sp, ranges = sp.acquire(member.member_id, budget, req.log_end_offset, now + lock_ms, max_locks)
        budget -= sum(x.last - x.first + 1 for x in ranges)
        writes.write_partition(tid, p, sp)
        out.append(AcquiredPartition(tid, p, ranges=tuple((x.first, x.last, x.delivery_count) for x in ranges),
                                     lock_deadline_ms=now + lock_ms if ranges else 0, start_offset=sp.start_offset))
    result.response = ShareAcquireResponse(partitions=tuple(out), record_lock_duration_ms=lock_ms)
    return result


def _with_known_offsets(shard: GroupCoordinatorShard, req: AcquirePartition) -> AcquirePartition:
    topic = shard.metadata.by_id.get(req.topic_id)
    if topic is None or shard.lag_provider is None:
        return req
    known = shard.lag_provider.offsets([(topic.name, req.partition)]).get((topic.name, req.partition))
    if known is None:
        return req
    return AcquirePartition(req.topic_id, req.partition, known[0], known[1])


def acknowledge(shard: GroupCoordinatorShard, r: ShareAcknowledgeRequest, now: int) -> Result[ShareAcknowledgeResponse]:
    try:
        group, member = share_member(shard, r.group_id, r.member_id, r.principal)
    except CoordinatorError as e:
        return Result(ShareAcknowledgeResponse(e.code, e.message))
    gid = group.group_id
    limit = shard.share_configs.delivery_count_limit(gid)
    result: Result[ShareAcknowledgeResponse] = Result(ShareAcknowledgeResponse())
    writes = PartitionWrites(shard, group, result)
    touched: dict[tuple[str, int], SharePartition] = {}
    out: list[AcknowledgeResult] = []
    for a in r.ranges:
        tp = (a.topic_id, a.partition)
        sp = touched.get(tp) or group.partitions.get(tp)
        if a.acknowledge_type not in (1, 2, 3, 4) or a.first > a.last:
            out.append(AcknowledgeResult(*tp, a.first, a.last, Errors.INVALID_REQUEST,
                                         "acknowledge_type must be 1 (accept), 2 (release), 3 (reject) or "
                                         "4 (renew), and first <= last"))
            continue
        if sp is not None:
            sp = sp.expire_locks(now, limit)
        if sp is None or not sp.holds(member.member_id, a.first, a.last):
            if sp is not None:
                touched[tp] = sp
            out.append(AcknowledgeResult(*tp, a.first, a.last, Errors.INVALID_RECORD_STATE,
                                         "the records are not acquired by this member (lock expired or never held)"))
            continue
        touched[tp] = sp.acknowledge(a.first, a.last, AcknowledgeType(a.acknowledge_type), limit,
                                     now + shard.share_configs.record_lock_duration_ms(gid))
        out.append(AcknowledgeResult(*tp, a.first, a.last))
    for (t, p), sp in touched.items():
        writes.write_partition(t, p, sp)
    result.response = ShareAcknowledgeResponse(results=tuple(out))
    return result


def describe_offsets(shard: GroupCoordinatorShard, group_id: str) -> list[tuple[str, int, SharePartition]]:
    """Kafka's DescribeShareGroupOffsets: every share-partition's state, sorted (raises GROUP_ID_NOT_FOUND)."""
    group = share_group(shard, group_id, create=False)
    return [(t, p, sp) for (t, p), sp in sorted(group.partitions.items())]
