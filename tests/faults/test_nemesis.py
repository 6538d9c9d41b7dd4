"""The nemesis's schedule is a function of the seed, and its first steps inject every fault kind."""

from __future__ import annotations

from groupcoord.faults.nemesis import Fault, schedule


def test_the_same_seed_gives_the_same_faults_targets_and_durations() -> None:
    a, b, c = schedule(3, 4, 3.0), schedule(3, 4, 3.0), schedule(4, 4, 3.0)
    assert [a(n) for n in range(1, 40)] == [b(n) for n in range(1, 40)]
    assert [a(n) for n in range(1, 40)] != [c(n) for n in range(1, 40)]


def test_the_first_steps_inject_every_fault_kind_once() -> None:
    step = schedule(11, 4, 3.0)
    assert {step(n).fault for n in range(1, len(Fault) + 1)} == set(Fault)


def test_pauses_and_silences_outlast_the_session() -> None:
    step = schedule(5, 4, 3.0)
    for n in range(1, 200):
        s = step(n)
        if s.fault in (Fault.COORDINATOR_PAUSE, Fault.MEMBER_PAUSE, Fault.PROXY_SILENCE):
            assert s.duration_s > 3.0
        assert 0 <= s.target < 4


def test_a_restricted_schedule_injects_only_the_kinds_asked_for() -> None:
    kinds = (Fault.PROXY_DROP, Fault.MEMBER_KILL)
    step = schedule(2, 4, 3.0, kinds)
    assert {step(n).fault for n in range(1, 50)} == set(kinds)


def test_the_first_cycle_aims_its_member_faults_at_every_member_kind() -> None:
    roles = ["consumer"] * 4 + ["share"] * 2 + ["streams"] * 2
    step = schedule(7, len(roles), 3.0, roles=roles)
    first = [step(n) for n in range(1, len(Fault) + 1)]
    hit = {roles[s.target] for s in first if not s.fault.startswith("coordinator")}
    assert hit == {"consumer", "share", "streams"}


def test_the_kafka_mode_first_cycle_injects_each_of_its_fault_kinds_once() -> None:
    from groupcoord.faults.nemesis_kafka import KAFKA_MODE_FAULTS, KAFKA_WEIGHTS, kafka_hold

    step = schedule(7, 7, 2.0, KAFKA_MODE_FAULTS, weights=KAFKA_WEIGHTS, holds=kafka_hold)
    first = [step(n).fault for n in range(1, len(KAFKA_MODE_FAULTS) + 1)]
    assert sorted(first) == sorted(KAFKA_MODE_FAULTS)
    assert {step(n).fault for n in range(1, 200)} == set(KAFKA_MODE_FAULTS)


def test_kafka_mode_cuts_and_pauses_outlast_the_coordinators_session_and_the_slow_link_delays_500_ms() -> None:
    from groupcoord.faults.nemesis_kafka import KAFKA_MODE_FAULTS, KAFKA_WEIGHTS, KafkaFault, kafka_hold

    step = schedule(3, 7, 2.0, KAFKA_MODE_FAULTS, weights=KAFKA_WEIGHTS, holds=kafka_hold)
    for n in range(1, 200):
        s = step(n)
        if s.fault in (KafkaFault.INSTANCE_PAUSE, KafkaFault.INSTANCE_KAFKA_CUT):
            assert s.duration_s > 2.0
        if s.fault is KafkaFault.INSTANCE_KAFKA_DELAY:
            assert s.delay_s == 0.5
