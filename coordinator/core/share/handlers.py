"""Share-group membership on the shard: ShareGroupHeartbeat (join, leave, subscription changes), the target
assignment (KIP-1263 batching and offload) and the offloaded runs' completions, and the group's timers (session
and lock expiry). The share-partitions' delivery operations (acquire, ShareAcknowledge) are `share/acquisition.py`.

Each validates once at the edge and returns a `Result`: the response, its records (`shard._write`), timers,
tasks, and the volatile effects no log keeps (the in-flight run, the metadata image seen). Every handler is pure
(issue 26): it mutates nothing; `GroupCoordinatorShard.apply` applies what it returns, after it returned. What a
handler's own records change is read from local values (the updated member, the new group epoch, the members
once the change applies, the target it wrote, the share-partitions and lock deadlines it wrote:
`share/acquisition.py`'s `PartitionWrites`), never from the group. A group id has one type: a share request for
a group of another type gets GROUP_ID_NOT_FOUND ("is not a share group"), as Kafka's
getOrMaybeCreatePersistedShareGroup (`share/group.py`'s `share_group`); a new group is created by replaying its
first record.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from groupcoord.assignors.api import AssignorError, GroupSpec, MemberSpec
from groupcoord.assignors.simple_share import SimpleShareAssignor
from groupcoord.coordinator.core import retention
from groupcoord.coordinator.core.config import ModernGroupConfigs
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.group import Group, GroupTypeHooks
from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion, AssignorRun
from groupcoord.coordinator.core.modern.group import (
    EMPTY_ASSIGNMENT_EPOCH,
    FIRST_GROUP_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    RunStarted,
    check_member_epoch,
    may_compute_target,
    offload,
    take_completion,
)
from groupcoord.coordinator.core.modern.heartbeat import HeartbeatSteps
from groupcoord.coordinator.core.principals import check_member_principal
from groupcoord.coordinator.core.results import Result, TimerKey
from groupcoord.coordinator.core.share.acquisition import PartitionWrites
from groupcoord.coordinator.core.share.group import (
    ASSIGNOR_NAME,
    GROUP_TYPE,
    LOCK_TIMER,
    SESSION_TIMER,
    MetadataImageSeen,
    ShareGroup,
    ShareGroupMember,
    assignment_record,
    member_record,
    replayers,
    session_timer,
    share_group,
    share_member,
    subscribed_topic_names,
)
from groupcoord.coordinator.core.share.records import (
    MEMBER_TOMBSTONES,
    Partitions,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    ShareGroupMetadata,
    ShareGroupTargetAssignmentMember,
    ShareGroupTargetAssignmentMetadata,
)

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard

SIMPLE = SimpleShareAssignor()  # also registered by name in groupcoord.assignors.builtin, for offloaded runs


class ShareConfigs(ModernGroupConfigs):
    """Share groups' settings (`share.*` over `group.share.*`), with those only share groups have."""

    def __init__(self, shard: GroupCoordinatorShard) -> None:
        super().__init__(shard, "share")

    def record_lock_duration_ms(self, gid: str) -> int:
        return int(self.value(gid, "record.lock.duration.ms"))

    def delivery_count_limit(self, gid: str) -> int:
        return int(self.value(gid, "delivery.count.limit"))

    def max_record_locks(self, gid: str) -> int:
        return int(self.value(gid, "partition.max.record.locks"))

    def auto_offset_reset(self, gid: str) -> str:
        return str(self.source.group_config(gid, "share.auto.offset.reset"))


def hooks(shard: GroupCoordinatorShard) -> GroupTypeHooks:
    """Share groups' records, timers and assignor completions, for the shard's constructor (after it built
    `shard.share_configs`, which every share group reads)."""
    return GroupTypeHooks(replayers(shard, shard.share_configs),
                          {SESSION_TIMER: partial(on_session_timer, shard), LOCK_TIMER: partial(on_lock_timer, shard)},
                          {GROUP_TYPE: partial(on_assignment_complete, shard)})


def _invalid(message: str) -> CoordinatorError:
    return CoordinatorError(Errors.INVALID_REQUEST, message)


