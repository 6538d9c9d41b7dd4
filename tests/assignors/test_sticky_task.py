"""Properties of the streams sticky task assignor (KIP-1071): single active ownership, standby placement,
stickiness, balance, warm-ups, and minimal movement when one member joins or leaves."""

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

NO_WARMUP = StreamsAssignmentConfig(num_standby_replicas=0, max_warmup_replicas=0)


def all_tasks(subs: dict[str, SubtopologySpec]) -> list[TaskId]:
    return [(s, p) for s, spec in subs.items() for p in range(spec.partitions)]


def with_previous(
    members: dict[str, StreamsMemberSpec], result: StreamsGroupAssignment
) -> dict[str, StreamsMemberSpec]:
    """Members as they heartbeat after reconciling `result`."""
    return {
        m: StreamsMemberSpec(spec.process_id, result[m].active, result[m].standby, result[m].warmup)
        for m, spec in members.items()
    }


@st.composite
def groups(draw: st.DrawFn, one_member_per_process: bool = False) -> tuple[
    dict[str, StreamsMemberSpec], dict[str, SubtopologySpec], StreamsAssignmentConfig
]:
    n_subs = draw(st.integers(1, 4))
    subs = {
        f"s{i}": SubtopologySpec(draw(st.integers(0, 12)), draw(st.booleans())) for i in range(n_subs)
    }
    tasks = all_tasks(subs)
    n_members = draw(st.integers(1, 8))
    n_procs = n_members if one_member_per_process else draw(st.integers(1, n_members))
    members: dict[str, StreamsMemberSpec] = {}
    for i in range(n_members):
        pid = f"p{i % n_procs}"
        owned = draw(st.sets(st.sampled_from(tasks), max_size=6)) if tasks else set()
        standby = draw(st.sets(st.sampled_from(tasks), max_size=3)) if tasks else set()
        offsets = draw(st.dictionaries(st.sampled_from(tasks), st.integers(0, 50), max_size=3)) if tasks else {}
        members[f"m{i}"] = StreamsMemberSpec(
            pid, frozenset(owned), frozenset(standby - owned), frozenset(), offsets, {t: 60 for t in offsets}
        )
    cfg = StreamsAssignmentConfig(
        num_standby_replicas=draw(st.integers(0, 2)),
        max_warmup_replicas=draw(st.integers(0, 3)),
        acceptable_recovery_lag=draw(st.sampled_from([0, 20, 100])),
    )
    return members, subs, cfg


@settings(max_examples=40, deadline=None)
@given(groups())
def test_each_active_task_is_assigned_exactly_once(case) -> None:
    members, subs, cfg = case
    result = assign_tasks(members, subs, cfg)
    counts = Counter(t for a in result.values() for t in a.active)
    assert set(counts) == set(all_tasks(subs))
    assert all(c == 1 for c in counts.values())
    assert set(result) == set(members)


@settings(max_examples=40, deadline=None)
@given(groups())
def test_standby_and_warmup_never_share_a_process_with_the_task_active(case) -> None:
    members, subs, cfg = case
    result = assign_tasks(members, subs, cfg)
    copies: dict[str, Counter[TaskId]] = {}
    for m, a in result.items():
        pid = members[m].process_id
        copies.setdefault(pid, Counter()).update(a.active | a.standby | a.warmup)
        assert not a.standby & a.active and not a.warmup & a.active and not a.standby & a.warmup
    for c in copies.values():
        assert all(n == 1 for n in c.values()), "a process holds two copies of one task"
    stateless = {t for t in all_tasks(subs) if not subs[t[0]].stateful}
    for a in result.values():
        assert not (a.standby | a.warmup) & stateless
    assert sum(len(a.warmup) for a in result.values()) <= cfg.max_warmup_replicas


