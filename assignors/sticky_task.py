"""The streams task assignor (KIP-1071), with the semantics of Kafka's `StickyTaskAssignor`.

A streams group assigns *tasks*, not partitions: task (subtopology, p) processes partition p of every
source topic of its subtopology. Members run inside processes (one Kafka Streams instance = one process
id, possibly several members); state lives on a process's disk, so balance and replica placement are
decided per process, then spread over that process's members.

Rules, in the order they are applied:

1. Active tasks, stateful first, then stateless (balanced independently, as Kafka does). Each task goes,
   in order of preference, to (a) its previous active owner, (b) a previous standby or warm-up holder
   (the most caught-up first), as long as that member is under its quota (ceil(tasks / members)); else
   (c) to the least-loaded process (active tasks per member), and its least-loaded member.
2. Warm-up (KIP-441's high-availability rule, which Kafka's streams groups carry over): when rule 1(c) would
   move a stateful task from its still-present previous owner to a process that has no caught-up copy of
   its state, the task stays active on the previous owner and the destination gets a *warm-up* replica
   instead, at most `max_warmup_replicas` of them per assignment (0 turns the rule off: tasks move at once).
   A member is caught up on a task when it owned it as active, or reports a changelog lag
   (end offset - offset) within `acceptable_recovery_lag`. Once the warm-up catches up, the next
   assignment moves the task.
3. Standby replicas (`num_standby_replicas` per stateful task): never on a process that holds the task's
   active (or its warm-up): a standby on the same disk protects nothing. Previous standby holders first
   (below the per-member quota of all copies), then the least-loaded process with room by all tasks; past
   the quota only when every process without a copy is full, and then a previous holder first, so a
   rerun with nothing changed gives the same standbys back. When fewer distinct processes exist than
   replicas, the task gets fewer standbys. With `rack_aware_assignment_tags` (Kafka's
   group.streams.rack.aware.assignment.tags) the standbys that can still spread the task over a new value
   of a tag key (by key priority, processes with room only) are placed first, stickiness breaking ties
   (`_standby_tags.TagPicker`); the rest as above.

The function is pure and deterministic: inputs are sorted before use and nothing else is read.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from groupcoord.assignors._standby_tags import TagPicker

SubtopologyId = str
TaskId = tuple[SubtopologyId, int]  # (subtopology id, partition)
MemberId = str
ProcessId = str

EMPTY: frozenset[TaskId] = frozenset()


class TaskAssignorError(Exception):
    """The assignor cannot assign this input (the coordinator keeps the old target assignment)."""


@dataclass(frozen=True, slots=True)
class SubtopologySpec:
    """What the assignor needs of a subtopology: its task count and whether its tasks have state."""

    partitions: int  # tasks = max partitions over the subtopology's source topics
    stateful: bool


@dataclass(frozen=True, slots=True)
class StreamsMemberSpec:
    """One member: its process, its current target tasks and the changelog offsets it reported."""

    process_id: ProcessId
    active: frozenset[TaskId] = EMPTY
    standby: frozenset[TaskId] = EMPTY
    warmup: frozenset[TaskId] = EMPTY
    task_offsets: Mapping[TaskId, int] = field(default_factory=dict)
    task_end_offsets: Mapping[TaskId, int] = field(default_factory=dict)
    client_tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StreamsAssignmentConfig:
    """Kafka's `group.streams.num.standby.replicas` (0) and `group.streams.rack.aware.assignment.tags` ("")
    and the warm-up knobs of Kafka Streams (`max.warmup.replicas` 2, `acceptable.recovery.lag` 10000)."""

    num_standby_replicas: int = 0
    max_warmup_replicas: int = 2
    acceptable_recovery_lag: int = 10_000
    rack_aware_assignment_tags: tuple[str, ...] = ()  # group.streams.rack.aware.assignment.tags, by priority


@dataclass(frozen=True, slots=True)
class StreamsMemberAssignment:
    active: frozenset[TaskId] = EMPTY
    standby: frozenset[TaskId] = EMPTY
    warmup: frozenset[TaskId] = EMPTY


StreamsGroupAssignment = dict[MemberId, StreamsMemberAssignment]


class _Process:
    """Per-process bookkeeping while assigning (Kafka's `ProcessState`)."""

    __slots__ = ("active", "all_tasks", "caught_up", "member_active", "member_all", "members", "pid", "tasks")

    def __init__(self, pid: ProcessId) -> None:
        self.pid = pid
        self.members: list[MemberId] = []
        self.member_active: dict[MemberId, int] = {}
        self.member_all: dict[MemberId, int] = {}
        self.active = 0
        self.all_tasks = 0
        self.tasks: set[TaskId] = set()  # every copy (active, standby, warm-up) on this process
        self.caught_up: set[TaskId] = set()

    def active_load(self) -> float:
        return self.active / len(self.members)

    def total_load(self) -> float:
        return self.all_tasks / len(self.members)

    def least_loaded_member(self, active: bool) -> MemberId:
        counts = self.member_active if active else self.member_all
        return min(self.members, key=lambda m: (counts[m], m))


class _State:
    def __init__(self, members: Mapping[MemberId, StreamsMemberSpec], cfg: StreamsAssignmentConfig) -> None:
        self.cfg = cfg
        self.member_ids = sorted(members)
        self.process_of: dict[MemberId, ProcessId] = {}
        self.processes: dict[ProcessId, _Process] = {}
        self.process_tags: dict[ProcessId, Mapping[str, str]] = {}  # a process's tags: its first member's
        self.prev_active: dict[TaskId, MemberId] = {}
        self.prev_replicas: dict[TaskId, list[tuple[int, int, MemberId]]] = {}
        for mid in self.member_ids:
            spec = members[mid]
            proc = self.processes.get(spec.process_id)
            if proc is None:
                proc = self.processes[spec.process_id] = _Process(spec.process_id)
            proc.members.append(mid)
            self.process_tags.setdefault(spec.process_id, spec.client_tags)
            proc.member_active[mid] = 0
            proc.member_all[mid] = 0
            self.process_of[mid] = spec.process_id
            for t in spec.active:
                self.prev_active.setdefault(t, mid)
                proc.caught_up.add(t)
            held = spec.standby | spec.warmup
            for t in held:
                rank = (0, -spec.task_offsets.get(t, 0), mid)
                self.prev_replicas.setdefault(t, []).append(rank)
            for t, off in spec.task_offsets.items():
                if t not in held and t not in spec.active:
                    self.prev_replicas.setdefault(t, []).append((1, -off, mid))
                end = spec.task_end_offsets.get(t)
                if end is not None and end - off <= cfg.acceptable_recovery_lag:
                    proc.caught_up.add(t)
        for ranks in self.prev_replicas.values():
            ranks.sort()
        self.active: dict[MemberId, set[TaskId]] = {m: set() for m in self.member_ids}
        self.standby: dict[MemberId, set[TaskId]] = {m: set() for m in self.member_ids}
        self.warmup: dict[MemberId, set[TaskId]] = {m: set() for m in self.member_ids}
        self.warmups_left = cfg.max_warmup_replicas

    def place(self, task: TaskId, mid: MemberId, kind: dict[MemberId, set[TaskId]]) -> None:
        proc = self.processes[self.process_of[mid]]
        kind[mid].add(task)
        proc.tasks.add(task)
        proc.all_tasks += 1
        proc.member_all[mid] += 1
        if kind is self.active:
            proc.active += 1
            proc.member_active[mid] += 1


def _quota(tasks: int, members: int) -> int:
    return -(-tasks // members)


def _assign_active(st: _State, tasks: Sequence[TaskId], quota: int, stateful: bool) -> None:
    """Rule 1 (and rule 2 for stateful tasks). `quota` counts this pass's tasks per member; the member's
    count before the pass is subtracted so stateful and stateless tasks are balanced independently."""
    base = {m: st.processes[st.process_of[m]].member_active[m] for m in st.member_ids}

    def under(mid: MemberId) -> bool:
        return st.processes[st.process_of[mid]].member_active[mid] - base[mid] < quota

    # Previous owners first, for every task, before any replica holder may fill a member's quota.
    unowned: list[TaskId] = []
    for t in tasks:
        prev = st.prev_active.get(t)
        if prev is not None and under(prev):
            st.place(t, prev, st.active)
        else:
            unowned.append(t)
    rest: list[TaskId] = []
    for t in unowned:
        for _, _, mid in st.prev_replicas.get(t, ()):
            if under(mid):
                st.place(t, mid, st.active)
                break
        else:
            rest.append(t)
    # Least-loaded process by this pass's tasks per member, then by all active tasks per member.
    got = {pid: 0 for pid in st.processes}
    for m in st.member_ids:
        got[st.process_of[m]] += st.processes[st.process_of[m]].member_active[m] - base[m]

    def key(proc: _Process) -> tuple[float, float, ProcessId]:
        return (got[proc.pid] / len(proc.members), proc.active_load(), proc.pid)

    def member_of(proc: _Process) -> MemberId:
        return min(proc.members, key=lambda m: (proc.member_active[m] - base[m], proc.member_active[m], m))

    heap = [key(p) for p in st.processes.values()]
    heapq.heapify(heap)
    for t in rest:
        while True:
            entry = heapq.heappop(heap)
            proc = st.processes[entry[2]]
            if entry == key(proc):
                break
        prev = st.prev_active.get(t)
        if (
            stateful
            and st.cfg.max_warmup_replicas > 0
            and prev is not None
            and t not in proc.caught_up
            and st.process_of[prev] != proc.pid
        ):
            # Rule 2: keep it where its state is; warm the destination up instead.
            owner = st.processes[st.process_of[prev]]
            st.place(t, prev, st.active)
            got[owner.pid] += 1
            heapq.heappush(heap, key(owner))
            if st.warmups_left > 0:
                st.warmups_left -= 1
                st.place(t, proc.least_loaded_member(active=False), st.warmup)
        else:
            st.place(t, member_of(proc), st.active)
            got[proc.pid] += 1
        heapq.heappush(heap, key(proc))


def _assign_standby(st: _State, tasks: Sequence[TaskId], quota: int) -> None:
    """Rule 3: each replica on a distinct process that holds no other copy of the task. The tag-aware picks
    (with tags) first, then previous holders get their replicas back, for every task, before the
    least-loaded processes take the rest."""
    wanted = st.cfg.num_standby_replicas
    picker = None
    if st.cfg.rack_aware_assignment_tags:
        def has_room(pid: ProcessId) -> bool:
            return any(n < quota for n in st.processes[pid].member_all.values())

        picker = TagPicker(st.cfg.rack_aware_assignment_tags, sorted(st.processes), st.process_tags,
                           lambda pid: st.processes[pid].total_load(), has_room)
    placed = {t: 0 for t in tasks}
    if picker is not None:
        owner = {t: st.process_of[m] for m in st.member_ids for t in st.active[m]}
        for t in tasks:
            placed[t] = _assign_tagged_standbys(st, picker, t, owner[t], quota)
    for t, holders in _give_back_order(st, tasks, quota):
        _give_back(st, t, holders, placed, quota)
    missing = [(t, wanted - placed[t]) for t in tasks if placed[t] < wanted]
    heap = [(p.total_load(), p.pid) for p in st.processes.values()]
    heapq.heapify(heap)
    for t, count in missing:
        for _ in range(count):
            # Members at the quota are passed over while another process has room: the sticky pass above
            # gives a replica back only below the quota, so a replica placed past it would move on the
            # next run with nothing changed. Past the quota only when no process holding room is left.
            if not _place_least_loaded(st, heap, t, quota):
                _place_least_loaded(st, heap, t, None)


def _give_back(st: _State, t: TaskId, holders: Sequence[MemberId], placed: dict[TaskId, int], quota: int) -> None:
    for mid in holders:
        if placed[t] == st.cfg.num_standby_replicas:
            return
        proc = st.processes[st.process_of[mid]]
        if t not in proc.tasks and proc.member_all[mid] < quota:
            st.place(t, mid, st.standby)
            placed[t] += 1


def _give_back_order(st: _State, tasks: Sequence[TaskId], quota: int) -> list[tuple[TaskId, list[MemberId]]]:
    """The sticky pass's order: the unforced previous standbys of every task, then the forced ones, then the
    members that only report offsets for a task. A standby is forced when every other process without a copy of
    the task (judged on the previous assignment) is full: only such a standby is ever placed past the quota
    (the last-resort pass), so a member past its quota must get its unforced standbys back first, within the
    quota, and leave the forced ones to the last-resort pass, which gives them back to it."""
    held = {t: set(p.pid for p in st.processes.values() if t in p.tasks) for t in tasks}
    count = {m: st.processes[st.process_of[m]].member_all[m] for m in st.member_ids}
    for t in tasks:
        for rank, _, mid in st.prev_replicas.get(t, ()):
            if rank == 0 and st.process_of[mid] not in held[t]:
                held[t].add(st.process_of[mid])
                count[mid] += 1
    room = [p.pid for p in st.processes.values() if any(count[m] < quota for m in p.members)]
    tiers: list[list[tuple[TaskId, list[MemberId]]]] = [[], [], []]
    for t in tasks:
        forced = all(pid in held[t] for pid in room)
        by_tier: list[list[MemberId]] = [[], [], []]
        for rank, _, mid in st.prev_replicas.get(t, ()):
            by_tier[2 if rank else 1 if forced else 0].append(mid)
        for tier, holders in zip(tiers, by_tier, strict=True):
            if holders:
                tier.append((t, holders))
    return tiers[0] + tiers[1] + tiers[2]


def _place_least_loaded(st: _State, heap: list[tuple[float, ProcessId]], t: TaskId, quota: int | None) -> bool:
    """Place a replica of `t` on the least-loaded process that holds no copy of it (and, given `quota`, whose
    least-loaded member is below it). The heap holds (load, pid) entries; stale ones are dropped. Past the
    quota (`quota` None) a previous holder of the replica whose process has no copy keeps it, before load
    counts: such a replica was forced past the quota, and every process is full, so load decides nothing."""
    if quota is None:
        for _, _, mid in st.prev_replicas.get(t, ()):
            proc = st.processes[st.process_of[mid]]
            if t not in proc.tasks:
                st.place(t, mid, st.standby)
                heapq.heappush(heap, (proc.total_load(), proc.pid))
                return True
    skipped: list[tuple[float, ProcessId]] = []
    placed = False
    while heap:
        load, pid = heapq.heappop(heap)
        proc = st.processes[pid]
        if load != proc.total_load():
            continue  # stale entry
        mid = proc.least_loaded_member(active=False)
        if t in proc.tasks or (quota is not None and proc.member_all[mid] >= quota):
            skipped.append((load, pid))
            continue
        st.place(t, mid, st.standby)
        heapq.heappush(heap, (proc.total_load(), pid))
        placed = True
        break
    for entry in skipped:
        heapq.heappush(heap, entry)
    return placed


def _assign_tagged_standbys(st: _State, picker: TagPicker, t: TaskId, active_pid: ProcessId, quota: int) -> int:
    """Rule 3, tag-aware (Kafka's assignRackAwareStandbys): the standbys that still make the task more diverse
    over the tag keys go first, to processes with room; stickiness (previous active, then previous replica
    holders in rank order) and then load break ties. Returns how many were placed."""
    picker.start_task()
    picker.mark_used(active_pid)
    prev: dict[ProcessId, tuple[int, MemberId]] = {}
    for i, (_, _, mid) in enumerate(st.prev_replicas.get(t, ())):
        prev.setdefault(st.process_of[mid], (1 + i, mid))
    prev_active = st.prev_active.get(t)
    if prev_active is not None:
        prev[st.process_of[prev_active]] = (0, prev_active)

    def holds(pid: ProcessId) -> bool:
        return t in st.processes[pid].tasks

    ranks = {pid: r for pid, (r, _) in prev.items()}
    placed = 0
    while placed < st.cfg.num_standby_replicas:
        pid = picker.pick(holds, ranks)
        if pid is None:
            break
        proc = st.processes[pid]
        holder = prev.get(pid)
        mid = holder[1] if holder is not None and proc.member_all[holder[1]] < quota \
            else proc.least_loaded_member(active=False)
        st.place(t, mid, st.standby)
        picker.mark_used(pid)
        placed += 1
    return placed


def assign_tasks(
    members: Mapping[MemberId, StreamsMemberSpec],
    subtopologies: Mapping[SubtopologyId, SubtopologySpec],
    config: StreamsAssignmentConfig = StreamsAssignmentConfig(),
) -> StreamsGroupAssignment:
    """The new target assignment of every member in `members` (see the module docstring for the rules)."""
    if not members:
        return {}
    st = _State(members, config)
    stateful: list[TaskId] = []
    stateless: list[TaskId] = []
    for sid in sorted(subtopologies):
        spec = subtopologies[sid]
        if spec.partitions < 0:
            raise TaskAssignorError("negative task count")
        (stateful if spec.stateful else stateless).extend((sid, p) for p in range(spec.partitions))
    n = len(st.member_ids)
    _assign_active(st, stateful, _quota(len(stateful), n), stateful=True)
    _assign_active(st, stateless, _quota(len(stateless), n), stateful=False)
    if config.num_standby_replicas > 0 and stateful:
        total = len(stateful) * (1 + config.num_standby_replicas) + len(stateless)
        _assign_standby(st, stateful, _quota(total, n))
    return {
        m: StreamsMemberAssignment(
            frozenset(st.active[m]), frozenset(st.standby[m]), frozenset(st.warmup[m])
        )
        for m in st.member_ids
    }


class StickyTaskAssignor:
    """Kafka's `sticky` streams assignor (`group.streams.assignors`), as an object with a name."""

    name = "sticky"

    def assign(
        self,
        members: Mapping[MemberId, StreamsMemberSpec],
        subtopologies: Mapping[SubtopologyId, SubtopologySpec],
        config: StreamsAssignmentConfig = StreamsAssignmentConfig(),
    ) -> StreamsGroupAssignment:
        return assign_tasks(members, subtopologies, config)