class _MembersAfter(Mapping[str, ShareGroupMember]):
    """The group's members once a heartbeat's member record applies, without copying them: `member_id` is
    `member` (in its place, or last when it joins), as replaying the record would leave the group's dict."""

    __slots__ = ("members", "member_id", "member")

    def __init__(self, members: Mapping[str, ShareGroupMember], member_id: str, member: ShareGroupMember) -> None:
        self.members, self.member_id, self.member = members, member_id, member

    def __getitem__(self, key: str) -> ShareGroupMember:
        return self.member if key == self.member_id else self.members[key]

    def __iter__(self) -> Iterator[str]:
        yield from self.members
        if self.member_id not in self.members:
            yield self.member_id

    def __len__(self) -> int:
        return len(self.members) + (self.member_id not in self.members)


# =========================================================================================================
# ShareGroupHeartbeat
# =========================================================================================================
def heartbeat(shard: GroupCoordinatorShard, r: ShareGroupHeartbeatRequest,
              now: int) -> Result[ShareGroupHeartbeatResponse]:
    return _STEPS.run(shard, r, now)


def _validate(shard: GroupCoordinatorShard, r: ShareGroupHeartbeatRequest) -> None:
    if not r.group_id.strip():
        raise _invalid("GroupId can't be empty.")
    if r.rack_id is not None and not r.rack_id.strip():
        raise _invalid("RackId can't be empty.")
    if r.member_epoch > 0 or r.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not r.member_id.strip():
            raise _invalid("MemberId can't be empty.")
    elif r.member_epoch == 0:
        if not r.subscribed_topic_names:
            raise _invalid("SubscribedTopicNames must be set in first request.")
    else:
        raise _invalid("MemberEpoch is invalid.")
    if r.subscribed_topic_names is not None and any(not n for n in r.subscribed_topic_names):
        raise _invalid("SubscribedTopicNames can't contain an empty topic name.")


def _heartbeat(shard: GroupCoordinatorShard, r: ShareGroupHeartbeatRequest,
               now: int) -> Result[ShareGroupHeartbeatResponse]:
    result: Result[ShareGroupHeartbeatResponse] = Result(ShareGroupHeartbeatResponse())
    configs: ShareConfigs = shard.share_configs
    joining = r.member_epoch == 0
    group = share_group(shard, r.group_id, create=joining)
    gid = group.group_id
    member_id = r.member_id or shard.member_id_factory()
    member = group.members.get(member_id)
    max_size = int(shard.config["group.share.max.size"])
    if member is None and len(group.members) >= max_size:
        raise CoordinatorError(Errors.GROUP_MAX_SIZE_REACHED,
                               f"The share group has reached its maximum capacity of {max_size} members.")
    if member is None:
        if not joining:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
        member = ShareGroupMember(member_id, principal=r.principal)
    else:
        check_member_principal(member.principal, r.principal, member_id, gid)
        if not joining:  # no revocation: a client at its previous epoch owns nothing it must give up
            check_member_epoch(r.member_epoch, member.member_epoch, member.previous_member_epoch, lambda: True)
    is_new = member_id not in group.members
    updated = ShareGroupMember(
        member_id, r.rack_id if r.rack_id is not None else member.rack_id,
        r.client_id if joining else member.client_id, r.client_host if joining else member.client_host,
        tuple(sorted(set(r.subscribed_topic_names))) if r.subscribed_topic_names is not None
        else member.subscribed_topic_names,
        member.principal, member.member_epoch, member.previous_member_epoch, member.assigned_partitions)
    subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
    bump = is_new or subscription_changed or updated.rack_id != member.rack_id
    if is_new or updated != member:
        shard._write(result, member_record(gid, updated))
    group_epoch = group.group_epoch
    members = _MembersAfter(group.members, member_id, updated)
    if bump or group.metadata_image_seen is not shard.metadata:
        result.memory.append(MetadataImageSeen(gid, shard.metadata))
        new_hash = shard.metadata.topics_hash(subscribed_topic_names(members.values()))
        if bump or new_hash != group.metadata_hash:
            group_epoch = max(group.group_epoch + 1, FIRST_GROUP_EPOCH)
            shard._write(result, ShareGroupMetadata(gid, group_epoch, new_hash))

    target_epoch = group.target_assignment_epoch
    written: Mapping[str, Partitions] = {}  # the target members this heartbeat wrote
    if group_epoch > target_epoch:
        computed = maybe_compute_target(shard, group, members, group_epoch, now, result)
        if computed is not None:
            written, target_epoch = computed, group_epoch

    # No revoke-before-assign: straight to the target epoch and partitions, minus unsubscribed topics.
    before = updated
    own_target = (written[member_id] if member_id in written else group.target_assignment.get(member_id, {})) \
        if target_epoch else {}
    subscribed_ids = {shard.metadata.by_name[n].topic_id for n in before.subscribed_topic_names
                      if n in shard.metadata.by_name}
    target = {t: ps for t, ps in own_target.items() if t in subscribed_ids and ps}
    epoch = max(target_epoch, EMPTY_ASSIGNMENT_EPOCH)
    changed = _normalise(target) != _normalise(before.assigned_partitions)
    after = before
    if before.member_epoch != epoch or changed:
        after = ShareGroupMember(
            member_id, before.rack_id, before.client_id, before.client_host, before.subscribed_topic_names,
            before.principal, epoch, before.member_epoch if before.member_epoch != epoch
            else before.previous_member_epoch, target)
        shard._write(result, assignment_record(gid, after))
    shard.arm_timer(result, session_timer(gid, member_id), now + configs.session_timeout_ms(gid))
    result.empty_after = False
    result.response = ShareGroupHeartbeatResponse(
        member_id=member_id, member_epoch=after.member_epoch,
        heartbeat_interval_ms=configs.heartbeat_interval_ms(gid),
        assignment=dict(after.assigned_partitions) if joining or changed else None)
    return result


