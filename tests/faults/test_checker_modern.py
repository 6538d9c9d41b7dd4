"""The checker's share and streams properties on synthetic histories: each catches what it must, and a clean
history passes."""

from __future__ import annotations

from groupcoord.faults.checker import Event, Kind, check
from groupcoord.faults.checker_share import IntervalSet

Ranges = tuple[tuple[int, int, int], ...]


def acquired(t_sent: float, t: float, member: str, until: float, *ranges: tuple[int, int, int]) -> Event:
    return Event(t, Kind.ACQUIRED, member, t_sent=t_sent, role="share", ranges=ranges, until=until)


def ack_sent(t: float, member: str, *ranges: tuple[int, int, int], how: str = "accept") -> Event:
    return Event(t, Kind.ACK_SENT, member, detail=how, role="share", ranges=ranges)


def acked(t_sent: float, t: float, member: str, *ranges: tuple[int, int, int], how: str = "accept") -> Event:
    return Event(t, Kind.ACKED, member, t_sent=t_sent, detail=how, role="share", ranges=ranges)


def share_offsets(t: float, *ranges: tuple[int, int, int]) -> Event:
    return Event(t, Kind.SHARE_OFFSETS, role="share", ranges=ranges)


def task(kind: Kind, t: float, member: str, *ps: int) -> Event:
    return Event(t, kind, member, ps, role="streams")


def clean_share_history() -> list[Event]:
    """a takes 0..9 and accepts them; b takes 10..19, releases them, a takes them again after; the read-back
    shows every accepted offset delivered."""
    return [
        acquired(1.00, 1.01, "s0.1", 3.00, (0, 0, 9)),
        acquired(1.02, 1.03, "s1.1", 3.02, (0, 10, 19)),
        ack_sent(1.10, "s0.1", (0, 0, 9)),
        acked(1.10, 1.12, "s0.1", (0, 0, 9)),
        ack_sent(1.20, "s1.1", (0, 10, 19), how="release"),
        acked(1.20, 1.22, "s1.1", (0, 10, 19), how="release"),
        acquired(1.30, 1.31, "s0.1", 3.30, (0, 10, 19)),
        ack_sent(1.40, "s0.1", (0, 10, 19)),
        acked(1.40, 1.42, "s0.1", (0, 10, 19)),
        share_offsets(2.0, (0, 20, 20)),
    ]


def kinds(events: list[Event]) -> list[str]:
    return [v.kind for v in check(events).violations]


def test_a_clean_share_history_has_no_violation_and_counts_records() -> None:
    findings = check(clean_share_history())
    assert findings.violations == []
    assert findings.records_acquired == 30
    assert findings.records_accepted == 20


def test_a_record_acquired_by_two_members_under_unexpired_locks_is_a_double_acquire() -> None:
    history = [acquired(1.00, 1.01, "s0.1", 3.00, (0, 0, 9)), acquired(1.50, 1.51, "s1.1", 3.50, (0, 5, 14))]
    (v,) = check(history).violations
    assert v.kind == "share_double_acquire"
    assert "partition 0 offsets 5..9" in v.detail and "s0.1" in v.detail and "s1.1" in v.detail


def test_a_record_acquired_again_after_the_first_lock_ran_out_or_was_acknowledged_is_no_double_acquire() -> None:
    expired = [acquired(1.00, 1.01, "s0.1", 3.00, (0, 0, 9)), acquired(3.01, 3.02, "s1.1", 5.0, (0, 0, 9))]
    released = [acquired(1.00, 1.01, "s0.1", 3.00, (0, 0, 9)), ack_sent(1.5, "s0.1", (0, 0, 9), how="release"),
                acquired(1.60, 1.61, "s1.1", 3.6, (0, 0, 9))]  # the release's reply never came: still done
    died = [acquired(1.00, 1.01, "s0.1", 3.00, (0, 0, 9)), Event(1.5, Kind.DIED, "s0.1", role="share"),
            acquired(1.60, 1.61, "s1.1", 3.6, (0, 0, 9))]
    assert kinds(expired) == kinds(released) == kinds(died) == []


def test_a_short_hold_inside_another_members_hold_is_a_double_acquire() -> None:
    history = [acquired(1.00, 1.01, "s0.1", 3.00, (0, 0, 9)), ack_sent(2.5, "s0.1", (0, 0, 9)),
               acquired(1.60, 1.61, "s1.1", 3.6, (0, 5, 5)), ack_sent(1.617, "s1.1", (0, 5, 5))]
    assert kinds(history) == ["share_double_acquire"]


def test_a_double_acquire_within_the_clock_margin_is_not_reported() -> None:
    history = [acquired(1.00, 1.01, "s0.1", 3.00, (0, 0, 9)), acquired(2.97, 2.98, "s1.1", 5.0, (0, 0, 9))]
    assert kinds(history) == []


def test_an_accepted_record_acquired_again_is_redelivered() -> None:
    history = [*clean_share_history(), acquired(2.5, 2.51, "s1.1", 4.5, (0, 8, 12))]
    assert kinds(history) == ["share_redelivered"]
    assert "8..12" in check(history).violations[0].detail


