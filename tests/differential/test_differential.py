"""Kafka's own group coordinator as the oracle: every scenario script is played against the real Kafka 4.4
broker and against groupcoord, and the normalised responses must agree field by field, except for the
differences listed in known_differences.py (each with its reason, and in the README), which are pinned so a
change either way is noticed."""

from __future__ import annotations

import pytest

from tests.differential import scenarios  # noqa: F401 - registers the scenarios
from tests.differential.conftest import DifferentialEnv
from tests.differential.harness import SCENARIOS, run_pair, trace_diffs
from tests.differential.known_differences import KNOWN


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_groupcoord_answers_as_kafka_does(name: str, differential_env: DifferentialEnv) -> None:
    env = differential_env
    kafka, ours = run_pair(SCENARIOS[name], [env.kafka, env.groupcoord], env.topics)
    compared, diffs = trace_diffs(kafka, ours)
    assert compared > 0
    pinned = [(path, theirs, mine) for path, theirs, mine, _ in KNOWN.get(name, [])]
    assert diffs == pinned, f"{name}: differences changed\nkafka: {kafka.steps}\nours:  {ours.steps}"