def _normalise(p: Partitions) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in p.items() if ps}


def _leave(shard: GroupCoordinatorShard, r: ShareGroupHeartbeatRequest,
           now: int) -> Result[ShareGroupHeartbeatResponse]:
    result: Result[ShareGroupHeartbeatResponse] = Result(ShareGroupHeartbeatResponse())
    group, member = share_member(shard, r.group_id, r.member_id, r.principal)
    result.empty_after = len(group.members) == 1  # the leaving member was the last
    remove_member(shard, group, member.member_id, now, result)
    result.response = ShareGroupHeartbeatResponse(member_id=member.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)
    return result


_STEPS = HeartbeatSteps(
    _validate, lambda r: r.member_epoch == LEAVE_GROUP_MEMBER_EPOCH, _leave, _heartbeat,
    lambda shard, r, e: ShareGroupHeartbeatResponse(e.code, e.message, r.member_id, r.member_epoch),
    lambda shard, r, now, result: retention.note_membership(shard, r.group_id, now, result))


def remove_member(shard: GroupCoordinatorShard, group: ShareGroup, member_id: str, now: int,
                  result: Result[Any], fired: TimerKey | None = None) -> None:
    """A member leaves or is fenced (by the timer `fired`): its records go, its locks are released, the group
    epoch bumps."""
    gid = group.group_id
    writes = PartitionWrites(shard, group, result, fired)
    MEMBER_TOMBSTONES.remove(partial(shard._write, result), gid, member_id, member_id in group.target_assignment)
    writes.disarm(session_timer(gid, member_id))
    limit = shard.share_configs.delivery_count_limit(gid)
    for (t, p), sp in list(group.partitions.items()):
        released = sp.release_member(member_id, limit)
        if released is not sp:
            writes.write_partition(t, p, released)
    new_hash = shard.metadata.topics_hash(subscribed_topic_names(
        m for mid, m in group.members.items() if mid != member_id))
    shard._write(result, ShareGroupMetadata(gid, max(group.group_epoch + 1, FIRST_GROUP_EPOCH), new_hash))


# =========================================================================================================
# Target assignment (KIP-1263 batching and offload)
# =========================================================================================================
def build_spec(shard: GroupCoordinatorShard, group: ShareGroup,
               members: Mapping[str, ShareGroupMember] | None = None) -> GroupSpec:
    """The assignor's input: `members` (default: the group's), each with its current target."""
    image = shard.metadata
    specs = {
        mid: MemberSpec(
            subscribed_topic_ids=frozenset(image.by_name[n].topic_id for n in m.subscribed_topic_names
                                           if n in image.by_name),
            assigned_partitions=group.target_for(mid), rack_id=m.rack_id)
        for mid, m in (group.members if members is None else members).items()
    }
    return GroupSpec.of(specs)