@settings(max_examples=40, deadline=None)
@given(groups())
def test_standby_replicas_reach_the_configured_count_when_processes_allow(case) -> None:
    members, subs, cfg = case
    result = assign_tasks(members, subs, cfg)
    n_procs = len({s.process_id for s in members.values()})
    standbys = Counter(t for a in result.values() for t in a.standby)
    warmups = Counter(t for a in result.values() for t in a.warmup)
    for t in all_tasks(subs):
        if subs[t[0]].stateful:
            want = min(cfg.num_standby_replicas, n_procs - 1 - warmups[t])
            assert standbys[t] == want


@settings(max_examples=40, deadline=None)
@given(groups(one_member_per_process=True))
def test_active_tasks_are_balanced_without_warmups(case) -> None:
    members, subs, _ = case
    result = assign_tasks(members, subs, NO_WARMUP)
    n = len(members)
    for stateful in (True, False):
        kind = [t for t in all_tasks(subs) if subs[t[0]].stateful == stateful]
        quota = -(-len(kind) // n)
        for a in result.values():
            assert len(a.active & set(kind)) <= quota


@settings(max_examples=40, deadline=None)
@given(groups())
def test_assignment_is_stable_when_nothing_changes(case) -> None:
    members, subs, cfg = case
    cfg = StreamsAssignmentConfig(cfg.num_standby_replicas, 0)
    first = assign_tasks(members, subs, cfg)
    again = assign_tasks(with_previous(members, first), subs, cfg)
    assert again == first


@settings(max_examples=40, deadline=None)
@given(groups(one_member_per_process=True), st.booleans())
def test_one_member_joining_moves_only_its_share_to_it(case, stateful) -> None:
    members, subs, _ = case
    subs = {s: SubtopologySpec(spec.partitions, stateful) for s, spec in subs.items()}
    first = assign_tasks({m: StreamsMemberSpec(s.process_id) for m, s in members.items()}, subs, NO_WARMUP)
    grown = with_previous(members, first) | {"new": StreamsMemberSpec("p-new")}
    second = assign_tasks(grown, subs, NO_WARMUP)
    moved = {t for m, a in second.items() if m != "new" for t in a.active - first[m].active}
    assert not moved, "a task moved between two members that were both already there"
    total = len(all_tasks(subs))
    assert len(second["new"].active) <= -(-total // len(grown))


@settings(max_examples=40, deadline=None)
@given(groups(one_member_per_process=True), st.booleans(), st.data())
def test_one_member_leaving_moves_only_its_tasks(case, stateful, data) -> None:
    members, subs, _ = case
    subs = {s: SubtopologySpec(spec.partitions, stateful) for s, spec in subs.items()}
    first = assign_tasks({m: StreamsMemberSpec(s.process_id) for m, s in members.items()}, subs, NO_WARMUP)
    if len(members) < 2:
        return
    leaver = data.draw(st.sampled_from(sorted(members)))
    rest = {m: s for m, s in with_previous(members, first).items() if m != leaver}
    second = assign_tasks(rest, subs, NO_WARMUP)
    for m, a in second.items():
        assert first[m].active <= a.active, "a remaining member lost a task"
    assert {t for m, a in second.items() for t in a.active - first[m].active} == first[leaver].active


def test_stateful_task_moving_to_a_new_process_warms_up_there_first() -> None:
    subs = {"s0": SubtopologySpec(4, stateful=True)}
    old = assign_tasks({"a": StreamsMemberSpec("pa")}, subs)
    assert old["a"].active == {("s0", p) for p in range(4)}
    members = {"a": StreamsMemberSpec("pa", old["a"].active), "b": StreamsMemberSpec("pb")}
    cfg = StreamsAssignmentConfig(max_warmup_replicas=2)
    warming = assign_tasks(members, subs, cfg)
    assert warming["a"].active == old["a"].active, "the task left its state before the warm-up caught up"
    assert len(warming["b"].warmup) == 2 and not warming["b"].active
    # b reports it caught up on its warm-ups: they become active there.
    lagless = {t: 100 for t in warming["b"].warmup}
    members = {
        "a": StreamsMemberSpec("pa", warming["a"].active),
        "b": StreamsMemberSpec("pb", warmup=warming["b"].warmup, task_offsets=lagless, task_end_offsets=lagless),
    }
    moved = assign_tasks(members, subs, cfg)
    assert moved["b"].active == warming["b"].warmup and not moved["b"].warmup
    assert len(moved["a"].active) == 2


def test_stateless_task_moves_without_warmup() -> None:
    subs = {"s0": SubtopologySpec(4, stateful=False)}
    old = assign_tasks({"a": StreamsMemberSpec("pa")}, subs)
    members = {"a": StreamsMemberSpec("pa", old["a"].active), "b": StreamsMemberSpec("pb")}
    result = assign_tasks(members, subs)
    assert len(result["b"].active) == 2 and not result["b"].warmup


def test_active_task_prefers_the_caught_up_standby_when_its_owner_leaves() -> None:
    subs = {"s0": SubtopologySpec(2, stateful=True)}
    members = {
        "b": StreamsMemberSpec("pb", standby=frozenset({("s0", 0)})),
        "c": StreamsMemberSpec("pc", standby=frozenset({("s0", 1)})),
    }
    result = assign_tasks(members, subs, StreamsAssignmentConfig(num_standby_replicas=1))
    assert result["b"].active == {("s0", 0)} and result["c"].active == {("s0", 1)}
    assert result["b"].standby == {("s0", 1)} and result["c"].standby == {("s0", 0)}


def test_members_of_one_process_share_its_load() -> None:
    subs = {"s0": SubtopologySpec(6, stateful=False)}
    members = {"a1": StreamsMemberSpec("pa"), "a2": StreamsMemberSpec("pa"), "b": StreamsMemberSpec("pb")}
    result = assign_tasks(members, subs)
    assert sorted(len(a.active) for a in result.values()) == [2, 2, 2]


def test_a_standby_placed_past_the_quota_stays_with_its_holder_when_nothing_changes() -> None:
    """Two processes and one standby: process p1's three members must hold 20 copies, past the per-member
    quota of 6. A rerun with nothing changed used to swap two standbys between p1's members (found by
    `test_assignment_is_stable_when_nothing_changes`)."""
    def member(pid: str, active: frozenset = frozenset(), standby: frozenset = frozenset()) -> StreamsMemberSpec:
        return StreamsMemberSpec(pid, active, standby, frozenset())

    members = {f"m{i}": member("p0" if i % 2 == 0 else "p1") for i in range(7)}
    members["m1"] = member("p1", frozenset({("s1", 0), ("s1", 1), ("s1", 2)}), frozenset({("s2", 10)}))
    subs = {"s0": SubtopologySpec(0, False), "s1": SubtopologySpec(8, True), "s2": SubtopologySpec(12, True)}
    cfg = StreamsAssignmentConfig(1, 0)
    first = assign_tasks(members, subs, cfg)
    assert max(len(a.active) + len(a.standby) for m, a in first.items() if members[m].process_id == "p1") > 6
    assert assign_tasks(with_previous(members, first), subs, cfg) == first


def test_a_member_forced_past_its_quota_keeps_its_standbys_when_nothing_changes() -> None:
    """Two standbys, five members on four processes (p0 has two), 15 copies: a quota of 3 per member, and m2
    must take a fourth copy. A rerun with the first result fed back gave m2 back ('s1', 0) and ('s1', 1) within
    the quota and moved ('s1', 2) to m1 (found by `test_assignment_is_stable_when_nothing_changes`)."""
    members = {f"m{i}": StreamsMemberSpec(f"p{i % 4}") for i in range(5)}
    members["m2"] = StreamsMemberSpec("p2", standby=frozenset({("s1", 2)}))
    members["m3"] = StreamsMemberSpec("p3", frozenset({("s1", 2)}), frozenset({("s0", 0), ("s1", 3)}))
    subs = {"s0": SubtopologySpec(3, False), "s1": SubtopologySpec(4, True), "s2": SubtopologySpec(0, False)}
    cfg = StreamsAssignmentConfig(2, 0)
    first = assign_tasks(members, subs, cfg)
    assert len(first["m2"].active) + len(first["m2"].standby) == 4
    assert assign_tasks(with_previous(members, first), subs, cfg) == first
