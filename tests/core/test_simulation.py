"""KIP-1263's "Impact on Rebalance Times", checked against the deterministic simulation of the core."""

from __future__ import annotations

import pytest

from groupcoord.coordinator.simulation import main, simulate_scale_up


def test_with_interval_0_the_scale_up_completes_one_heartbeat_after_member_n_joins() -> None:
    timeline = simulate_scale_up(10, 0, offload=False)
    assert timeline.completion_ms == 5000
    assert timeline.events[-1].text.endswith("The rebalance has completed.")
    assert timeline.events[-1].text.startswith("Member 10 heartbeats, gaining the revoked partitions")


def test_with_interval_1000_the_scale_up_takes_one_heartbeat_interval_longer() -> None:
    timeline = simulate_scale_up(10, 1000, offload=False)
    assert timeline.completion_ms == 10_000
    texts = [e.text for e in timeline.events]
    assert "Member 10 joins the group. No new target assignment yet." in texts
    assert any(e.time_ms == 5000 and "some but not all" in e.text for e in timeline.events)


@pytest.mark.parametrize("previous_join_ms", [-4_900, -2_500, -1_000, -800, -200, -1])
@pytest.mark.parametrize(("n_members", "partitions"), [(3, 7), (5, 60), (10, 120), (20, 500)])
def test_with_interval_1000_the_scale_up_never_takes_more_than_one_extra_heartbeat_interval(
        previous_join_ms: int, n_members: int, partitions: int) -> None:
    batched = simulate_scale_up(n_members, 1000, False, partitions=partitions, previous_join_ms=previous_join_ms)
    unbatched = simulate_scale_up(n_members, 0, False, partitions=partitions, previous_join_ms=previous_join_ms)
    assert unbatched.completion_ms == 5000
    assert 5000 <= batched.completion_ms <= 10_000


def test_offload_leaves_the_large_group_rebalance_time_unchanged() -> None:
    assert simulate_scale_up(10, 0, offload=True).completion_ms == simulate_scale_up(10, 0, False).completion_ms == 5000


def test_offload_costs_a_single_member_group_one_heartbeat() -> None:
    without = simulate_scale_up(1, 0, offload=False)
    with_offload = simulate_scale_up(1, 0, offload=True)
    assert without.completion_ms == 0
    assert with_offload.completion_ms == without.completion_ms + 5000


@pytest.mark.parametrize("n_members", [1, 2])
def test_batching_does_not_slow_down_groups_of_one_or_two_members(n_members: int) -> None:
    assert simulate_scale_up(n_members, 1000, False).completion_ms == \
        simulate_scale_up(n_members, 0, False).completion_ms


def test_completion_scales_with_the_heartbeat_interval() -> None:
    assert simulate_scale_up(10, 0, False, heartbeat_ms=3000).completion_ms == 3000
    assert simulate_scale_up(10, 1000, False, heartbeat_ms=3000).completion_ms == 6000


def test_the_simulation_is_deterministic() -> None:
    assert simulate_scale_up(10, 1000, True) == simulate_scale_up(10, 1000, True)


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ValueError):
        simulate_scale_up(0, 0, False)
    with pytest.raises(ValueError):
        simulate_scale_up(10, 0, False, previous_join_ms=-6000)


def test_main_prints_the_kip_tables_and_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.count("| Time") == 6
    for row in ("| 10 members | 0 ms                   | off     | +5,000 ms           |",
                "| 10 members | 1,000 ms               | off     | +10,000 ms          |",
                "| 10 members | 0 ms                   | on      | +5,000 ms           |",
                "| 1 member   | 0 ms                   | off     | +0 ms               |",
                "| 1 member   | 0 ms                   | on      | +5,000 ms           |"):
        assert row in out


def test_main_reports_bad_arguments_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--members", "0"]) == 2
    assert capsys.readouterr().out.startswith("error:")


def test_main_accepts_the_separator_the_cli_passes_through(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--", "--members", "3", "--partitions", "9"]) == 0
    assert "| 3 members | 0 ms" in capsys.readouterr().out