def maybe_compute_target(shard: GroupCoordinatorShard, group: ShareGroup, members: Mapping[str, ShareGroupMember],
                         epoch: int, now: int, result: Result[Any]) -> Mapping[str, Partitions] | None:
    """KIP-1263 (`modern/group.py`): run the assignor for `members` at group epoch `epoch` (the group's once the
    operation's records apply) unless a run is in flight or the interval since the last computation has not
    passed; on the executor when offload is enabled (its run is a volatile effect, `RunStarted`). The target
    members written when it ran here (their target at `epoch`), else None."""
    configs: ShareConfigs = shard.share_configs
    gid = group.group_id
    if not may_compute_target(group.inflight, group.assignment_timestamp_ms or None, now,
                              configs.assignment_interval_ms(gid), shard.stats):
        return None
    spec = build_spec(shard, group, members)
    if configs.offload_enabled(gid):
        run = offload(shard._run_ids, epoch, shard.stats, assignor_name=ASSIGNOR_NAME)
        result.memory.append(RunStarted(gid, run))
        result.tasks.append(AssignorRun(gid, run.run_id, ASSIGNOR_NAME, epoch, spec, shard.metadata, None))
        return None
    shard.stats.assignor_runs_sync += 1
    try:
        assignment = SIMPLE.assign(spec, shard.metadata)
    except AssignorError:
        shard.stats.assignor_failures += 1
        return None
    return _write_target(shard, group, members, assignment, epoch, now, result)


def on_assignment_complete(shard: GroupCoordinatorShard, completion: AssignorCompletion, now: int) -> Result[None]:
    """An offloaded run ended: applied unless stale; members removed meanwhile are dropped from it (the
    changes it missed bumped the group epoch, so the next heartbeat after the interval runs again)."""
    result: Result[None] = Result(None)
    found = shard.groups.get(completion.group_id)
    group = found if isinstance(found, ShareGroup) else None
    inflight = take_completion(group, completion, shard.stats, result)
    if group is None or inflight is None or completion.assignment is None:
        return result
    kept = {m: a for m, a in completion.assignment.items() if m in group.members}
    _write_target(shard, group, group.members, kept, inflight.assignment_epoch, now, result)
    return result


def _write_target(shard: GroupCoordinatorShard, group: ShareGroup, members: Mapping[str, ShareGroupMember],
                  assignment: Any, epoch: int, now: int, result: Result[Any]) -> dict[str, Partitions]:
    """Write the target of `members` at `epoch` where it changed; returns the target members written."""
    gid = group.group_id
    written: dict[str, Partitions] = {}
    for mid in sorted(members):
        new = _normalise(assignment.get(mid, {}))
        old = group.target_assignment.get(mid)
        if old is None or _normalise(old) != new:
            shard._write(result, ShareGroupTargetAssignmentMember(gid, mid, new))
            written[mid] = new
    shard._write(result, ShareGroupTargetAssignmentMetadata(gid, epoch, now))
    return written


# =========================================================================================================
# Timers
# =========================================================================================================
def on_session_timer(shard: GroupCoordinatorShard, key: TimerKey, now: int) -> Result[None]:
    result: Result[None] = Result(None)
    group = shard.groups.get(key[1])
    if not isinstance(group, ShareGroup) or key[2] not in group.members:
        result.empty_after = _empty_now(group)
        return result
    shard.stats.members_fenced_session += 1
    result.empty_after = len(group.members) == 1  # the fenced member was the last
    remove_member(shard, group, key[2], now, result, fired=key)
    return result


def on_lock_timer(shard: GroupCoordinatorShard, key: TimerKey, now: int) -> Result[None]:
    """Acquisition locks expired: their records are available again (or archived at the delivery limit)."""
    result: Result[None] = Result(None)
    group = shard.groups.get(key[1])
    if not isinstance(group, ShareGroup):
        result.empty_after = _empty_now(group)
        return result
    tp = (key[2], int(key[3]))
    sp = group.partitions.get(tp)
    if sp is not None:
        expired = sp.expire_locks(now, shard.share_configs.delivery_count_limit(group.group_id))
        PartitionWrites(shard, group, result, fired=key).write_partition(tp[0], tp[1], expired)
    result.empty_after = _empty_now(group)
    return result


def _empty_now(group: Group | None) -> bool | None:
    """`Result.empty_after` for a timer that changed no membership: whether the group (of any type, as the timer's
    group id may have been taken since) is empty, when it tracks that."""
    return group.is_empty() if group is not None and group.tracks_empty_since else None
