"""Building the assignor's input from a group, and turning the assignor's output into records.

KIP-1263 changes *when* this runs (batching, offload); this module is only *what* runs: snapshot the group
into an immutable `GroupSpec`, call the assignor, diff the result against the current target.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from groupcoord.assignors.api import GroupAssignment, GroupSpec, MemberSpec, SubscriptionType
from groupcoord.assignors.compact import CompactAssignment
from groupcoord.coordinator.core.consumer.effects import SpecTaken
from groupcoord.coordinator.core.consumer.group import ConsumerGroup, ConsumerGroupMember, count_into
from groupcoord.coordinator.core.consumer.spec_members import Row, RowEvent, SpecLineage, SpecMembers
from groupcoord.coordinator.core.consumer.target_delta import TargetDelta
from groupcoord.coordinator.core.consumer.target_store import MAX_LINEAGE_EVENTS, SERIALS, TargetAssignment
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.core.records import (
    ConsumerGroupTargetAssignmentMember,
    ConsumerGroupTargetAssignmentMetadata,
    Partitions,
)

if TYPE_CHECKING:
    from groupcoord.coordinator.core.consumer.staged import Staged


def choose_assignor(assignor_counts: Mapping[str, int], configured: list[str]) -> str:
    """The assignor most members ask for (ties: the earlier in `group.consumer.assignors`), else the default
    (`assignor_counts`: the group's, or as an operation's records leave them, `Staged.counts`)."""
    votes = {name: n for name, n in assignor_counts.items() if name}
    if not votes:
        return configured[0]
    best = max(votes.values())
    for name in configured:
        if votes.get(name) == best:
            return name
    return min(n for n, c in votes.items() if c == best)


def subscribed_topic_ids(
    member: ConsumerGroupMember, image: MetadataImage, resolve_regex: Callable[[str], frozenset[str]]
) -> frozenset[str]:
    """Topic ids the member subscribes to, by name or by regex, among topics that exist now."""
    ids = {image.by_name[n].topic_id for n in member.subscribed_topic_names if n in image.by_name}
    if member.subscribed_topic_regex:
        ids.update(image.by_name[n].topic_id for n in resolve_regex(member.subscribed_topic_regex)
                   if n in image.by_name)
    return frozenset(ids)


def build_spec(
    group: ConsumerGroup, image: MetadataImage, resolve_regex: Callable[[str], frozenset[str]]
) -> GroupSpec:
    """`snapshot_spec` of the group as it is, keeping its rows at once (for callers outside an operation)."""
    spec, taken, _ = snapshot_spec(group, image, resolve_regex)
    if taken is not None:
        group.spec_rows, group.spec_subscriptions = taken.rows, taken.subscriptions
        group.spec_image, group.spec_serial, group.spec_dirty = taken.image, taken.serial, {}
    return spec


def snapshot_spec(
    group: ConsumerGroup, image: MetadataImage, resolve_regex: Callable[[str], frozenset[str]],
    staged: Staged | None = None,
) -> tuple[GroupSpec, SpecTaken | None, TargetAssignment]:
    """Snapshot the group for the assignor (as `staged` leaves it, when given). Runs on the event loop for every
    assignor run, so the members go in as rows (`SpecMembers`) over the store's owner-array snapshot: no
    `MemberSpec` and no per-partition work here, and only the rows of members changed since the last snapshot
    are recomputed (all of them when the metadata image or a regex resolution changed). Changes nothing: also
    returns the rows the group keeps from now on (`SpecTaken`, applied with the operation; None when the spec
    is not made of rows) and the target store the spec was taken from."""
    store = staged.target_store() if staged is not None else group.target_assignment
    target_epoch = staged.target_assignment_epoch if staged is not None else group.target_assignment_epoch
    member = staged.member if staged is not None else group.members.get
    current = store.snapshot() if target_epoch else None
    if current is None and target_epoch and len(store):
        members = staged.post_members() if staged is not None else group.members
        return _spec_from_store(group, members, store, image, resolve_regex), None, store  # overlapping claims
    dirty_kept = group.spec_dirty
    rebuilt = dirty_kept is None or group.spec_image is not image or (staged is not None and staged.spec_reset)
    if rebuilt:
        rows: dict[str, Row] = {}
        subs: dict[frozenset[str], int] = {}
        dirty = dict.fromkeys(staged.post_members() if staged is not None else group.members, True)
    else:
        assert dirty_kept is not None
        rows, subs, dirty = group.spec_rows.copy(), dict(group.spec_subscriptions), dict(dirty_kept)
        if staged is not None:
            staged.mark_dirty(dirty)
    rebuilt = rebuilt or len(dirty) > MAX_LINEAGE_EVENTS  # too many changes to send: the next send is whole
    events: list[RowEvent] = []
    for mid, readded in dirty.items():
        old = rows.pop(mid, None) if readded else rows.get(mid)  # a re-added row goes last, as in `members`
        if old is not None:
            count_into(subs, old[0], -1)
        m = member(mid)
        row: Row | None = None
        if m is not None:
            row = (cached_subscribed_topic_ids(group, m, image, resolve_regex), m.rack_id, m.instance_id)
            rows[mid] = row
            count_into(subs, row[0], 1)
        if not rebuilt:
            events.append((mid, readded, row))
    lineage = SpecLineage(None if rebuilt else group.spec_serial, next(SERIALS), tuple(events),
                          store.lineage if current is not None else None)
    distinct = list(subs)  # equal sets reached by names and by regex are one key
    kind = SubscriptionType.HOMOGENEOUS if len(distinct) <= 1 else SubscriptionType.HETEROGENEOUS
    # `copy()`, not `dict(rows)`: once the group has removed a row, `dict()` re-inserts every entry (0.36 ms for
    # 10,000 rows) where `copy()` clones the table (0.05 ms)
    spec = GroupSpec(members=SpecMembers(rows.copy(), distinct, current, lineage), subscription_type=kind,
                     current=current)
    return spec, SpecTaken(group.group_id, rows, subs, image, lineage.rows_serial), store


def _spec_from_store(group: ConsumerGroup, members: Mapping[str, ConsumerGroupMember], store: TargetAssignment,
                     image: MetadataImage, resolve_regex: Callable[[str], frozenset[str]]) -> GroupSpec:
    """The spec with each member's target read from the store (when no owner array can say it)."""
    return GroupSpec.of({
        mid: MemberSpec(subscribed_topic_ids=cached_subscribed_topic_ids(group, m, image, resolve_regex),
                        assigned_partitions=store.get(mid, _EMPTY), rack_id=m.rack_id,
                        instance_id=m.instance_id)
        for mid, m in members.items()})


