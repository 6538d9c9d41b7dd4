"""Tag-aware standby placement in the streams sticky task assignor (Kafka's RackAwareStandbyPicker under
group.streams.rack.aware.assignment.tags): standbys spread over distinct tag values when a process with a
new value has room, and never share a process with the task's active."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.assignors.sticky_task import (
    StreamsAssignmentConfig,
    StreamsGroupAssignment,
    StreamsMemberSpec,
    SubtopologySpec,
    TaskId,
    assign_tasks,
)

ZONES = ["z1", "z2", "z3"]
RACKS = ["r1", "r2", "r3", "r4"]


def all_tasks(subs: dict[str, SubtopologySpec]) -> list[TaskId]:
    return [(s, p) for s, spec in subs.items() for p in range(spec.partitions)]


@st.composite
def tagged_groups(draw: st.DrawFn) -> tuple[
    dict[str, StreamsMemberSpec], dict[str, SubtopologySpec], StreamsAssignmentConfig
]:
    subs = {f"s{i}": SubtopologySpec(draw(st.integers(0, 10)), draw(st.booleans()))
            for i in range(draw(st.integers(1, 3)))}
    tasks = all_tasks(subs)
    n_members = draw(st.integers(1, 9))
    n_procs = draw(st.integers(1, n_members))
    proc_tags: dict[str, dict[str, str]] = {}
    for i in range(n_procs):
        tags = {}
        if draw(st.integers(0, 9)) > 0:  # now and then a process without the key
            tags["zone"] = draw(st.sampled_from(ZONES))
        if draw(st.booleans()):
            tags["rack"] = draw(st.sampled_from(RACKS))
        proc_tags[f"p{i}"] = tags
    members: dict[str, StreamsMemberSpec] = {}
    for i in range(n_members):
        pid = f"p{i % n_procs}"
        owned = draw(st.sets(st.sampled_from(tasks), max_size=5)) if tasks else set()
        standby = draw(st.sets(st.sampled_from(tasks), max_size=3)) if tasks else set()
        members[f"m{i}"] = StreamsMemberSpec(pid, frozenset(owned), frozenset(standby - owned),
                                             client_tags=proc_tags[pid])
    cfg = StreamsAssignmentConfig(
        num_standby_replicas=draw(st.integers(1, 2)), max_warmup_replicas=draw(st.integers(0, 2)),
        rack_aware_assignment_tags=draw(st.sampled_from([("zone",), ("zone", "rack"), ("rack", "zone")])))
    return members, subs, cfg


def holders(members: dict[str, StreamsMemberSpec], result: StreamsGroupAssignment,
            t: TaskId) -> tuple[set[str], set[str]]:
    """(processes with t's active or a standby of it, processes holding t in any role)."""
    main, anyrole = set(), set()
    for m, a in result.items():
        pid = members[m].process_id
        if t in a.active or t in a.standby:
            main.add(pid)
        if t in a.active or t in a.standby or t in a.warmup:
            anyrole.add(pid)
    return main, anyrole


@settings(max_examples=60, deadline=None)
@given(tagged_groups())
def test_tagged_standbys_never_share_a_process_with_the_active_and_every_active_is_assigned_once(case) -> None:
    members, subs, cfg = case
    result = assign_tasks(members, subs, cfg)
    counts = Counter(t for a in result.values() for t in a.active)
    assert set(counts) == set(all_tasks(subs)) and all(c == 1 for c in counts.values())
    per_process: dict[str, Counter[TaskId]] = {}
    for m, a in result.items():
        per_process.setdefault(members[m].process_id, Counter()).update(a.active | a.standby | a.warmup)
    for c in per_process.values():
        assert all(n == 1 for n in c.values()), "a process holds two copies of one task"


@settings(max_examples=60, deadline=None)
@given(tagged_groups())
def test_tagged_standbys_reach_the_configured_count_when_processes_allow(case) -> None:
    members, subs, cfg = case
    result = assign_tasks(members, subs, cfg)
    n_procs = len({s.process_id for s in members.values()})
    standbys = Counter(t for a in result.values() for t in a.standby)
    warmups = Counter(t for a in result.values() for t in a.warmup)
    for t in all_tasks(subs):
        if subs[t[0]].stateful:
            assert standbys[t] == min(cfg.num_standby_replicas, n_procs - 1 - warmups[t])


@settings(max_examples=80, deadline=None)
@given(tagged_groups())
def test_a_tasks_copies_repeat_a_top_tag_value_only_when_no_process_with_a_new_value_has_room(case) -> None:
    members, subs, cfg = case
    result = assign_tasks(members, subs, cfg)
    top = cfg.rack_aware_assignment_tags[0]
    tags = {s.process_id: s.client_tags for s in members.values()}
    stateful = [t for t in all_tasks(subs) if subs[t[0]].stateful]
    total = len(stateful) * (1 + cfg.num_standby_replicas) + len(all_tasks(subs)) - len(stateful)
    quota = -(-total // len(members))
    load = Counter({m: len(a.active) + len(a.standby) + len(a.warmup) for m, a in result.items()})
    has_room = {pid: any(load[m] < quota for m, s in members.items() if s.process_id == pid) for pid in tags}
    for t in stateful:
        main, anyrole = holders(members, result, t)
        values = [tags[p][top] for p in main if top in tags[p]]
        if len(values) == len(set(values)):
            continue
        for pid, ptags in tags.items():
            if pid not in anyrole and top in ptags and ptags[top] not in values:
                assert not has_room[pid], f"{t}: {pid} offered new {top} {ptags[top]} and had room"


@settings(max_examples=40, deadline=None)
@given(tagged_groups())
def test_tags_no_process_differs_on_change_nothing(case) -> None:
    members, subs, cfg = case
    same = {m: StreamsMemberSpec(s.process_id, s.active, s.standby, client_tags={"zone": "z1", "rack": "r1"})
            for m, s in members.items()}
    untagged = StreamsAssignmentConfig(cfg.num_standby_replicas, cfg.max_warmup_replicas)
    assert assign_tasks(same, subs, cfg) == assign_tasks(same, subs, untagged)


def test_three_zones_two_standbys_put_every_copy_in_its_own_zone() -> None:
    members = {f"m{i}": StreamsMemberSpec(f"p{i}", client_tags={"zone": ZONES[i % 3]}) for i in range(6)}
    subs = {"0": SubtopologySpec(6, True)}
    cfg = StreamsAssignmentConfig(num_standby_replicas=2, max_warmup_replicas=0,
                                  rack_aware_assignment_tags=("zone",))
    result = assign_tasks(members, subs, cfg)
    for t in all_tasks(subs):
        main, _ = holders(members, result, t)
        assert len(main) == 3
        assert {members[f"m{p[1:]}"].client_tags["zone"] for p in main} == set(ZONES), t
    untagged = assign_tasks(members, subs, StreamsAssignmentConfig(2, 0))
    spread = [len({members[f"m{p[1:]}"].client_tags["zone"] for p in holders(members, untagged, t)[0]})
              for t in all_tasks(subs)]
    assert min(spread) < 3, "without tags some task has two copies in one zone (the tags are what spreads them)"


def test_the_second_key_spreads_standbys_once_the_first_is_exhausted() -> None:
    # Two zones, two racks in each; one standby can take a new zone, the second only a new rack.
    layout = {"p0": ("z1", "r1"), "p1": ("z1", "r2"), "p2": ("z2", "r3"), "p3": ("z2", "r4")}
    members = {f"m{p[1:]}": StreamsMemberSpec(p, client_tags={"zone": z, "rack": r}) for p, (z, r) in layout.items()}
    subs = {"0": SubtopologySpec(4, True)}
    cfg = StreamsAssignmentConfig(num_standby_replicas=2, max_warmup_replicas=0,
                                  rack_aware_assignment_tags=("zone", "rack"))
    result = assign_tasks(members, subs, cfg)
    for t in all_tasks(subs):
        main, _ = holders(members, result, t)
        assert {layout[p][0] for p in main} == {"z1", "z2"}, t
        assert len({layout[p][1] for p in main}) == 3, t


class ReferencePicker:
    """Kafka's RackAwareStandbyPicker as written, one process at a time: the model the grouped picker must
    agree with on every pick."""

    def __init__(self, keys: list[str], processes: list[str], tags: dict[str, dict[str, str]]) -> None:
        self.keys, self.tags, self.all = keys, tags, processes
        self.used: list[set[str]] = [set() for _ in keys]
        self.priority, self.candidates = 0, processes

    def start_task(self) -> None:
        self.used = [set() for _ in self.keys]
        self.priority, self.candidates = 0, self.all

    def mark_used(self, p: str) -> None:
        for i, k in enumerate(self.keys):
            if k in self.tags[p]:
                self.used[i].add(self.tags[p][k])

    def new(self, p: str, i: int) -> bool:
        v = self.tags[p].get(self.keys[i])
        return v is not None and v not in self.used[i]

    def pick(self, eligible, rank):  # type: ignore[no-untyped-def]
        while self.priority < len(self.keys):
            survivors = [p for p in self.candidates if self.new(p, self.priority) and eligible(p)]
            if not survivors:
                self.priority, self.candidates = self.priority + 1, self.all
                continue
            self.candidates = survivors

            def diversity(p: str) -> tuple[bool, ...]:
                return tuple(not self.new(p, i) for i in range(self.priority + 1, len(self.keys)))

            best = min(diversity(p) for p in survivors)
            return min((p for p in survivors if diversity(p) == best), key=lambda p: (rank(p), p))
        return None


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_the_grouped_picker_picks_what_kafkas_picker_picks(data: st.DataObject) -> None:
    from groupcoord.assignors._standby_tags import NOT_PREVIOUS, TagPicker

    n = data.draw(st.integers(1, 12))
    procs = [f"p{i:02d}" for i in range(n)]
    tags = {p: {k: data.draw(st.sampled_from(vals)) for k, vals in (("zone", ZONES), ("rack", RACKS))
                if data.draw(st.integers(0, 4)) > 0} for p in procs}
    keys = data.draw(st.sampled_from([["zone"], ["zone", "rack"], ["rack", "zone"]]))
    quota = data.draw(st.integers(1, 6))
    load = {p: data.draw(st.integers(0, quota)) for p in procs}
    fast = TagPicker(keys, procs, tags, lambda p: float(load[p]), lambda p: load[p] < quota)
    ref = ReferencePicker(keys, procs, tags)
    for _ in range(data.draw(st.integers(1, 8))):
        holders = {data.draw(st.sampled_from(procs))}
        previous = {p: data.draw(st.integers(0, 3)) for p in data.draw(st.sets(st.sampled_from(procs), max_size=3))}
        for picker in (fast, ref):
            picker.start_task()
            picker.mark_used(next(iter(holders)))
        for _ in range(data.draw(st.integers(1, 3))):
            want = ref.pick(lambda p, h=holders: p not in h and load[p] < quota,
                            lambda p, r=previous: (r.get(p, NOT_PREVIOUS), float(load[p])))
            got = fast.pick(lambda p, h=holders: p in h, previous)
            assert got == want
            if want is None:
                break
            holders.add(want)
            load[want] += 1
            fast.mark_used(want)
            ref.mark_used(want)
