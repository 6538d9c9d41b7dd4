"""Unavailability windows and takeover times, from probe histories (the Kafka-backed suite's figures)."""

from __future__ import annotations

import math

from groupcoord.faults.availability import by_fault, kafka_figures, percentile, takeovers, windows
from groupcoord.faults.history import Event, Kind


def probe(t: float, group: str, answer: str) -> Event:
    return Event(t, Kind.PROBE, group, role="probe", detail=answer)


def test_a_window_runs_from_the_first_failed_probe_to_the_next_answer_and_knows_whether_the_group_moved() -> None:
    found = windows([probe(1.0, "consumer", "ok a:1"), probe(2.0, "consumer", "error 16"),
                     probe(2.5, "consumer", "error 14"), probe(4.0, "consumer", "ok b:2"),
                     probe(5.0, "share", "ok a:1"), probe(6.0, "share", "error 15"), probe(6.5, "share", "ok a:1")])
    assert [(w.group, w.seconds, w.moved) for w in found] == [("consumer", 2.0, True), ("share", 0.5, False)]


def test_a_group_still_failing_at_the_end_has_an_open_window() -> None:
    (w,) = windows([probe(1.0, "streams", "ok a:1"), probe(2.0, "streams", "error none")])
    assert math.isinf(w.end) and w.before == "a:1"


def test_windows_belong_to_the_fault_of_the_step_in_which_they_began() -> None:
    found = windows([probe(0.5, "classic", "ok a:1"), probe(1.5, "classic", "error 16"),
                     probe(3.0, "classic", "ok b:2"), probe(6.0, "classic", "error 16"),
                     probe(7.0, "classic", "ok b:2")])
    grouped = by_fault(found, [(1.0, "instance-kill-9"), (5.0, "broker-kill-9")])
    assert {k: len(v) for k, v in grouped.items()} == {"instance-kill-9": 1, "broker-kill-9": 1}


def test_takeover_counts_from_the_kill_to_the_first_answer_from_another_instance() -> None:
    kill = Event(10.0, Kind.NEMESIS, role="nemesis", detail="instance-kill-9 a:1")
    history = [probe(1.0, "consumer", "ok a:1"), probe(1.0, "share", "ok b:2"), kill,
               probe(10.2, "consumer", "error none"), probe(13.5, "consumer", "error 14"),
               probe(14.0, "consumer", "ok c:3")]
    assert takeovers(history) == [("consumer", 4.0)]


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.99), percentile(values, 1.0)) == (50.0, 99.0, 100.0)


def test_a_takeover_slower_than_the_session_plus_the_slowest_replay_is_reported_over_the_bound() -> None:
    kill = Event(10.0, Kind.NEMESIS, role="nemesis", detail="instance-kill-9 a:1")
    history = [probe(1.0, "consumer", "ok a:1"), probe(1.0, "share", "ok a:1"), kill,
               probe(10.2, "consumer", "error none"), probe(14.0, "consumer", "ok c:3"),
               probe(10.3, "share", "error none"), probe(22.0, "share", "ok b:2")]
    text = kafka_figures(history, [(10.0, "instance-kill-9")], {"instance-kill-9": 1},
                         replays=[(0, 100, 0.5), (1, 900, 1.0)], session_ms=3000)
    assert "over the bound of 4.00 s (the session + the slowest replay): 1 (12.00 s)" in text, text
