"""`groupcoord demo --quick`, the README's main command in its short form, run end to end as a user would.

With ``--steady 2``: the drivers run 2 s between membership changes instead of 8 (and the share act produces
for 2 s). What the test checks happens at the changes, not between them; the steady phases are for a person
watching the tables."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(330)]


def test_quick_demo_finishes_on_its_own_with_every_record_once_and_leaves_nothing_running(tmp_path: Path) -> None:
    output = tmp_path / "demo-output"
    result = subprocess.run([sys.executable, "-m", "groupcoord", "demo", "--quick", "--steady", "2",
                             "--output", str(output)],
                            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    shown = result.stdout[-4000:] + "\n--- stderr\n" + result.stderr[-4000:]
    assert result.returncode == 0, shown

    summary = re.search(r"records produced (\d+), processed (\d+), missing (\d+), duplicates (\d+)", result.stdout)
    assert summary is not None, shown
    produced, processed, missing, duplicates = map(int, summary.groups())
    assert produced > 0 and processed == produced and missing == 0 and duplicates == 0, shown
    # d1 and d2 join, d3 joins, d1 leaves: a table per completed rebalance, then the lag comparison
    assert len(re.findall(r"rebalance to epoch \d+ done", result.stdout)) >= 3, shown
    assert "lag-sticky mean" in result.stdout and "range on the same snapshots" in result.stdout, shown
    assert re.search(r"d3 +\d+ +\d+", result.stdout), shown  # d3 appears in a member table
    share = re.search(r"share group: records produced (\d+), processed (\d+), missing (\d+), duplicates (\d+); "
                      r"every driver busy: (\w+)", result.stdout)
    assert share is not None, shown
    assert int(share.group(1)) > 0 and share.group(3) == "0" and share.group(5) == "True", shown

    processes = subprocess.run(["ps", "-A", "-o", "args="], capture_output=True, text=True, check=True).stdout
    assert [line for line in processes.splitlines() if str(output) in line] == []
