"""The fault suite's short run: every fault kind once against real processes, with consumer, share and streams
members side by side, and not one violation.

Members: 2 consumer, 2 share, 2 streams (the command's default is 4, 2, 2; fewer processes keep the run about a
minute on a loaded machine). The first cycle aims its member faults at each member kind in turn, so every kind
of member is hit at least once.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from groupcoord.faults.nemesis import Fault
from groupcoord.faults.run import Options, figures, run


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_short_fault_run_injects_every_fault_kind_into_every_member_kind_and_finds_no_violation(
        tmp_path: Path) -> None:
    out = io.StringIO()
    report = run(Options(seed=7, steps=len(Fault), members=2, share_members=2, streams_members=2,
                         converge_timeout_s=30.0, workdir=tmp_path, stop_on_violation=True), out=out)
    text = out.getvalue() + "\n" + figures(report)
    f = report.findings
    assert f.acknowledged_commits > 0 and f.records_accepted > 0 and f.task_intervals > 0, text
    assert report.violations == 0, text
    assert set(report.faults) == {f.value for f in Fault}, text
    assert set(report.member_faults) == {"consumer", "share", "streams"}, text
