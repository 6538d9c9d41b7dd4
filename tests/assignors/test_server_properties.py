"""Invariants every server assignor keeps, checked on arbitrary groups (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.assignors.api import AssignorError, GroupSpec, LagSnapshot, MemberSpec, StaticTopicDescriber
from groupcoord.assignors.registry import get_server_assignor, server_assignor_names
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
@given(scenario=scenarios(missing_topics=False))
def test_each_subscribed_partition_is_assigned_once_to_a_subscriber(name: str, scenario: Scenario) -> None:
    group, topics, lag = scenario
    check_valid(group, topics, get_server_assignor(name).assign(group, topics, lag))


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(scenario=scenarios(missing_topics=False), seed=st.integers(0, 2**32))
def test_result_does_not_depend_on_input_order(name: str, scenario: Scenario, seed: int) -> None:
    group, topics, lag = scenario
    assignor = get_server_assignor(name)
    again_group, again_lag = shuffled(group, lag, seed)
    assert assignor.assign(group, topics, lag) == assignor.assign(again_group, topics, again_lag)


@pytest.mark.parametrize("name", NAMES)
def test_empty_group_and_no_partitions(name: str) -> None:
    assignor = get_server_assignor(name)
    assert assignor.assign(GroupSpec.of({}), StaticTopicDescriber({})) == {}
    group = GroupSpec.of({"a": MemberSpec(frozenset({"empty"})), "b": MemberSpec(frozenset())})
    assert assignor.assign(group, StaticTopicDescriber({"empty": 0})) == {"a": {}, "b": {}}


@pytest.mark.parametrize("name", NAMES)
def test_a_subscription_to_a_topic_that_does_not_exist(name: str) -> None:
    """`range` and `uniform` refuse it, as Kafka's do (the coordinator only sends topics that exist);
    the lag assignors, ours, skip it."""
    assignor = get_server_assignor(name)
    group = GroupSpec.of({"a": MemberSpec(frozenset({"gone"})), "b": MemberSpec(frozenset())})
    if name in ("range", "uniform"):
        with pytest.raises(AssignorError):
            assignor.assign(group, StaticTopicDescriber({"empty": 0}))
    else:
        assert assignor.assign(group, StaticTopicDescriber({"empty": 0})) == {"a": {}, "b": {}}
