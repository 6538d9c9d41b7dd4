"""A classic group's fields and the bookkeeping its state machine stands on.

Members in join order (with a count per protocol, so the vote and the compatibility check need no pass over
them), static members by instance id, the persisted fields that only `replay` sets, the protocol vote, member
validation, the responses built from the group, the timers and parked requests the transitions arm and
answer, and the private copy a pure operation runs a transition on (`copy`, `take_over`: `effects.py`). The
transitions themselves are in `group.py`; the answers to the shard's generic paths in `answers.py`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Self

from groupcoord.coordinator.core.classic.effects import Effects, join_timer, session_timer, sync_timer
from groupcoord.coordinator.core.classic.messages import (
    JoinGroupResponse,
    JoinGroupResponseMember,
    Protocols,
    SyncGroupResponse,
)
from groupcoord.coordinator.core.classic.records import (
    GROUP_TYPE,
    ClassicGroupMember,
    ClassicGroupMetadata,
    ClassicGroupState,
)
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.group import GroupDefaults
from groupcoord.coordinator.core.principals import check_member_principal


@dataclass(slots=True, eq=False)
class ClassicGroupMembership(GroupDefaults):
    """Every field of a classic group; `ClassicGroup` (`group.py`) adds only behaviour."""

    group_id: str
    state: ClassicGroupState = ClassicGroupState.DOWN
    # Persisted (set by `replay`; changed in memory only while Joining, until the next record).
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)  # in join order
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    persisted: ClassicGroupMetadata | None = None  # the last record replayed
    # Transient (timers and the rebalance in progress; see group.py's docstring).
    loaded_state: ClassicGroupState = ClassicGroupState.DOWN  # the state to enter when loading completes
    pending_members: set[str] = field(default_factory=set)  # got MEMBER_ID_REQUIRED, not yet rejoined
    awaiting_join: dict[str, int] = field(default_factory=dict)  # member id -> token of its parked JoinGroup
    awaiting_sync: dict[str, int] = field(default_factory=dict)  # member id -> token of its parked SyncGroup
    pending_sync: set[str] = field(default_factory=set)  # got this generation's JoinGroup answer, no SyncGroup
    new_members: set[str] = field(default_factory=set)  # added during the join phase in progress
    session_deadlines: dict[str, int] = field(default_factory=dict)
    join_deadline: int | None = None
    sync_deadline: int | None = None
    initial_delay: tuple[int, int] | None = None  # (delay, remaining) ms while a new group's delay runs
    new_member_added: bool = False
    _protocol_counts: Counter[str] = field(default_factory=Counter)  # protocol name -> members supporting it

    group_type = GROUP_TYPE

    def copy(self) -> Self:
        """A private copy for a pure operation to run a transition on (`effects.py`): new containers, the same
        immutable members and record; the group in the shard is left as it is."""
        return dataclasses.replace(
            self, members=dict(self.members), static_members=dict(self.static_members),
            pending_members=set(self.pending_members), awaiting_join=dict(self.awaiting_join),
            awaiting_sync=dict(self.awaiting_sync), pending_sync=set(self.pending_sync),
            new_members=set(self.new_members), session_deadlines=dict(self.session_deadlines),
            _protocol_counts=Counter(self._protocol_counts))

    def take_over(self, other: ClassicGroupMembership) -> None:
        """Become `other` (a pure operation's copy of this group, `ClassicGroupReplaced`): every field is taken
        over, so whoever holds this group sees the new state."""
        for name in _FIELD_NAMES:
            setattr(self, name, getattr(other, name))

    # --- replay: the persisted fields change only here (outside the join phase) -------------------------------
    def replay(self, r: ClassicGroupMetadata) -> None:
        self.persisted = r
        self.generation = r.generation
        self.protocol_type = r.protocol_type or None
        self.protocol_name = r.protocol_name
        self.leader_id = r.leader_id
        self.members = {}
        self.static_members = {}
        self._protocol_counts = Counter()
        for m in r.members:
            self._put(m)
        state = ClassicGroupState(r.state)
        if self.state is ClassicGroupState.INITIALIZE:
            self.loaded_state = state
        else:
            self.state = state

    def _record(self, state: ClassicGroupState, generation: int, protocol_name: str | None,
                members: Iterable[ClassicGroupMember]) -> ClassicGroupMetadata:
        return ClassicGroupMetadata(self.group_id, self.protocol_type or "", generation, protocol_name,
                                    self.leader_id, state.value, tuple(members))

    def _put(self, member: ClassicGroupMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._protocol_counts.subtract(name for name, _ in old.protocols)
        self.members[member.member_id] = member
        self._protocol_counts.update(name for name, _ in member.protocols)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def _pop(self, member_id: str) -> ClassicGroupMember:
        member = self.members.pop(member_id)
        self._protocol_counts.subtract(name for name, _ in member.protocols)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member

    # --- queries -------------------------------------------------------------------------------------------------
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return len(self.awaiting_join) == len(self.members) and not self.pending_members

    def _candidates(self, excluding: str | None) -> set[str]:
        """Protocols every member (but `excluding`) supports."""
        others = len(self.members)
        own: set[str] = set()
        member = self.members.get(excluding) if excluding is not None else None
        if member is not None:
            own = {name for name, _ in member.protocols}
            others -= 1
        return {name for name, n in self._protocol_counts.items() if n > 0 and n - (name in own) == others}

    def supports_protocols(self, protocol_type: str, protocols: Protocols, member_id: str | None = None) -> bool:
        """Can a member with these protocols be (or stay) in the group? It must speak the group's protocol type
        and share a protocol with every other member."""
        others = len(self.members) - (1 if member_id in self.members else 0)
        if others == 0:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        candidates = self._candidates(member_id)
        return any(name in candidates for name, _ in protocols)

    def select_protocol(self) -> str:
        """The seed's vote: each member votes for its most preferred protocol among those all members support;
        most votes wins, ties go to the leader's preference (deterministic, where the seed says "randomly")."""
        candidates = self._candidates(None)
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        tied = {name for name, n in votes.items() if n == best}
        leader = self.members.get(self.leader_id or "")
        for name, _ in leader.protocols if leader is not None else ():
            if name in tied:
                return name
        return min(tied)

    def validate_member(self, member_id: str, instance_id: str | None, principal: str | None = None) -> None:
        if instance_id is not None:
            holder = self.static_members.get(instance_id)
            if holder is None:
                raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID,
                                       f"Instance {instance_id} is not a member of group {self.group_id}; rejoin.")
            if holder != member_id:
                raise CoordinatorError(Errors.FENCED_INSTANCE_ID,
                                       f"Instance {instance_id} of group {self.group_id} is now held by member "
                                       f"{holder}; member {member_id} was fenced by a newer instance with the same id.")
        if member_id not in self.members:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID,
                                   f"Member {member_id} is not a member of group {self.group_id}; rejoin without a "
                                   "member id.")
        check_member_principal(self.members[member_id].principal, principal, member_id, self.group_id)

    def accepts_joining_member(self, member_id: str, max_size: int) -> bool:
        """group.max.size: existing members are accepted; new ones up to the limit (Kafka's acceptJoiningMember)."""
        if self.state is ClassicGroupState.DOWN:
            return True
        if self.state is ClassicGroupState.JOINING:
            return member_id in self.awaiting_join or len(self.awaiting_join) < max_size
        return member_id in self.members or len(self.members) < max_size

    def _join_response(self, member_id: str, skip_assignment: bool = False) -> JoinGroupResponse:
        members: tuple[JoinGroupResponseMember, ...] = ()
        if member_id == self.leader_id:
            name = self.protocol_name
            members = tuple(JoinGroupResponseMember(m.member_id, m.instance_id, m.metadata(name))
                            for m in self.members.values())
        return JoinGroupResponse(generation_id=self.generation, protocol_type=self.protocol_type,
                                 protocol_name=self.protocol_name, leader=self.leader_id or "",
                                 member_id=member_id, members=members, skip_assignment=skip_assignment)

    def _sync_response(self, member_id: str) -> SyncGroupResponse:
        return SyncGroupResponse(protocol_type=self.protocol_type, protocol_name=self.protocol_name,
                                 assignment=self.members[member_id].assignment)

    # --- timers ------------------------------------------------------------------------------------------------
    def _arm_session(self, member_id: str, deadline: int, fx: Effects) -> None:
        self.session_deadlines[member_id] = deadline
        fx.schedule(session_timer(self.group_id, member_id), deadline)

    def _disarm_session(self, member_id: str, fx: Effects) -> None:
        if self.session_deadlines.pop(member_id, None) is not None:
            fx.cancel(session_timer(self.group_id, member_id))

    def _rearm_session(self, member_id: str, fx: Effects) -> None:
        self._arm_session(member_id, fx.now + self.members[member_id].session_timeout_ms, fx)

    def _arm_join(self, deadline: int, fx: Effects) -> None:
        self.join_deadline = deadline
        fx.schedule(join_timer(self.group_id), deadline)

    def _disarm_join(self, fx: Effects) -> None:
        if self.join_deadline is not None:
            self.join_deadline = None
            fx.cancel(join_timer(self.group_id))

    def _disarm_sync(self, fx: Effects) -> None:
        if self.sync_deadline is not None:
            self.sync_deadline = None
            fx.cancel(sync_timer(self.group_id))

    # --- parking -----------------------------------------------------------------------------------------------
    def _park_join(self, member_id: str, token: int, fx: Effects) -> None:
        old = self.awaiting_join.get(member_id)
        if old is not None and old != token:
            fx.answer(old, JoinGroupResponse(Errors.REBALANCE_IN_PROGRESS,
                                             "Superseded by a newer JoinGroup of the same member.",
                                             member_id=member_id))
        self.awaiting_join[member_id] = token

    def _park_sync(self, member_id: str, token: int, fx: Effects) -> None:
        old = self.awaiting_sync.get(member_id)
        if old is not None and old != token:
            fx.answer(old, SyncGroupResponse(Errors.REBALANCE_IN_PROGRESS,
                                             "Superseded by a newer SyncGroup of the same member."))
        self.awaiting_sync[member_id] = token

    def _answer_syncs(self, fx: Effects, response: Callable[[str], SyncGroupResponse]) -> None:
        """Answer every parked SyncGroup and re-arm those members' sessions: a session that expired while the
        member was parked was ignored (it counted as alive), so it needs a new deadline now."""
        for member_id, token in self.awaiting_sync.items():
            fx.answer(token, response(member_id))
            self._rearm_session(member_id, fx)
        self.awaiting_sync.clear()

    def _synced(self, member_id: str, fx: Effects) -> None:
        self.pending_sync.discard(member_id)
        if not self.pending_sync:
            self._disarm_sync(fx)


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(ClassicGroupMembership))
