"""The fault suite's short run: every fault kind once against real processes, and not one violation.

Until the client releases its partitions on every error and keeps a client-side lease (issue 10), this
run finds violations (members that keep partitions after a stateless restart or a silent network path);
the figures printed on failure say which.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from groupcoord.faults.nemesis import Fault
from groupcoord.faults.run import Options, figures, run


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_short_fault_run_injects_every_fault_kind_and_finds_no_violation(tmp_path: Path) -> None:
    out = io.StringIO()
    report = run(Options(seed=7, steps=len(Fault), converge_timeout_s=30.0, workdir=tmp_path,
                         stop_on_violation=True), out=out)
    text = out.getvalue() + "\n" + figures(report)
    assert report.findings.acknowledged_commits > 0, text
    assert report.violations == 0, text
    assert set(report.faults) == {f.value for f in Fault}, text
