"""The Kafka-backed mode's short fault run: 3 real Kafka brokers, 3 groupcoord instances sharing a state topic,
consumer, classic, share and streams members; every fault kind of the mode once, and not one violation, with
every acknowledged commit and share acknowledgement read back by a fresh instance at the end.

Sessions of 2 s (the members' and the instances') and a broker session of 3 s (Kafka's is 9 s: how long a killed
broker's partitions, the coordinators' group coordinator among them, stay leaderless) keep it short on a loaded
2-core machine; each step may converge within `KafkaTiming.converge_bound_s`, derived from those timeouts. The
wall time of each phase is printed (`pytest -s`, or in the failure message).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from groupcoord.faults.cluster import Timing
from groupcoord.faults.kafka_cluster import KafkaTiming
from groupcoord.faults.nemesis_kafka import KAFKA_MODE_FAULTS
from groupcoord.faults.run import Options, figures, run


@pytest.mark.timeout(600)
def test_short_kafka_mode_run_injects_every_fault_kind_and_loses_no_acknowledgement(tmp_path: Path) -> None:
    out = io.StringIO()
    kafka = KafkaTiming(state_session_timeout_ms=2000, broker_session_timeout_ms=3000)
    report = run(Options(mode="kafka", seed=7, steps=len(KAFKA_MODE_FAULTS), members=2, classic_members=2,
                         share_members=1, streams_members=2, faults=KAFKA_MODE_FAULTS,
                         timing=Timing(session_timeout_ms=2000), kafka=kafka, workdir=tmp_path,
                         stop_on_violation=True), out=out)
    text = out.getvalue() + "\n" + figures(report)
    print(text)
    f = report.findings
    assert f.acknowledged_commits > 0 and f.records_accepted > 0 and f.task_intervals > 0, text
    assert report.violations == 0, text
    assert set(report.faults) == {k.value for k in KAFKA_MODE_FAULTS}, text
    assert "takeover after instance-kill-9" in report.kafka_figures, text
