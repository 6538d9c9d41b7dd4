"""The classic group (JoinGroup/SyncGroup) state machine: every transition of the seed's coordinator, in one file.

Around it: the records and states (`records.py`), effects and timer keys (`effects.py`), the fields and
bookkeeping the transitions use (`membership.py`), the answers to the shard's generic paths (`answers.py`),
and the request handlers that drive it (`handlers.py`).

Theory of operation
-------------------
A classic group separates membership from assignment (the seed, "client-side assignment"). The coordinator
only decides *who* is in a generation and *who leads it*; the leader computes every member's state (for
consumers, the partition assignment) and the coordinator relays it. A rebalance has two phases:

1. **Joining.** Every member sends JoinGroup with its protocols (name + opaque metadata, in preference
   order). The requests are *parked* (`Result.parked`) until every member of the previous generation has
   rejoined, or the rebalance timeout (the largest of the members' `rebalance_timeout_ms`) passes; dynamic
   members that did not rejoin by then are removed, static members are kept. Completing the phase bumps the
   *generation*, elects the leader (the previous one if it rejoined, else the first member that did), picks
   the protocol by vote among the protocols every member supports, persists the generation (a
   `ClassicGroupMetadata` record in state AwaitingSync, as the seed's step 2) and answers every parked
   JoinGroup. Only the leader's response carries the members' metadata.
2. **AwaitingSync.** Every member sends SyncGroup. Followers' requests park until the leader's arrives with
   the assignment; the assignment is persisted (the same record, in state Stable) and every parked SyncGroup
   is answered with that member's bytes. A SyncGroup arriving later, in Stable, is answered at once.

Failures all lead back to Joining ("the generation becomes invalid and the members rejoin"): a member whose
session times out (its heartbeats stop; members parked in JoinGroup/SyncGroup count as alive, except new
members), a leader that reports an error in SyncGroup (`SyncGroupRequest.error_code`, propagated to the
parked followers), members that never send SyncGroup within the rebalance timeout, a member that leaves, and
any JoinGroup while AwaitingSync (the seed: "it must abort any active synchronization and force all members
to rejoin"; Kafka instead answers an unchanged member with the current generation). In Stable, a JoinGroup
from the leader or with changed metadata starts a rebalance; an unchanged follower gets the current
generation back. (The seed lets a leader push a new assignment with SyncGroup in Stable when topic metadata
changes; as in Kafka, the leader rejoins instead, and a SyncGroup in Stable just returns the assignment.)
`group.max.size` caps the members; a new member beyond it gets GROUP_MAX_SIZE_REACHED. Heartbeats re-arm
the session timer and answer ILLEGAL_GENERATION for another generation, and REBALANCE_IN_PROGRESS while
Joining (the signal to rejoin) or AwaitingSync (the seed; Kafka's coordinator answers NONE there, and a
client already holding its JoinGroup answer ignores the error, as Kafka's does, and goes on to SyncGroup).

A first JoinGroup without a member id gets MEMBER_ID_REQUIRED and a generated id (KIP-394); the member is
*pending* (it blocks the join phase) until it rejoins with that id or its session expires. A static member
(KIP-345, `instance_id`) skips that step, survives a join phase it misses, and coming back under a new
member id in Stable with unchanged protocols takes over its old id's place and assignment without a
rebalance (the old id is fenced: FENCED_INSTANCE_ID). A new group waits `group.initial.rebalance.delay.ms`
(extended while members keep arriving, up to the rebalance timeout) before its first join phase completes.

States, and what they are in Kafka's terms (exposed in DescribeGroups, ListGroups and the
`group_coordinator_groups{type="classic"}` metric)::

    seed / groupcoord   Kafka                 meaning here
    -----------------   -------------------   ----------------------------------------------------------
    Down                Empty                 no members; only the last generation number (and committed
                                              offsets) remain. A deleted group is removed outright, so
                                              Kafka's Dead is never visible.
    Initialize          (loading)             the group's records are being replayed after a failover;
                                              every request gets COORDINATOR_LOAD_IN_PROGRESS (14).
    Joining             PreparingRebalance    collecting JoinGroups for the next generation.
    AwaitingSync        CompletingRebalance   generation complete, waiting for the leader's SyncGroup.
    Stable              Stable                the leader's state is known; members heartbeat.

The seed also calls a memberless group waiting for its first JoinGroup "Stable"; groupcoord calls that Down,
as Kafka's Empty, so an operator can tell an idle group from a working one.

What is persisted, and what is not: the records hold what Kafka's GroupMetadataValue holds (generation,
protocol type and name, leader, members with their metadata and assignment) plus the phase they were written
in (Down, AwaitingSync or Stable). They are written when a join phase completes, when the leader's
assignment arrives, and when a static member replaces its old id; replaying them rebuilds those fields, and
nothing else changes them in AwaitingSync, Stable or Down. The Joining phase itself (who has rejoined,
pending member ids, parked requests) and the timers are transient, as in the seed: after a failover the
group comes back in its last persisted phase and members that were rejoining simply rejoin. Every member's
full protocol list is persisted, not only the chosen protocol's metadata (Kafka's choice), so a replayed
group votes exactly as the live one did.

Timers are data, armed through `Effects` like every group type's (the shard's `arm_timer`, whose one stale
check drops a timer that fires after it was re-armed or cancelled): "classic-session" per member,
"classic-join" and "classic-sync" per group. Each carries its deadline in the group too, checked again when it
fires.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from groupcoord.coordinator.core.classic.answers import ClassicGroupAnswers
from groupcoord.coordinator.core.classic.effects import Effects, sync_timer
from groupcoord.coordinator.core.classic.messages import (
    JoinGroupResponse,
    MemberIdentity,
    MemberResponse,
    Protocols,
    SyncGroupRequest,
    SyncGroupResponse,
)
from groupcoord.coordinator.core.classic.records import ClassicGroupMember, ClassicGroupState
from groupcoord.coordinator.core.errors import CoordinatorError, Errors

# Kafka's group.classic.new.member.join.timeout: a new member parked in JoinGroup cannot heartbeat, so a
# client that gave up is only noticed when this runs out.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


class ClassicGroup(ClassicGroupAnswers):
    """A classic group: the transitions of the machine above, over its fields and bookkeeping
    (`ClassicGroupMembership`) and its answers to the shard's generic paths (`ClassicGroupAnswers`)."""

    __slots__ = ()

    # --- JoinGroup ---------------------------------------------------------------------------------------------
    def require_member_id(self, member_id: str, session_timeout_ms: int, fx: Effects) -> None:
        """KIP-394: a new dynamic member gets its id back with MEMBER_ID_REQUIRED and is pending until it rejoins
        with it (or its session expires); pending members hold up the join phase."""
        self.pending_members.add(member_id)
        self._arm_session(member_id, fx.now + session_timeout_ms, fx)

    def add_member(self, member: ClassicGroupMember, protocol_type: str, token: int, fx: Effects) -> None:
        if self.state is ClassicGroupState.JOINING and self.initial_delay is not None:
            self.new_member_added = True
        if not self.members:
            self.protocol_type = protocol_type
        self.pending_members.discard(member.member_id)
        self._put(member)
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.new_members.add(member.member_id)
        self._park_join(member.member_id, token, fx)
        self._arm_session(member.member_id, fx.now + NEW_MEMBER_JOIN_TIMEOUT_MS, fx)
        self._maybe_prepare_rebalance_or_complete_join(fx)

    def rejoin(self, member_id: str, protocol_type: str, protocols: Protocols, rebalance_timeout_ms: int,
               session_timeout_ms: int, token: int, fx: Effects) -> JoinGroupResponse | None:
        """An existing member's JoinGroup: the response now, or None when it is parked."""
        member = self.members[member_id]
        changed = member.protocols != protocols
        if self.state is ClassicGroupState.STABLE and member_id != self.leader_id and not changed:
            return self._join_response(member_id)  # an unchanged follower: the current generation, no rebalance
        if len(self.members) == 1:
            self.protocol_type = protocol_type
        self._put(dataclasses.replace(member, protocols=protocols, rebalance_timeout_ms=rebalance_timeout_ms,
                                      session_timeout_ms=session_timeout_ms))
        self._park_join(member_id, token, fx)
        if self.state is ClassicGroupState.JOINING:
            self._maybe_complete_join(fx)
        else:  # AwaitingSync (the seed: any JoinGroup aborts the synchronization), or Stable leader/changed
            self._prepare_rebalance(fx)
        return None

    def replace_static_member(self, instance_id: str, new_member_id: str, protocol_type: str, protocols: Protocols,
                              rebalance_timeout_ms: int, session_timeout_ms: int, client_host: str, token: int,
                              fx: Effects) -> JoinGroupResponse | None:
        """KIP-345: a static member restarted (new member id, same instance id). The old id is fenced; in Stable
        with an unchanged protocol choice it takes over the old id's place and assignment without a rebalance."""
        old_id = self.static_members[instance_id]
        old = self.members[old_id]
        fenced = f"Instance {instance_id} rejoined as member {new_member_id}; member {old_id} is fenced."
        if old_id in self.awaiting_join:
            fx.answer(self.awaiting_join.pop(old_id), JoinGroupResponse(Errors.FENCED_INSTANCE_ID, fenced,
                                                                        member_id=old_id))
        if old_id in self.awaiting_sync:
            fx.answer(self.awaiting_sync.pop(old_id), SyncGroupResponse(Errors.FENCED_INSTANCE_ID, fenced))
        new = dataclasses.replace(old, member_id=new_member_id, protocols=protocols, client_host=client_host,
                                  rebalance_timeout_ms=rebalance_timeout_ms, session_timeout_ms=session_timeout_ms)
        order = list(self.members)
        self._pop(old_id)
        self._put(new)
        self.members = {(new_member_id if k == old_id else k): self.members[new_member_id if k == old_id else k]
                        for k in order}
        if self.leader_id == old_id:
            self.leader_id = new_member_id
        for ids in (self.pending_sync, self.new_members):
            if old_id in ids:
                ids.discard(old_id)
                ids.add(new_member_id)
        if len(self.members) == 1:
            self.protocol_type = protocol_type
        self._disarm_session(old_id, fx)
        self._arm_session(new_member_id, fx.now + session_timeout_ms, fx)
        if self.state is ClassicGroupState.STABLE and self.select_protocol() == self.protocol_name:
            fx.write(self._record(ClassicGroupState.STABLE, self.generation, self.protocol_name,
                                  self.members.values()))
            return self._join_response(new_member_id, skip_assignment=new_member_id == self.leader_id)
        self._park_join(new_member_id, token, fx)
        if self.state is ClassicGroupState.JOINING:
            self._maybe_complete_join(fx)
        else:  # AwaitingSync: the leader may be assigning to the old id; Stable: the protocol choice changes
            self._prepare_rebalance(fx)
        return None

    # --- SyncGroup ---------------------------------------------------------------------------------------------
    def sync(self, request: SyncGroupRequest, token: int, fx: Effects) -> SyncGroupResponse | None:
        """A validated member's SyncGroup: the response now, or None when it is parked."""
        member_id = request.member_id
        if self.state is ClassicGroupState.JOINING:
            return SyncGroupResponse(Errors.REBALANCE_IN_PROGRESS,
                                     f"Group {self.group_id} is rebalancing; rejoin.")
        if self.state is ClassicGroupState.STABLE:
            self._synced(member_id, fx)
            return self._sync_response(member_id)
        if self.state is not ClassicGroupState.AWAITING_SYNC:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Group {self.group_id} has no members; rejoin.")
        self._park_sync(member_id, token, fx)
        self._synced(member_id, fx)
        if member_id != self.leader_id:
            return None
        if request.error_code is not Errors.NONE:
            # The seed: the leader's error invalidates the generation and goes to everyone waiting.
            error = request.error_code
            message = (f"The leader {member_id} of group {self.group_id} could not compute the assignment for "
                       f"generation {self.generation} ({error.name}); rejoin.")
            self._answer_syncs(fx, lambda _: SyncGroupResponse(error, message))
            self._prepare_rebalance(fx)
            return None
        assigned = [dataclasses.replace(m, assignment=request.assignments.get(mid, b""))
                    for mid, m in self.members.items()]
        fx.write(self._record(ClassicGroupState.STABLE, self.generation, self.protocol_name, assigned))
        self._answer_syncs(fx, self._sync_response)
        return None

    # --- Heartbeat and LeaveGroup ------------------------------------------------------------------------------
    def heartbeat(self, member_id: str, now: int) -> tuple[Errors, int]:
        """A validated member's heartbeat: the answer and the member's new session deadline (changes nothing: the
        handler arms the session timer and returns the deadline)."""
        deadline = now + self.members[member_id].session_timeout_ms
        if self.state in (ClassicGroupState.JOINING, ClassicGroupState.AWAITING_SYNC):
            return Errors.REBALANCE_IN_PROGRESS, deadline
        return Errors.NONE, deadline

    def leave(self, identities: Iterable[MemberIdentity], fx: Effects,
              principal: str | None = None) -> tuple[MemberResponse, ...]:
        """Batched LeaveGroup (KIP-345): each identity by member id, or by instance id alone (administrative)."""
        responses: list[MemberResponse] = []
        left = False
        for ident in identities:
            reason = f"left the group ({ident.reason or 'no reason given'})"
            if not ident.member_id:
                holder = self.static_members.get(ident.instance_id) if ident.instance_id is not None else None
                if holder is not None and principal is not None \
                        and self.members[holder].principal not in (None, principal):
                    holder = None  # another principal's member: as if unknown (core/principals.py)
                if holder is None:
                    responses.append(MemberResponse(
                        ident.member_id, ident.instance_id, Errors.UNKNOWN_MEMBER_ID,
                        f"Instance {ident.instance_id} is not a member of group {self.group_id}."))
                    continue
                self._remove(holder, fx, Errors.UNKNOWN_MEMBER_ID, reason)
            elif ident.member_id in self.pending_members:
                self.pending_members.discard(ident.member_id)
                self._disarm_session(ident.member_id, fx)
            else:
                try:
                    self.validate_member(ident.member_id, ident.instance_id, principal)
                except CoordinatorError as e:
                    responses.append(MemberResponse(ident.member_id, ident.instance_id, e.code, e.message))
                    continue
                self._remove(ident.member_id, fx, Errors.UNKNOWN_MEMBER_ID, reason)
            left = True
            responses.append(MemberResponse(ident.member_id, ident.instance_id))
        if left:
            self._after_removal(fx)
        return tuple(responses)

    # --- transitions -------------------------------------------------------------------------------------------
    def _maybe_prepare_rebalance_or_complete_join(self, fx: Effects) -> None:
        if self.state in (ClassicGroupState.STABLE, ClassicGroupState.AWAITING_SYNC, ClassicGroupState.DOWN):
            self._prepare_rebalance(fx)
        else:
            self._maybe_complete_join(fx)

    def _prepare_rebalance(self, fx: Effects) -> None:
        """Stable/AwaitingSync/Down -> Joining. Parked SyncGroups are told to rejoin."""
        if self.state is ClassicGroupState.AWAITING_SYNC:
            message = f"Group {self.group_id} is rebalancing again; rejoin."
            self._answer_syncs(fx, lambda _: SyncGroupResponse(Errors.REBALANCE_IN_PROGRESS, message))
        self.pending_sync.clear()
        self._disarm_sync(fx)
        initial = self.state is ClassicGroupState.DOWN and fx.initial_rebalance_delay_ms > 0
        self.state = ClassicGroupState.JOINING
        if initial:
            delay = fx.initial_rebalance_delay_ms
            self.initial_delay = (delay, max(self.rebalance_timeout_ms() - delay, 0))
            self.new_member_added = False
            self._arm_join(fx.now + delay, fx)
        elif self.has_all_members_joined():
            self._complete_join(fx)
        else:
            self._arm_join(fx.now + self.rebalance_timeout_ms(), fx)

    def _maybe_complete_join(self, fx: Effects) -> None:
        if self.state is ClassicGroupState.JOINING and self.initial_delay is None and self.has_all_members_joined():
            self._complete_join(fx)

    def _complete_join(self, fx: Effects) -> None:
        """Joining -> AwaitingSync (or Down): the next generation, its leader and protocol, persisted."""
        self._disarm_join(fx)
        self.initial_delay = None
        self.new_member_added = False
        for member_id, member in list(self.members.items()):
            if member_id not in self.awaiting_join and member.instance_id is None:
                self._remove(member_id, fx, Errors.UNKNOWN_MEMBER_ID, "did not rejoin within the rebalance timeout")
        if self.members and not self._elect_joined_leader():
            # Only static members are left and none rejoined: wait for them, or for their sessions to expire.
            self._arm_join(fx.now + self.rebalance_timeout_ms(), fx)
            return
        generation = self.generation + 1
        if not self.members:
            fx.write(self._record(ClassicGroupState.DOWN, generation, None, ()))
            return
        protocol = self.select_protocol()
        fx.write(self._record(ClassicGroupState.AWAITING_SYNC, generation, protocol,
                              (dataclasses.replace(m, assignment=b"") for m in self.members.values())))
        for member_id in self.members:
            token = self.awaiting_join.pop(member_id, None)
            if token is not None:
                fx.answer(token, self._join_response(member_id))
            self._rearm_session(member_id, fx)
            self.pending_sync.add(member_id)
        self.new_members.clear()
        self.sync_deadline = fx.now + self.rebalance_timeout_ms()
        fx.schedule(sync_timer(self.group_id), self.sync_deadline)

    def _elect_joined_leader(self) -> bool:
        if self.leader_id in self.awaiting_join:
            return True
        for member_id in self.members:
            if member_id in self.awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def _remove(self, member_id: str, fx: Effects, code: Errors, reason: str) -> None:
        """Take a member out, answering its parked requests (Kafka answers UNKNOWN_MEMBER_ID so a live client
        rejoins). The leader passes to the next member; the join phase re-elects among those who rejoined."""
        message = f"Member {member_id} of group {self.group_id} was removed: {reason}."
        token = self.awaiting_join.pop(member_id, None)
        if token is not None:
            fx.answer(token, JoinGroupResponse(code, message))
        token = self.awaiting_sync.pop(member_id, None)
        if token is not None:
            fx.answer(token, SyncGroupResponse(code, message))
        self._pop(member_id)
        self.pending_sync.discard(member_id)
        self.new_members.discard(member_id)
        self._disarm_session(member_id, fx)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def _after_removal(self, fx: Effects) -> None:
        if self.state in (ClassicGroupState.STABLE, ClassicGroupState.AWAITING_SYNC):
            self._prepare_rebalance(fx)
        else:
            self._maybe_complete_join(fx)

    def remove_member(self, member_id: str, fx: Effects, reason: str) -> None:
        self._remove(member_id, fx, Errors.UNKNOWN_MEMBER_ID, reason)
        self._after_removal(fx)

    # --- fired timers ------------------------------------------------------------------------------------------
    def on_session_timeout(self, member_id: str, fx: Effects) -> None:
        deadline = self.session_deadlines.get(member_id)
        if deadline is None or fx.now < deadline:
            return  # re-armed or cancelled after the runtime queued it
        del self.session_deadlines[member_id]
        if member_id in self.pending_members:
            self.pending_members.discard(member_id)
            self._maybe_complete_join(fx)
            return
        if member_id not in self.members:
            return
        parked = member_id in self.awaiting_join or member_id in self.awaiting_sync
        if parked and member_id not in self.new_members:
            return  # a member parked in JoinGroup/SyncGroup cannot heartbeat: it counts as alive
        self.remove_member(member_id, fx, "its session timed out")

    def on_join_timeout(self, fx: Effects) -> None:
        if self.state is not ClassicGroupState.JOINING or self.join_deadline is None or fx.now < self.join_deadline:
            return
        self.join_deadline = None
        if self.initial_delay is not None:
            delay, remaining = self.initial_delay
            if self.new_member_added and remaining > 0:
                # More members arrived during the delay: wait again, within the rebalance timeout.
                self.new_member_added = False
                next_delay = min(fx.initial_rebalance_delay_ms, remaining)
                self.initial_delay = (next_delay, max(remaining - delay, 0))
                self._arm_join(fx.now + next_delay, fx)
                return
        self._complete_join(fx)

    def on_sync_timeout(self, fx: Effects) -> None:
        if self.sync_deadline is None or fx.now < self.sync_deadline:
            return
        self.sync_deadline = None
        if self.state not in (ClassicGroupState.AWAITING_SYNC, ClassicGroupState.STABLE) or not self.pending_sync:
            return
        for member_id in [m for m in self.members if m in self.pending_sync]:
            self._remove(member_id, fx, Errors.UNKNOWN_MEMBER_ID, "no SyncGroup within the rebalance timeout")
        self._prepare_rebalance(fx)