def test_an_acquisition_sent_before_the_accept_was_answered_is_not_a_redelivery() -> None:
    history = [acquired(1.00, 1.01, "s0.1", 1.5, (0, 0, 9)), ack_sent(1.4, "s0.1", (0, 0, 9)),
               acquired(1.45, 1.6, "s1.1", 3.45, (0, 0, 9)), acked(1.4, 1.7, "s0.1", (0, 0, 9))]
    assert kinds(history) == []  # which came first at the coordinator, the clients cannot tell


def test_two_successful_accepts_of_one_record_are_a_double_accept() -> None:
    history = [acquired(1.00, 1.01, "s0.1", 3.00, (0, 0, 9)), ack_sent(1.1, "s0.1", (0, 0, 9)),
               acked(1.1, 1.2, "s0.1", (0, 0, 9)), acked(1.3, 1.4, "s1.1", (0, 9, 9))]
    assert kinds(history) == ["share_double_accept"]


def test_a_read_back_that_forgot_an_accepted_record_is_a_lost_ack() -> None:
    short = [*clean_share_history()[:-1], share_offsets(2.0, (0, 10, 15))]  # 15..19 accepted, "never delivered"
    (v,) = check(short).violations
    assert v.kind == "share_lost_ack" and "offset 19" in v.detail
    gone = [*clean_share_history()[:-1], share_offsets(2.0)]
    assert kinds(gone) == ["share_lost_ack"]
    back = [*clean_share_history(), share_offsets(2.5, (0, 12, 20))]  # the start offset went back from 20
    assert kinds(back) == ["share_lost_ack"]


def test_an_accept_answered_after_the_read_back_was_sent_is_not_expected_in_it() -> None:
    history = [acquired(1.00, 1.01, "s0.1", 3.00, (0, 0, 9)), ack_sent(1.1, "s0.1", (0, 0, 9)),
               acked(1.1, 2.2, "s0.1", (0, 0, 9)), share_offsets(2.0, (0, 0, 0))]
    assert kinds(history) == []


def test_accepts_forgotten_by_a_stateless_restart_are_by_design_not_violations() -> None:
    history = [*clean_share_history(), Event(3.0, Kind.STATE_WIPED),
               acquired(3.5, 3.51, "s1.1", 5.5, (0, 0, 19)), share_offsets(4.0, (0, 0, 20))]
    findings = check(history)
    assert findings.violations == []
    assert findings.share_lost_by_design == 20


def test_locks_forgotten_by_a_stateless_restart_are_no_double_acquire() -> None:
    history = [acquired(1.00, 1.01, "s0.1", 3.00, (0, 0, 9)), Event(1.5, Kind.STATE_WIPED),
               acquired(1.60, 1.61, "s1.1", 3.6, (0, 0, 9))]
    assert kinds(history) == []


def test_a_streams_task_active_on_two_members_at_once_is_a_violation() -> None:
    history = [task(Kind.ASSIGNED, 1.0, "k0.1", 3), task(Kind.ASSIGNED, 2.0, "k1.1", 3),
               task(Kind.REVOKED, 2.5, "k0.1", 3)]
    (v,) = check(history).violations
    assert v.kind == "streams_double_active" and "task 3" in v.detail and "500 ms" in v.detail


def test_a_streams_task_handed_over_cleanly_is_no_violation() -> None:
    history = [task(Kind.ASSIGNED, 1.0, "k0.1", 3), task(Kind.REVOKED, 1.9, "k0.1", 3),
               task(Kind.ASSIGNED, 2.0, "k1.1", 3), task(Kind.LOST, 3.0, "k1.1", 3),
               task(Kind.ASSIGNED, 4.0, "k0.1", 3)]
    findings = check(history)
    assert findings.violations == [] and findings.task_intervals == 3


def test_a_stopped_streams_member_that_acts_after_resuming_owns_its_task_again() -> None:
    base = [task(Kind.ASSIGNED, 1.0, "k0.1", 3), Event(2.0, Kind.STOPPED, "k0.1", role="streams"),
            task(Kind.ASSIGNED, 5.0, "k1.1", 3), Event(8.0, Kind.RESUMED, "k0.1", role="streams")]
    assert kinds([*base, task(Kind.LOST, 8.01, "k0.1", 3)]) == []
    acted = Event(8.005, Kind.COMMIT, "k0.1", (3,), t_sent=8.005, role="streams")
    assert kinds([*base, acted, task(Kind.LOST, 8.01, "k0.1", 3)]) == ["streams_double_active"]


def test_a_consumer_partition_and_a_streams_task_with_one_number_do_not_conflict() -> None:
    history = [Event(1.0, Kind.ASSIGNED, "m0.1", (3,)), task(Kind.ASSIGNED, 1.5, "k0.1", 3)]
    assert kinds(history) == []


def test_interval_set_merges_neighbours_and_finds_overlaps() -> None:
    s = IntervalSet()
    for a, b in [(10, 19), (0, 4), (5, 9), (30, 39)]:
        s.add(a, b)
    assert (s.firsts, s.lasts) == ([0, 30], [19, 39])
    assert s.overlap(19, 25) == (0, 19) and s.overlap(20, 29) is None and s.overlap(25, 30) == (30, 39)
    assert len(s) == 30 and s.maximum() == 39
