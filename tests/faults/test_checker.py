"""The fault suite's checker, on synthetic histories: it catches what it must and passes a clean history."""

from __future__ import annotations

from groupcoord.faults.checker import Event, Kind, OwnershipState, check


def assigned(t: float, member: str, *ps: int) -> Event:
    return Event(t, Kind.ASSIGNED, member, ps)


def revoked(t: float, member: str, *ps: int) -> Event:
    return Event(t, Kind.REVOKED, member, ps)


def lost(t: float, member: str, *ps: int) -> Event:
    return Event(t, Kind.LOST, member, ps)


def commit(t_sent: float, t_ack: float, member: str, offsets: dict[int, int], tried: tuple[int, ...] = ()) -> Event:
    return Event(t_ack, Kind.COMMIT, member, tried or tuple(offsets), tuple(sorted(offsets.items())), t_sent)


def fetched(t: float, offsets: dict[int, int]) -> Event:
    return Event(t, Kind.OFFSETS_FETCHED, offsets=tuple(sorted(offsets.items())))


def clean_history() -> list[Event]:
    """Two members hand partition 0 over properly; every acknowledged commit is in the fetch."""
    return [
        assigned(1.0, "a.1", 0, 1),
        commit(1.1, 1.2, "a.1", {0: 110, 1: 110}),
        revoked(2.0, "a.1", 0),
        assigned(2.5, "b.1", 0),
        commit(2.6, 2.7, "b.1", {0: 260}),
        commit(2.8, 2.9, "a.1", {1: 280}),
        fetched(3.0, {0: 260, 1: 280}),
    ]


def test_a_clean_history_has_no_violation() -> None:
    findings = check(clean_history())
    assert findings.violations == []
    assert findings.acknowledged_commits == 4
    assert findings.ownership_intervals == 3


def test_two_members_owning_a_partition_at_once_is_double_ownership() -> None:
    history = clean_history()
    history[2] = revoked(2.7, "a.1", 0)  # a releases only after b got it at 2.5
    findings = check(history)
    assert [v.kind for v in findings.violations] == ["double_ownership"]
    assert "partition 0" in findings.violations[0].detail
    assert "200 ms" in findings.violations[0].detail


def test_a_member_that_never_releases_owns_until_the_end() -> None:
    findings = check([assigned(1.0, "a.1", 3), assigned(5.0, "b.1", 3)])
    assert [v.kind for v in findings.violations] == ["double_ownership"]
    assert "until the end" in findings.violations[0].detail


def test_ownership_ends_when_the_process_dies() -> None:
    history = [assigned(1.0, "a.1", 0), Event(2.0, Kind.DIED, "a.1"), assigned(2.1, "a.2", 0),
               assigned(3.0, "b.1", 1)]
    assert check(history).violations == []


def test_a_stopped_member_owns_nothing_while_stopped_and_after_resuming_only_if_it_acts() -> None:
    base = [assigned(1.0, "a.1", 0), Event(2.0, Kind.STOPPED, "a.1"), assigned(5.0, "b.1", 0),
            Event(8.0, Kind.RESUMED, "a.1")]
    quiet = [*base, lost(8.01, "a.1", 0)]
    assert check(quiet).violations == []
    acted = [*base, commit(8.005, 8.02, "a.1", {}, tried=(0,)), lost(8.01, "a.1", 0)]
    findings = check(acted)
    assert [v.kind for v in findings.violations] == ["double_ownership"]


def test_an_acknowledged_commit_missing_from_the_fetch_is_lost() -> None:
    history = clean_history()
    history[-1] = fetched(3.0, {0: 260, 1: 110})  # the commit of 280, acknowledged at 2.9, is gone
    findings = check([*history, fetched(4.0, {0: 260, 1: 110})])
    assert [v.kind for v in findings.violations] == ["lost_commit"]  # reported once, not per fetch
    assert "offset 280" in findings.violations[0].detail


def test_a_commit_acknowledged_after_the_fetch_was_sent_is_not_expected_in_it() -> None:
    history = [assigned(1.0, "a.1", 0), commit(1.1, 3.5, "a.1", {0: 110}), fetched(3.0, {0: -1})]
    assert check(history).violations == []


def test_commits_forgotten_by_a_stateless_restart_are_lost_by_design_not_violations() -> None:
    history = [
        assigned(1.0, "a.1", 0, 1),
        commit(1.1, 1.2, "a.1", {0: 110, 1: 110}),
        commit(1.9, 2.2, "a.1", {0: 190}),  # sent before the wipe, acknowledged after: the old era
        Event(2.0, Kind.STATE_WIPED),
        lost(2.5, "a.1", 0, 1),
        assigned(3.0, "a.1", 0),
        commit(3.1, 3.2, "a.1", {0: 310}),
        fetched(4.0, {0: 310}),
    ]
    findings = check(history)
    assert findings.violations == []
    assert findings.lost_by_design == 2
    missing = [*history[:-1], fetched(4.0, {0: -1})]
    assert [v.kind for v in check(missing).violations] == ["lost_commit"]


def test_a_timed_out_convergence_is_a_violation() -> None:
    findings = check([Event(1.0, Kind.NOT_CONVERGED, detail="step 3")])
    assert [v.kind for v in findings.violations] == ["not_converged"]


def test_ownership_state_converges_only_with_one_live_owner_per_partition() -> None:
    state = OwnershipState()
    for e in [assigned(1.0, "a.1", 0, 1), assigned(1.0, "b.1", 2), assigned(2.0, "b.1", 1)]:
        state.apply(e)
    assert not state.converged(["a.1", "b.1"], 3)  # partition 1 claimed twice
    state.apply(revoked(2.1, "a.1", 1))
    assert state.converged(["a.1", "b.1"], 3)
    assert not state.converged(["b.1"], 3)  # a.1 is dead or stopped: partition 0 has no live owner


def test_classic_members_are_checked_for_double_ownership_and_lost_commits_apart_from_consumer_members() -> None:
    def classic(e: Event) -> Event:
        return Event(e.t, e.kind, e.member, e.partitions, e.offsets, e.t_sent, role="classic")

    history = [
        assigned(1.0, "m0.1", 0),  # a consumer member owns partition 0 of the consumer group: no conflict
        classic(assigned(1.0, "c0.1", 0)),
        classic(assigned(1.5, "c1.1", 0)),  # a second classic member owns it at the same time
        classic(commit(1.6, 1.7, "c1.1", {0: 160})),
        fetched(2.0, {0: -1}),  # the consumer group's read-back knows nothing of the classic group's commits
        classic(fetched(2.0, {0: 100})),  # the classic group's read-back misses the acknowledged 160
    ]
    kinds = sorted((v.kind, v.detail.split(":")[0]) for v in check(history).violations)
    assert kinds == [("double_ownership", "classic partition 0"), ("lost_commit", "partition 0")]


def test_a_classic_members_commit_line_becomes_a_classic_event() -> None:
    from groupcoord.faults.cluster import member_event

    event = member_event("c4.1", "classic", {"ev": "commit", "ts": 1.0, "t": 1.1, "try": [3], "ok": {"3": 1000000}})
    assert event is not None and event.role == "classic" and event.offsets == ((3, 1000000),)
