"""Streams groups (KIP-1071) with KIP-1263 assignment batching and offload: the sans-I/O state machine.

Theory of operation
-------------------
A streams group has one topology (set by the first member that joins an empty group; later members must
send the same one at the same topology epoch), members grouped into processes, a *group epoch* bumped by
every change that calls for a new assignment, a *target assignment* (tasks per member, at an assignment
epoch) and each member's *current assignment* (what it may run now, at its member epoch).

Group state, derived, never stored:
    Empty        no members
    NotReady     the topology cannot run: source or internal topics missing or mis-partitioned
                 (statuses in every heartbeat response say which)
    Assigning    the target assignment epoch is behind the group epoch
    Reconciling  some member is not yet at the target epoch, or still revoking/awaiting tasks
    Stable       every member runs its target at the target epoch
    Dead         deleted

When the target is behind (KIP-1263), a heartbeat (or the initial-delay timer) computes a new one only if
no offloaded run is in flight, the group is past `group.streams.initial.rebalance.delay.ms` since it was
created, and `assignment.interval.ms` has elapsed since the previous computation *finished* (the
timestamp travels in the target metadata record). With offload on, the run goes to the executor as a task;
its completion is applied against the group as it is then (members gone since are dropped, members new
since get nothing until the next run: the "missed changes" make the target lag, so a later run follows).
New groups start at epoch 1 and the first join bumps it to 2: a member of a group that has no target yet
reconciles to an empty target at epoch 1.

Member reconciliation is Kafka's for active tasks: revoke before assign. A member whose target drops
active tasks keeps its epoch and the intersection until it reports it no longer owns them
(UNREVOKED_TASKS); a member whose new active tasks are still owned or being revoked elsewhere advances its
epoch but waits for them (UNRELEASED_TASKS). Standby and warm-up tasks follow the target directly.

Every operation here is pure (issue 26): it reads the stored group, writes its records into its result while
applying them to a working view of the group (`working.py`: what it reads after writing, it reads there), and
returns what no record carries (a member's owned tasks, a shutdown request, an offloaded run started or ended)
as volatile effects in `Result.memory`. Only the replay of the result (`GroupCoordinatorShard.apply`, through
`replay` and `apply_effect`) changes the stored groups.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import replace
from functools import partial
from typing import Any

from groupcoord.assignors.sticky_task import StreamsMemberSpec, TaskId
from groupcoord.coordinator.core.config import BrokerConfig, GroupConfigStore
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.limits import ECHO_MAX_CHARS
from groupcoord.coordinator.core.metadata import EMPTY_IMAGE, MetadataImage
from groupcoord.coordinator.core.modern.group import (
    RunStarted,
    check_member_epoch,
    may_compute_target,
    offload,
    take_completion,
)
from groupcoord.coordinator.core.modern.heartbeat import HeartbeatSteps
from groupcoord.coordinator.core.principals import check_member_principal
from groupcoord.coordinator.core.results import CancelTimer, Result, ScheduleTimer
from groupcoord.coordinator.core.stats import CoreStats
from groupcoord.coordinator.core.streams.config import StreamsConfigs
from groupcoord.coordinator.core.streams.endpoints import partitions_by_endpoint
from groupcoord.coordinator.core.streams.internal_topics import configure_topology
from groupcoord.coordinator.core.streams.members import (
    assignment_inputs,
    member_metadata,
    target_tasks,
    warmup_caught_up,
)
from groupcoord.coordinator.core.streams.messages import (
    CreateInternalTopics,
    StreamsAssignorCompletion,
    StreamsAssignorRun,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResponse,
    validate_request,
)
from groupcoord.coordinator.core.streams.records import (
    MEMBER_TOMBSTONES,
    NO_TASKS,
    StreamsGroupCurrentMemberAssignment,
    StreamsGroupMemberMetadata,
    StreamsGroupMetadata,
    StreamsGroupTargetAssignmentMember,
    StreamsGroupTargetAssignmentMetadata,
    StreamsGroupTopologyRecord,
    Tasks,
)
from groupcoord.coordinator.core.streams.state import (
    STABLE,
    UNRELEASED,
    UNREVOKED,
    OwnedActive,
    ShutdownRequested,
    StreamsGroup,
    StreamsGroupsIn,
    StreamsGroupState,
    apply_effect,
    apply_record,
    assign_key,
    rebalance_key,
    session_key,
)
from groupcoord.coordinator.core.streams.static_members import (
    LEAVE_STATIC_EPOCH,
    remap_replaced,
    replace_member,
    static_leave,
    static_member,
)
from groupcoord.coordinator.core.streams.topology import (
    ConfiguredTopology,
    StatusEntry,
    StreamsStatus,
    StreamsTopology,
    internal_topics,
    validate_topology,
)
from groupcoord.coordinator.core.streams.working import working


class StreamsGroups:
    """All streams groups of one shard: heartbeat, timers, offloaded-run completions, admin views."""

    def __init__(self, configs: StreamsConfigs | None = None, image: MetadataImage = EMPTY_IMAGE,
                 stats: CoreStats | None = None, run_ids: Iterator[int] | None = None,
                 store: MutableMapping[str, Any] | None = None) -> None:
        # The shard's (its broker config and AlterGroupConfigs' records), or the defaults' outside a shard.
        self.configs = configs or StreamsConfigs(GroupConfigStore(BrokerConfig.from_mapping()))
        self.stats = stats or CoreStats()  # the shard's: KIP-1263's metrics count every modern type alike
        self.run_ids = run_ids or itertools.count(1)  # the shard's: one run id sequence for every type
        self._image_of: Callable[[], MetadataImage] = lambda: image
        self.groups = StreamsGroupsIn(store if store is not None else {})  # the shard's groups, in a shard

    # --- plumbing ---------------------------------------------------------------------------------------
    @property
    def image(self) -> MetadataImage:
        """The current topic metadata (the shard's, when installed in one: it is replaced whole on refresh)."""
        return self._image_of()

    @image.setter
    def image(self, image: MetadataImage) -> None:
        self._image_of = lambda: image

    def follow_image(self, image_of: Callable[[], MetadataImage]) -> None:
        self._image_of = image_of

    def _emit(self, out: Result[Any], view: dict[str, StreamsGroup], rec: object) -> None:
        """Write `rec`: add it to the operation's result and apply it to the operation's working view of its
        group (`view`, group id -> view; working.py), never to the stored group. Every operation here is pure:
        `GroupCoordinatorShard.apply` (or a test's driver) replays the records afterwards."""
        out.records.append(rec)
        apply_record(view, rec, self)

    def _view(self, g: StreamsGroup) -> dict[str, StreamsGroup]:  # an operation's working view of `g`
        return {g.group_id: working(g)}

    def replay(self, rec: object) -> None:
        apply_record(self.groups, rec, self)

    def apply_effect(self, effect: ShutdownRequested | OwnedActive) -> None:
        apply_effect(self.groups, effect)

    def session_timeout_ms(self, group_id: str) -> int:
        return self.configs.session_timeout_ms(group_id)

    def configured(self, g: StreamsGroup) -> ConfiguredTopology | None:
        """The topology configured against the image, memoised in the group (and in the stored one for a view)."""
        if g.topology is None:
            return None
        memo = g.configured_cache
        if memo is None or memo[0] is not g.topology or memo[1] is not self.image:
            memo = g.configured_cache = (g.topology, self.image, configure_topology(g.topology, self.image))
            stored = self.groups.get(g.group_id)
            if stored is not None and stored is not g and stored.topology is g.topology:
                stored.configured_cache = memo
        return memo[2]

    def state(self, group_id: str) -> StreamsGroupState:
        g = self.groups.get(group_id)
        if g is None:
            return StreamsGroupState.DEAD
        if not g.members:
            return StreamsGroupState.EMPTY
        conf = self.configured(g)
        if conf is None or not conf.ready:
            return StreamsGroupState.NOT_READY
        if g.target_assignment_epoch < g.group_epoch:
            return StreamsGroupState.ASSIGNING
        for c in g.current.values():
            if c.member_epoch != g.target_assignment_epoch or c.state != STABLE:
                return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    def _hash(self, g: StreamsGroup) -> int:
        if g.topology is None:
            return 0
        names = [t for s in g.topology.subtopologies for t in s.source_topics]
        names += [t.name for t in internal_topics(g.topology)]
        return self.image.topics_hash(names)

    def _bump(self, view: dict[str, StreamsGroup], g: StreamsGroup, out: Result[Any], now: int) -> None:
        rec = StreamsGroupMetadata(g.group_id, g.group_epoch + 1, self._hash(g), g.first_assignment_not_before_ms,
                                   self.configs.assignment_configs(g.group_id))
        self._emit(out, view, rec)

    # --- heartbeat --------------------------------------------------------------------------------------
    def heartbeat(self, req: StreamsHeartbeatRequest, now: int) -> Result[StreamsHeartbeatResponse]:
        return _STEPS.run(self, req, now)

    def _group_of(self, req: StreamsHeartbeatRequest) -> StreamsGroup | None:
        g = self.groups.get(req.group_id)
        if g is not None and req.member_id in g.members:
            check_member_principal(g.members[req.member_id].principal, req.principal, req.member_id[:64],
                                   g.group_id[:64])
        return g

    def _leave(self, req: StreamsHeartbeatRequest, now: int) -> Result[StreamsHeartbeatResponse]:
        out = Result(StreamsHeartbeatResponse(member_id=req.member_id, member_epoch=req.member_epoch))
        stored = self._group_of(req)
        if stored is None:
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {req.group_id[:ECHO_MAX_CHARS]} not found.")
        static_member(stored, req)
        if req.member_id not in stored.members:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, "The member is not in the group.")
        view = self._view(stored)
        g = view[stored.group_id]
        if req.member_epoch == LEAVE_STATIC_EPOCH:  # KIP-345: keep its tasks until its session expires
            static_leave(g, req.member_id, partial(self._emit, out, view))
            out.timers += [ScheduleTimer(session_key(g.group_id, req.member_id),
                                         now + self.configs.session_timeout_ms(g.group_id)),
                           CancelTimer(rebalance_key(g.group_id, req.member_id))]
        else:
            self._remove_member(view, g, req.member_id, out, now)
            out.timers += [CancelTimer(session_key(g.group_id, req.member_id)),
                           CancelTimer(rebalance_key(g.group_id, req.member_id))]
        return out

    def _join(self, req: StreamsHeartbeatRequest, now: int) -> Result[StreamsHeartbeatResponse]:
        out = Result(StreamsHeartbeatResponse())
        cfg, gid = self.configs, req.group_id
        stored = self._group_of(req)
        if stored is None:
            if req.member_epoch != 0:  # Kafka's getStreamsGroupOrThrow
                raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND,
                                       f"Streams group {req.group_id[:ECHO_MAX_CHARS]} not found.")
            # KIP-1263: a new group starts at epoch 1; epoch 1 is the empty target's. Its record creates the
            # working view (only the apply creates the stored group).
            view: dict[str, StreamsGroup] = {}
            self._emit(out, view, StreamsGroupMetadata(gid, 1, 0, now + cfg.initial_rebalance_delay_ms(gid)))
        else:
            view = self._view(stored)
        g = view[gid]
        emit = partial(self._emit, out, view)
        bump = False
        replaced = static_member(g, req)
        member = g.members.get(req.member_id)
        if req.member_epoch == 0:
            assert req.topology is not None
            if member is None and replaced is None and len(g.members) >= cfg.max_size():
                raise CoordinatorError(Errors.GROUP_MAX_SIZE_REACHED, "The group is full.")
            bump |= self._join_topology(g, req.topology, emit)
            if replaced is not None:
                prior = g.members[replaced]
                replace_member(g, replaced, req.member_id, emit)
                member = None
        else:
            if member is None:
                raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, "The member is not in the group.")
            cur, owned = g.current[req.member_id], req.active_tasks
            check_member_epoch(req.member_epoch, cur.member_epoch, cur.previous_member_epoch,
                               lambda: owned is not None and owned <= cur.active)
        if req.shutdown_application:  # volatile: applied after the records, as every effect
            g.shutdown_requested = True
            out.memory.append(ShutdownRequested(gid))
        if req.active_tasks is not None:
            g.owned_active[req.member_id] = req.active_tasks
            out.memory.append(OwnedActive(gid, req.member_id, req.active_tasks))
        new_meta = member_metadata(g.group_id, g.topology.epoch if g.topology is not None else 0, req, member)
        if new_meta != member:
            emit(new_meta)
            was = prior if replaced is not None else member
            bump |= was is None or assignment_inputs(was) != assignment_inputs(new_meta)
            bump |= member is not None and warmup_caught_up(g.current.get(req.member_id), member, new_meta,
                                                            cfg.acceptable_recovery_lag)
        if g.topology is not None and self._hash(g) != g.metadata_hash:
            bump = True
        bump |= self.configs.assignment_configs(gid) != g.last_assignment_configs  # altered since the last bump
        if bump:
            self._bump(view, g, out, now)
        self._maybe_assign(view, g, now, out)
        conf = self.configured(g)
        if conf is not None and conf.topics_to_create:
            out.tasks.append(CreateInternalTopics(gid, conf.topics_to_create, 2 * cfg.heartbeat_interval_ms(gid)))
        changed = self._reconcile(view, g, req.member_id, out)
        cur = g.current[req.member_id]
        out.timers.append(ScheduleTimer(session_key(g.group_id, req.member_id), now + cfg.session_timeout_ms(gid)))
        if cur.state == UNREVOKED:
            timeout = g.members[req.member_id].rebalance_timeout_ms
            if changed:
                out.timers.append(ScheduleTimer(rebalance_key(g.group_id, req.member_id), now + timeout))
        else:
            out.timers.append(CancelTimer(rebalance_key(g.group_id, req.member_id)))
        send = changed or req.member_epoch == 0 or req.active_tasks is not None
        out.response = StreamsHeartbeatResponse(
            member_id=req.member_id,
            member_epoch=cur.member_epoch,
            heartbeat_interval_ms=cfg.heartbeat_interval_ms(gid),
            acceptable_recovery_lag=cfg.acceptable_recovery_lag,
            task_offset_interval_ms=cfg.task_offset_interval_ms,
            status=self._statuses(g, g.members[req.member_id]),
            active_tasks=cur.active if send else None,
            standby_tasks=cur.standby if send else None,
            warmup_tasks=cur.warmup if send else None,
            partitions_by_user_endpoint=partitions_by_endpoint(g.topology, g.members, g.current, self.image)
            if req.endpoint_information_epoch != g.endpoint_epoch else None,
            endpoint_information_epoch=g.endpoint_epoch,
        )
        return out

    def _join_topology(self, g: StreamsGroup, topology: StreamsTopology, emit: Callable[[object], None]) -> bool:
        """The topology rules: the first member of an empty group sets it; a higher epoch updates it;
        the same epoch must carry the same topology (131); a lower epoch is fenced (132)."""
        why = validate_topology(topology)
        if why is not None:
            raise CoordinatorError(Errors.STREAMS_INVALID_TOPOLOGY, why)
        cur = g.topology
        if cur is None or not g.members or topology.epoch > cur.epoch:
            if cur != topology:
                emit(StreamsGroupTopologyRecord(g.group_id, topology))
                return True
            return False
        if topology.epoch < cur.epoch:
            raise CoordinatorError(Errors.STREAMS_TOPOLOGY_FENCED, "The topology epoch is older than the group's.")
        if topology != cur:
            raise CoordinatorError(Errors.STREAMS_INVALID_TOPOLOGY_EPOCH,
                                   "The topology differs from the group's at the same topology epoch.")
        return False

    def _statuses(self, g: StreamsGroup, member: StreamsGroupMemberMetadata) -> tuple[StatusEntry, ...]:
        statuses: list[StatusEntry] = []
        if g.topology is not None and member.topology_epoch < g.topology.epoch:
            statuses.append(StatusEntry(StreamsStatus.STALE_TOPOLOGY,
                                        "The member's topology epoch is older than the group's."))
        conf = self.configured(g)
        if conf is not None:
            statuses.extend(conf.statuses)
        if g.shutdown_requested:
            statuses.append(StatusEntry(StreamsStatus.SHUTDOWN_APPLICATION,
                                        "A member requested the application to shut down."))
        sent = {k for k, _ in member.client_tags}
        missing = [k for k in self.configs.rack_aware_assignment_tags(g.group_id) if k not in sent]
        if missing:  # Kafka 4.4 (heartbeat v1), last
            statuses.append(StatusEntry(StreamsStatus.MISSING_CLIENT_TAGS, (
                f"Missing required client tags for rack-aware standby assignment: [{', '.join(missing)}]. "
                "Configure them via 'client.tag.<tagKey>' in your Streams config.")))
        return tuple(statuses)

    # --- KIP-1263: when a new target is computed ----------------------------------------------------------
    def _maybe_assign(self, view: dict[str, StreamsGroup], g: StreamsGroup, now: int, out: Result[Any]) -> None:
        if g.target_assignment_epoch >= g.group_epoch or not g.members:
            return
        last = g.assignment_timestamp_ms if g.target_assignment_epoch else None
        if not may_compute_target(g.inflight, last, now, self.configs.assignment_interval_ms(g.group_id),
                                  self.stats):
            return  # a later heartbeat from any member runs it
        conf = self.configured(g)
        if conf is None or not conf.ready:
            return
        if not g.target_assignment_epoch and now < g.first_assignment_not_before_ms:
            out.timers.append(ScheduleTimer(assign_key(g.group_id), g.first_assignment_not_before_ms))
            return
        members = {
            mid: StreamsMemberSpec(
                m.process_id,
                *(target_tasks(g, mid)),
                task_offsets=m.task_offsets, task_end_offsets=m.task_end_offsets, client_tags=dict(m.client_tags))
            for mid, m in g.members.items()
        }
        if self.configs.offload_enabled(g.group_id):
            g.inflight = offload(self.run_ids, g.group_epoch, self.stats,
                                 {mid: m.instance_id for mid, m in g.members.items() if m.instance_id is not None})
            out.memory.append(RunStarted(g.group_id, g.inflight))
            out.tasks.append(StreamsAssignorRun(g.group_id, g.inflight.run_id, g.group_epoch, members,
                                                conf.subtopologies, self.configs.assignment_config(g.group_id)))
            return
        self.stats.assignor_runs_sync += 1
        done = StreamsAssignorRun(g.group_id, next(self.run_ids), g.group_epoch, members, conf.subtopologies,
                                  self.configs.assignment_config(g.group_id)).run()
        if done.assignment is None:
            self.stats.assignor_failures += 1
        else:
            self._install_target(view, g, done.assignment, g.group_epoch, now, out)

    def complete_assignor(self, done: StreamsAssignorCompletion, now: int) -> Result[None]:
        """An offloaded run finished: install its target against the group as it is now."""
        out: Result[None] = Result(None)
        stored = self.groups.get(done.group_id)
        if stored is None:
            take_completion(None, done, self.stats, out)
            return out
        view = self._view(stored)
        g = view[stored.group_id]
        run = take_completion(g, done, self.stats, out)  # completed or failed, the run has ended (RunEnded)
        if g.inflight is not None and g.inflight.run_id == done.run_id:
            g.inflight = None  # in the working view, which the rest of the operation reads
        if run is not None and done.assignment is not None:
            assignment = remap_replaced(done.assignment, run.instance_ids, g.static_members)
            self._install_target(view, g, assignment, run.assignment_epoch, now, out)
        return out

    def _install_target(
        self, view: dict[str, StreamsGroup], g: StreamsGroup, assignment: Mapping[str, tuple[Tasks, Tasks, Tasks]],
        epoch: int, now: int, out: Result[Any],
    ) -> None:
        for mid in g.members:
            active, standby, warmup = assignment.get(mid, (NO_TASKS, NO_TASKS, NO_TASKS))
            old = g.target.get(mid)
            if old is None or (old.active, old.standby, old.warmup) != (active, standby, warmup):
                self._emit(out, view, StreamsGroupTargetAssignmentMember(g.group_id, mid, active, standby, warmup))
        self._emit(out, view, StreamsGroupTargetAssignmentMetadata(g.group_id, epoch, now))

    # --- reconciliation ---------------------------------------------------------------------------------
    def _reconcile(self, view: dict[str, StreamsGroup], g: StreamsGroup, member_id: str, out: Result[Any]) -> bool:
        cur = g.current.get(member_id)
        if cur is None:
            cur = StreamsGroupCurrentMemberAssignment(g.group_id, member_id, 0, 0, STABLE,
                                                      NO_TASKS, NO_TASKS, NO_TASKS, NO_TASKS)
        new = self._next_assignment(g, cur)
        if new == g.current.get(member_id):
            return False
        self._emit(out, view, new)
        return True

    def _next_assignment(
        self, g: StreamsGroup, cur: StreamsGroupCurrentMemberAssignment
    ) -> StreamsGroupCurrentMemberAssignment:
        mid = cur.member_id
        if cur.state == UNREVOKED:
            owned = g.owned_active.get(mid)
            if owned is None or owned & cur.active_pending_revocation:
                return cur
        target_epoch, (active, standby, warmup) = g.effective_target_epoch, target_tasks(g, mid)  # no target: 1
        if cur.member_epoch == target_epoch and cur.state == STABLE:
            return cur
        revoke = cur.active - active
        if revoke:
            return replace(cur, state=UNREVOKED, active=cur.active & active, standby=cur.standby & standby,
                           warmup=cur.warmup & warmup, active_pending_revocation=revoke)
        elsewhere: set[TaskId] = set()
        for other, c in g.current.items():
            if other != mid:
                elsewhere.update(c.active, c.active_pending_revocation)
        unreleased = (active - cur.active) & elsewhere
        prev = cur.member_epoch if cur.member_epoch != target_epoch else cur.previous_member_epoch
        return StreamsGroupCurrentMemberAssignment(
            g.group_id, mid, target_epoch, prev, UNRELEASED if unreleased else STABLE,
            frozenset(active - unreleased), standby, warmup, NO_TASKS)

    # --- removal and timers -----------------------------------------------------------------------------
    def _remove_member(self, view: dict[str, StreamsGroup], g: StreamsGroup, member_id: str, out: Result[Any],
                       now: int) -> None:
        MEMBER_TOMBSTONES.remove(partial(self._emit, out, view), g.group_id, member_id, member_id in g.target)
        self._bump(view, g, out, now)

    def fire_timer(self, key: tuple[str, ...], now: int) -> Result[None]:
        out: Result[None] = Result(None)
        kind, gid = key[0], key[1]
        stored = self.groups.get(gid)
        if stored is None:
            return out
        view = self._view(stored)
        g = view[gid]
        if kind == "streams-session" and key[2] in g.members:
            self.stats.members_fenced_session += 1  # counted with every modern type's fences
            self._remove_member(view, g, key[2], out, now)
            out.timers.append(CancelTimer(rebalance_key(gid, key[2])))
        elif kind == "streams-rebalance" and key[2] in g.members and g.current[key[2]].state == UNREVOKED:
            self.stats.members_fenced_rebalance += 1
            self._remove_member(view, g, key[2], out, now)
            out.timers.append(CancelTimer(session_key(gid, key[2])))
        elif kind == "streams-assign":
            self._maybe_assign(view, g, now, out)
        return out


_STEPS: HeartbeatSteps[StreamsGroups, StreamsHeartbeatRequest, StreamsHeartbeatResponse] = HeartbeatSteps(
    lambda groups, r: validate_request(r), lambda r: r.member_epoch < 0, StreamsGroups._leave, StreamsGroups._join,
    lambda groups, r, e: StreamsHeartbeatResponse(int(e.code), e.message, r.member_id[:64], r.member_epoch))