def cached_subscribed_topic_ids(group: ConsumerGroup, m: ConsumerGroupMember, image: MetadataImage,
                  resolve_regex: Callable[[str], frozenset[str]]) -> frozenset[str]:
    """`subscribed_topic_ids`, shared by members that subscribe alike (one set per image and subscription)."""
    seen, ids = group.subscription_cache
    if seen is not image or len(ids) > 4096:
        ids = {}
        group.subscription_cache = (image, ids)
    regex = m.subscribed_topic_regex
    key = (m.subscribed_topic_names, regex, resolve_regex(regex) if regex else None)
    out = ids.get(key)
    if out is None:
        out = ids[key] = subscribed_topic_ids(m, image, resolve_regex)
    return out


_EMPTY: Partitions = {}


def reconcile_result_with_group(
    group: ConsumerGroup, result: GroupAssignment, instance_ids: Mapping[str, str]
) -> Mapping[str, Partitions]:
    """Apply what changed while an offloaded run was in flight (KIP-1263): members removed since then lose
    their assignment; a static member replaced since then has its assignment moved to the new member id.
    Nobody removed: the result as it is (a compact one keeps what it knows about who changed). The result
    names the members of the run's spec, so when the group tracked its removals since the run started those
    are the only ids to look at; else every id in the result is."""
    members = group.members
    removed = group.removed_since_run
    gone = [m for m in (result if removed is None else removed) if m not in members and m in result]
    if not gone:
        return result
    if isinstance(result, TargetDelta):
        moved = {}
        for member_id in gone:
            instance_id = instance_ids.get(member_id)
            new_id = group.static_members.get(instance_id) if instance_id is not None else None
            if new_id is not None and new_id not in result:
                moved[new_id] = member_id
        return result.reconciled(members, moved)
    out: dict[str, Partitions] = {}
    for member_id, assignment in result.items():
        if member_id in group.members:
            out[member_id] = assignment
            continue
        instance_id = instance_ids.get(member_id)
        if instance_id is not None:
            new_id = group.static_members.get(instance_id)
            if new_id is not None and new_id not in result:
                out[new_id] = assignment
    return out


class TargetView(Protocol):
    """What `target_records` reads of a group: a `ConsumerGroup`, or `TargetBase` for one an operation's records
    are changing."""

    @property
    def group_id(self) -> str: ...

    @property
    def members(self) -> Mapping[str, ConsumerGroupMember]: ...

    @property
    def target_assignment(self) -> TargetAssignment: ...

    @property
    def added_since_run(self) -> Mapping[str, None] | None: ...


@dataclass(frozen=True, slots=True)
class TargetBase:
    """A group as an operation's records leave it, for `target_records`."""

    group_id: str
    members: Mapping[str, ConsumerGroupMember]
    target_assignment: TargetAssignment
    added_since_run: Mapping[str, None] | None


def target_records(
    group: TargetView, new_target: Mapping[str, Partitions], assignment_epoch: int, finished_at_ms: int
) -> list[object]:
    """Records for the members whose target changed, then the metadata with epoch and finish time. A compact
    result computed from the current target says which members changed: only those are looked at."""
    records: list[object] = []
    store = group.target_assignment
    for member_id in _candidates(group, new_target):
        raw_new = new_target.get(member_id, _EMPTY)
        raw_old = store.get(member_id)
        if raw_old is not None and (raw_new is raw_old or raw_new == raw_old):
            continue  # fast path: assignors hand back unchanged members' partitions as they were given
        new = _normalise(raw_new)
        if raw_old is None or new != _normalise(raw_old):
            records.append(ConsumerGroupTargetAssignmentMember(group.group_id, member_id, new))
    records.append(ConsumerGroupTargetAssignmentMetadata(group.group_id, assignment_epoch, finished_at_ms))
    return records


def _candidates(group: TargetView, new_target: Mapping[str, Partitions]) -> Iterable[str]:
    """Members whose target may differ: all, unless the result knows what changed since a snapshot of the
    target that every member still in it holds (only removals since). Then: the changed members, those
    without a target yet and those the result lacks."""
    if not (isinstance(new_target, (CompactAssignment, TargetDelta)) and new_target.changed is not None
            and new_target.previous is not None and group.target_assignment.holds_since(new_target.previous)):
        return group.members
    if isinstance(new_target, TargetDelta) and group.added_since_run is not None:
        # A delta lists every member of its run that had no target; members added since the run started are
        # the rest that may lack one. No pass over the group.
        chosen = [m for m in new_target.changed if m in group.members]
        seen = set(chosen)
        chosen += [m for m in group.added_since_run if m in group.members and m not in seen]
        return chosen
    members = group.members.keys()
    found = {m for m in new_target.changed if m in group.members}
    found.update(members - group.target_assignment.keys(), members - new_target.keys())
    return sorted(found)


def _normalise(p: Partitions) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in p.items() if ps}
