"""Invariants every server assignor keeps, checked on arbitrary groups (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assignors.api import GroupSpec, LagSnapshot, StaticTopicDescriber
from assignors.registry import get_server_assignor, server_assignor_names
from tests.assignors.strategies import check_valid, scenarios, shuffled

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = ["lag", "lag-sticky", "range", "uniform"]

Scenario = tuple[GroupSpec, StaticTopicDescriber, LagSnapshot]


def test_every_builtin_server_assignor_is_registered() -> None:
    assert server_assignor_names() == NAMES
    for name in NAMES:
        assert get_server_assignor(name).name == name


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(scenario=scenarios())
def test_each_subscribed_partition_is_assigned_once_to_a_subscriber(name: str, scenario: Scenario) -> None:
    group, topics, lag = scenario
    check_valid(group, topics, get_server_assignor(name).assign(group, topics, lag))


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(scenario=scenarios(), seed=st.integers(0, 2**32))
def test_result_does_not_depend_on_input_order(name: str, scenario: Scenario, seed: int) -> None:
    group, topics, lag = scenario
    assignor = get_server_assignor(name)
    again_group, again_lag = shuffled(group, lag, seed)
    assert assignor.assign(group, topics, lag) == assignor.assign(again_group, topics, again_lag)


@pytest.mark.parametrize("name", NAMES)
def test_empty_group_and_no_partitions(name: str) -> None:
    assignor = get_server_assignor(name)
    assert assignor.assign(GroupSpec.of({}), StaticTopicDescriber({})) == {}
    from assignors.api import MemberSpec

    group = GroupSpec.of({"a": MemberSpec(frozenset({"gone"})), "b": MemberSpec(frozenset())})
    assert assignor.assign(group, StaticTopicDescriber({"empty": 0})) == {"a": {}, "b": {}}
