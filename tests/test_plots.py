"""The pictures are written and are pictures: PNG files with drawn content, from the commands users run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from groupcoord import plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_drawn_png(path: Path, min_bytes: int = 15_000) -> None:
    """A PNG of real size whose pixels are not one flat colour (a blank figure is a few kB and uniform)."""
    import matplotlib.image

    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path} is not a PNG"
    assert len(data) > min_bytes, f"{path} is only {len(data)} bytes"
    pixels = matplotlib.image.imread(path)
    colours = np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)
    assert len(colours) > 20, f"{path} has only {len(colours)} colours"


def test_simulate_plot_writes_the_rebalance_timelines_as_a_png(tmp_path: Path) -> None:
    out = tmp_path / "figures" / "timelines.png"
    result = subprocess.run([sys.executable, "-m", "groupcoord", "simulate", "--members", "4", "--partitions", "12",
                             "--plot", str(out)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "## Summary" in result.stdout and f"plot written to {out}" in result.stdout
    assert_drawn_png(out)


def test_simulate_plot_to_an_unwritable_place_is_one_error_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = subprocess.run([sys.executable, "-m", "groupcoord", "simulate", "--members", "2", "--partitions", "4",
                             "--plot", str(blocker / "x.png")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout.strip().splitlines()[-1].startswith("error: cannot write")
    assert "Traceback" not in result.stderr


def test_simulated_ownership_ends_with_every_member_holding_its_share() -> None:
    """What the plot draws: the last sample per member is its final count, and they add up to the topic."""
    from groupcoord.coordinator.simulation import simulate_scale_up

    t = simulate_scale_up(4, 1000, False, partitions=12)
    last = {member: count for _, member, count in t.ownership}
    assert last == {1: 3, 2: 3, 3: 3, 4: 3}
    assert min(time for time, _, _ in t.ownership) == -200  # recording starts at member N-1's join


def test_demo_and_bench_figures_are_written(tmp_path: Path) -> None:
    series = {"d1": [(1.0, 500), (6.0, 300), (11.0, 900)], "d2": [(1.0, 450), (6.0, 350), (11.0, 200)]}
    assert_drawn_png(plots.demo_member_lag(series, [(4.0, 7.5)], tmp_path / "lag.png"))
    assert_drawn_png(plots.demo_lag_spread([(1.0, 50, 400), (6.0, 30, 380), (11.0, 700, 900)],
                                           tmp_path / "spread.png"))
    assert_drawn_png(plots.demo_rebalances([("epoch 2: d1 d2 joined", 1.0, 3.5), ("epoch 3: d3 joined", 9.0, 9.8)],
                                           tmp_path / "rebalances.png"), min_bytes=10_000)
    assert_drawn_png(plots.bench_medians([("uniform | full", 0.5), ("range | full", 3.4), ("lag | fresh", 140.0)],
                                         "medians", tmp_path / "bench.png"), min_bytes=10_000)
    assert_drawn_png(plots.bench_phases([("range | form", {"join": 400.0, "assign": 30.0, "sync": 90.0}),
                                         ("range | +1", {"join": 200.0, "assign": 20.0, "sync": 60.0})],
                                        "phases", tmp_path / "phases.png"), min_bytes=10_000)
