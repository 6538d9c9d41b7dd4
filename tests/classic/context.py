"""A scenario driver for the classic protocol in the sans-I/O core, with a virtual clock.

It plays the runtime's part: every JoinGroup/SyncGroup gets a token; a parked request's answer arrives in
some later operation's `completions` and is kept in `answers`. Timers are kept and fired in deadline order as
the clock advances. Every record is kept, so a test can replay them into a fresh shard and compare.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from groupcoord.coordinator.core.classic.group import ClassicGroup
from groupcoord.coordinator.core.classic.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    Protocols,
    SyncGroupRequest,
    SyncGroupResponse,
)
from groupcoord.coordinator.core.classic.records import ClassicGroupState
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.results import Result, TimerKey
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.core.snapshot import snapshot_records, timers_after_load
from tests.core.context import START_MS, image_of
from tests.virtual_clock import VirtualClock

SESSION_MS = 10_000
REBALANCE_MS = 30_000
PROTOCOLS: Protocols = (("range", b"sub"),)

CLASSIC_CONFIG: dict[str, Any] = {
    "group.min.session.timeout.ms": 100,
    "group.max.session.timeout.ms": 60_000,
    "group.initial.rebalance.delay.ms": 100,
}
INITIAL_DELAY_MS = 100


@dataclass(frozen=True, slots=True)
class Call:
    """A JoinGroup or SyncGroup sent; its answer may come later."""

    token: int


class ClassicContext(VirtualClock):
    def __init__(self, **config: Any) -> None:
        raw = dict(CLASSIC_CONFIG)
        raw.update({k.replace("_", "."): v for k, v in config.items()})
        self.config = BrokerConfig.from_mapping(raw)
        self.image = image_of({"foo": 6})
        ids = itertools.count(1)
        self.shard = GroupCoordinatorShard(self.config, lambda: f"m{next(ids)}", self.image)
        self.now = START_MS
        self.timers: dict[TimerKey, int] = {}
        self.records: list[Any] = []
        self.answers: dict[int, Any] = {}
        self._tokens = itertools.count(1)

    # --- plumbing ----------------------------------------------------------------------------------------
    def apply(self, result: Result[Any], token: int | None = None) -> Any:
        self.record(result)
        if token is not None and not result.parked:
            self._answer(token, result.response)
        for done, response in result.completions:
            self._answer(done, response)
        return result.response

    def _answer(self, token: int, response: Any) -> None:
        assert token not in self.answers, f"request {token} answered twice"
        self.answers[token] = response

    def answer(self, call: Call) -> Any:
        """The response to `call`, or None while it is parked."""
        return self.answers.get(call.token)

    def join_answer(self, call: Call) -> JoinGroupResponse:
        response = self.answers[call.token]
        assert isinstance(response, JoinGroupResponse)
        return response

    def sync_answer(self, call: Call) -> SyncGroupResponse:
        response = self.answers[call.token]
        assert isinstance(response, SyncGroupResponse)
        return response

    # --- requests ----------------------------------------------------------------------------------------
    def join(self, member_id: str = "", group_id: str = "grp", *, protocols: Protocols = PROTOCOLS,
             protocol_type: str = "consumer", session_timeout_ms: int = SESSION_MS,
             rebalance_timeout_ms: int = REBALANCE_MS, instance_id: str | None = None) -> Call:
        call = Call(next(self._tokens))
        request = JoinGroupRequest(group_id, member_id, protocol_type, protocols, session_timeout_ms,
                                   rebalance_timeout_ms, instance_id)
        self.apply(self.shard.classic_group_join(request, self.now, call.token), call.token)
        return call

    def join_new(self, group_id: str = "grp", **fields: Any) -> tuple[str, Call]:
        """A new dynamic member: MEMBER_ID_REQUIRED first, then the JoinGroup with its id."""
        first = self.join("", group_id, **fields)
        response = self.join_answer(first)
        assert response.error_code is Errors.MEMBER_ID_REQUIRED, response
        return response.member_id, self.join(response.member_id, group_id, **fields)

    def sync(self, member_id: str, generation: int, group_id: str = "grp", *,
             assignments: Mapping[str, bytes] | None = None, instance_id: str | None = None,
             error_code: Errors = Errors.NONE, protocol_name: str | None = None) -> Call:
        call = Call(next(self._tokens))
        request = SyncGroupRequest(group_id, generation, member_id, instance_id, protocol_name=protocol_name,
                                   assignments=dict(assignments or {}), error_code=error_code)
        self.apply(self.shard.classic_group_sync(request, self.now, call.token), call.token)
        return call

    def heartbeat(self, member_id: str, generation: int, group_id: str = "grp",
                  instance_id: str | None = None) -> HeartbeatResponse:
        response = self.apply(self.shard.classic_group_heartbeat(
            HeartbeatRequest(group_id, generation, member_id, instance_id), self.now))
        assert isinstance(response, HeartbeatResponse)
        return response

    def leave(self, *members: MemberIdentity | str, group_id: str = "grp") -> LeaveGroupResponse:
        identities = tuple(m if isinstance(m, MemberIdentity) else MemberIdentity(m) for m in members)
        response = self.apply(self.shard.classic_group_leave(LeaveGroupRequest(group_id, identities), self.now))
        assert isinstance(response, LeaveGroupResponse)
        return response

    # --- scenarios -----------------------------------------------------------------------------------------
    def group(self, group_id: str = "grp") -> ClassicGroup:
        group = self.shard.groups[group_id]
        assert isinstance(group, ClassicGroup)
        return group

    def state(self, group_id: str = "grp") -> ClassicGroupState:
        return self.group(group_id).state

    def stable_group(self, n: int, group_id: str = "grp", **fields: Any) -> list[str]:
        """`n` new members of a new group, joined within the initial rebalance delay, one completed rebalance:
        the group is Stable; returns the member ids in join order (the first is the leader)."""
        calls = [self.join_new(group_id, **fields) for _ in range(n)]
        while any(self.answer(call) is None for _, call in calls):  # the delay extends while members arrive
            self.advance(INITIAL_DELAY_MS)
        ids = [mid for mid, _ in calls]
        generations = {self.join_answer(call).generation_id for _, call in calls}
        assert len(generations) == 1, generations
        self.complete_sync(ids, generations.pop(), group_id)
        return ids

    def complete_sync(self, member_ids: Iterable[str], generation: int, group_id: str = "grp") -> None:
        """Every member syncs (followers first), the leader assigning each member its own id as bytes."""
        group = self.group(group_id)
        leader = group.leader_id
        ids = list(member_ids)
        calls = {mid: self.sync(mid, generation, group_id) for mid in ids if mid != leader}
        assert leader is not None
        calls[leader] = self.sync(leader, generation, group_id,
                                  assignments={mid: mid.encode() for mid in group.members})
        for mid, call in calls.items():
            assert self.sync_answer(call).error_code is Errors.NONE, (mid, self.answer(call))
        assert self.state(group_id) is ClassicGroupState.STABLE

    def rejoin_all(self, member_ids: Iterable[str], group_id: str = "grp", **fields: Any) -> dict[str, Call]:
        return {mid: self.join(mid, group_id, **fields) for mid in member_ids}

    def fresh_replay(self) -> GroupCoordinatorShard:
        """A new shard with every record replayed, its load completed (timers armed)."""
        shard = GroupCoordinatorShard(self.config, lambda: "unused", self.image)
        for r in self.records:
            shard.replay(r)
        timers_after_load(shard, self.now)
        return shard

    def failover(self) -> None:
        """The coordinator fails over: a new shard replays the records and completes its load; timers armed
        before are gone (the runtime arms what the load asks for), parked requests are never answered."""
        shard = GroupCoordinatorShard(self.config, self.shard.member_id_factory, self.image)
        for r in self.records:
            shard.replay(r)
        self.shard = shard
        self.timers.clear()
        self.apply(timers_after_load(shard, self.now))

    def snapshot_replay(self) -> GroupCoordinatorShard:
        shard = GroupCoordinatorShard(self.config, lambda: "unused", self.image)
        for r in snapshot_records(self.shard):
            shard.replay(r)
        timers_after_load(shard, self.now)
        return shard


def persisted_view(shard: GroupCoordinatorShard) -> dict[str, Any]:
    """What the records of each classic group determine (state, generation, protocol, leader, members)."""
    out: dict[str, Any] = {}
    for gid, group in shard.groups.items():
        if isinstance(group, ClassicGroup):
            out[gid] = (group.state, group.generation, group.protocol_type, group.protocol_name, group.leader_id,
                        dict(group.members), dict(group.static_members))
    return out
