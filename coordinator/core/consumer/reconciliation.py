"""Member reconciliation: the next state of one member given its target (Kafka's CurrentAssignmentBuilder).

Rules (KIP-848, with KIP-1263's "revoke what the member no longer subscribes to"):
- A member keeps current ∩ target. What it holds outside the target (or outside its subscription) must be
  revoked first: it stays at its epoch in UNREVOKED_PARTITIONS until the client reports (owned partitions)
  that it no longer holds them. If the client sent no owned partitions we cannot know, so we wait.
- Once nothing is pending revocation it moves to the target epoch and receives the target partitions that
  no other member owns; partitions still owned elsewhere are withheld (UNRELEASED_PARTITIONS) and granted
  on a later heartbeat once released.
- Each granted partition remembers the epoch at which it was granted, so offset commits from any epoch in
  [assignment epoch of the partition, current member epoch] are accepted.
- As in Kafka's CurrentAssignmentBuilder: once a revocation is acknowledged the member moves to the next
  epoch (current + 1, never past the target) even if it must revoke more; every transition records the
  epoch it came from as the previous epoch; a member in an UNKNOWN state is fenced until it reports that
  it owns nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from groupcoord.coordinator.core.consumer.group import ConsumerGroupMember, MemberState
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.records import Partitions

# (topic id, partition) -> owning member id, or None when free
OwnerLookup = Callable[[str, int], str | None]


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Partitions,
    subscribed_topic_ids: frozenset[str] | None,
    owner_of: OwnerLookup,
    owned: Mapping[str, frozenset[int]] | None,
    subscription_changed: bool = False,
) -> ConsumerGroupMember:
    """Return the member's next state (the same object when nothing changes)."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch and not subscription_changed:
            return member
        return _compute_next(member, member.member_epoch, target_epoch, target, subscribed_topic_ids,
                             owner_of, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, member.partitions_pending_revocation):
            # Still revoking; a subscription change adds what it no longer subscribes to (as Kafka).
            if subscription_changed and subscribed_topic_ids is not None:
                return _revoke_unsubscribed(member, subscribed_topic_ids)
            return member
        # Revocation acknowledged: the partitions are released and the member moves to the next epoch
        # (never past the target: a revocation caused by a subscription change precedes the new target).
        released = dataclasses.replace(member, partitions_pending_revocation={})
        return _compute_next(released, min(member.member_epoch + 1, target_epoch), target_epoch, target,
                             subscribed_topic_ids, owner_of, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _compute_next(member, member.member_epoch, target_epoch, target, subscribed_topic_ids,
                             owner_of, owned)
    # UNKNOWN (a state from a newer coordinator): the member must first give up everything.
    if owned is None or any(owned.values()):
        raise CoordinatorError(Errors.FENCED_MEMBER_EPOCH,
                               "The member is in an unknown state; it must abandon all its partitions and rejoin.")
    return _compute_next(member, target_epoch, target_epoch, target, subscribed_topic_ids, owner_of, owned)


def _compute_next(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Partitions,
    subscribed: frozenset[str] | None,
    owner_of: OwnerLookup,
    owned: Mapping[str, frozenset[int]] | None,
) -> ConsumerGroupMember:
    current = member.assigned_partitions
    kept: dict[str, dict[int, int]] = {}
    pending_revocation: dict[str, frozenset[int]] = {}
    pending_assignment: dict[str, list[int]] = {}
    has_unreleased = False
    member_id = member.member_id
    for topic_id in set(current) | set(target):
        cur = current.get(topic_id, {})
        tgt = target.get(topic_id, frozenset())
        if subscribed is not None and topic_id not in subscribed:
            tgt = frozenset()
        keep = {p: e for p, e in cur.items() if p in tgt}
        if keep:
            kept[topic_id] = keep
        revoke = frozenset(p for p in cur if p not in tgt)
        if revoke:
            pending_revocation[topic_id] = revoke
        grant: list[int] = []
        for p in tgt:
            if p in cur:
                continue
            holder = owner_of(topic_id, p)
            if holder is None or holder == member_id:
                grant.append(p)
            else:
                has_unreleased = True
        if grant:
            pending_assignment[topic_id] = grant

    if pending_revocation and _still_owns(owned, pending_revocation):
        return dataclasses.replace(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            member_epoch=member_epoch,
            previous_member_epoch=member.member_epoch,
            assigned_partitions=kept,
            partitions_pending_revocation=pending_revocation,
        )
    for topic_id, grant in pending_assignment.items():
        topic_kept = kept.setdefault(topic_id, {})
        for p in grant:
            topic_kept[p] = target_epoch
    new_state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
    if (
        new_state is member.state
        and target_epoch == member.member_epoch
        and not member.partitions_pending_revocation
        and _same(kept, current)
    ):
        return member
    # Nothing granted or revoked (the common case: the target moved elsewhere in the group and this member
    # only follows the epoch): keep the very mappings, so the group sees its partitions did not move
    # (`ConsumerGroup._update_owners` skips them) and an epoch bump costs the same for 1 or 1,000 partitions.
    unchanged = not pending_assignment and not pending_revocation
    return dataclasses.replace(
        member,
        state=new_state,
        member_epoch=target_epoch,
        previous_member_epoch=member.member_epoch,
        assigned_partitions=current if unchanged else kept,
        partitions_pending_revocation={} if member.partitions_pending_revocation
        else member.partitions_pending_revocation,
    )


def _revoke_unsubscribed(member: ConsumerGroupMember, subscribed: frozenset[str]) -> ConsumerGroupMember:
    """Kafka's updateCurrentAssignment for a member still revoking: partitions of topics it no longer
    subscribes to join its pending revocations; its epoch and state do not change."""
    dropped = {t: ps for t, ps in member.assigned_partitions.items() if ps and t not in subscribed}
    if not dropped:
        return member
    pending = dict(member.partitions_pending_revocation)
    for t, ps in dropped.items():
        pending[t] = pending.get(t, frozenset()) | frozenset(ps)
    kept = {t: ps for t, ps in member.assigned_partitions.items() if t not in dropped}
    return dataclasses.replace(member, assigned_partitions=kept, partitions_pending_revocation=pending)


def _still_owns(owned: Mapping[str, frozenset[int]] | None, revoked: Mapping[str, frozenset[int]]) -> bool:
    if owned is None:
        return True
    return any(owned.get(t) and not owned[t].isdisjoint(ps) for t, ps in revoked.items())


def _same(a: Mapping[str, Mapping[int, int]], b: Mapping[str, Mapping[int, int]]) -> bool:
    a_nonempty = {t: set(p) for t, p in a.items() if p}
    b_nonempty = {t: set(p) for t, p in b.items() if p}
    return a_nonempty == b_nonempty
