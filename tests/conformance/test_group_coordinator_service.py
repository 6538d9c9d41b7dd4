"""The request validation of Kafka's GroupCoordinatorService (and GroupMetadataManagerTest's
testConsumerHeartbeatRequestValidation / testConsumerHeartbeatRegexValidation), against the shard.

Kafka answers each invalid ConsumerGroupHeartbeat with INVALID_REQUEST (an unknown server assignor with
UNSUPPORTED_ASSIGNOR, a bad regex with INVALID_REGULAR_EXPRESSION) and changes nothing.
"""

from __future__ import annotations

import pytest

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest as Req
from tests.core.context import CoreContext, shard_state

NAMES = ("foo", "bar")

INVALID = [
    pytest.param(Req("", "m", 1), id="group id empty"),
    pytest.param(Req("   ", "m", 1), id="group id all whitespace"),
    pytest.param(Req("foo", "m", 0), id="join without rebalance timeout"),
    pytest.param(Req("foo", "m", 0, rebalance_timeout_ms=5000, subscribed_topic_names=NAMES,
                     topic_partitions={"t": frozenset({0})}), id="join with owned partitions"),
    pytest.param(Req("foo", "m", 0, rebalance_timeout_ms=5000, topic_partitions={}),
                 id="join without names or regex"),
    pytest.param(Req("foo", "", 1), id="member id empty at epoch > 0"),
    pytest.param(Req("foo", "  ", 1), id="member id all whitespace"),
    pytest.param(Req("foo", "", -1), id="member id empty when leaving"),
    pytest.param(Req("foo", "m", 1, instance_id=""), id="instance id empty"),
    pytest.param(Req("foo", "m", 1, instance_id="  "), id="instance id all whitespace"),
    pytest.param(Req("foo", "m", 1, rack_id=""), id="rack id empty"),
    pytest.param(Req("foo", "m", -2, rebalance_timeout_ms=5000, subscribed_topic_names=NAMES, topic_partitions={}),
                 id="static leave without instance id"),
    pytest.param(Req("foo", "m", -3, instance_id="i"), id="member epoch below -2"),
]


@pytest.mark.parametrize("request_", INVALID)
def test_kafka_testConsumerHeartbeatRequestValidation(request_: Req) -> None:
    ctx = CoreContext(group_consumer_assignors="range")
    before = shard_state(ctx.shard)
    r = ctx.send(request_)
    assert r.error_code is Errors.INVALID_REQUEST, r
    assert r.error_message
    assert shard_state(ctx.shard) == before and not ctx.records


def test_kafka_testConsumerHeartbeatRequestValidation_unsupported_server_assignor() -> None:
    ctx = CoreContext(group_consumer_assignors="range")
    r = ctx.send(Req("foo", "m", 1, server_assignor="bar"))
    assert r.error_code is Errors.UNSUPPORTED_ASSIGNOR
    assert "bar" in r.error_message and "range" in r.error_message


def test_kafka_testConsumerHeartbeatRegexValidation() -> None:
    ctx = CoreContext(group_consumer_assignors="range")
    r = ctx.send(Req("foo", "m", 0, rebalance_timeout_ms=5000, subscribed_topic_regex="[", topic_partitions={}))
    assert r.error_code is Errors.INVALID_REGULAR_EXPRESSION
    r = ctx.send(Req("foo", "m", 0, rebalance_timeout_ms=5000, subscribed_topic_regex=".*", topic_partitions={}))
    assert r.error_code is Errors.NONE
    epoch = r.member_epoch
    r = ctx.send(Req("foo", "m", epoch, rebalance_timeout_ms=5000, subscribed_topic_regex="[", topic_partitions={}))
    assert r.error_code is Errors.INVALID_REGULAR_EXPRESSION
    # Back to topic names (the regex has resolved meanwhile, which bumped the epoch too): a new
    # subscription, a new epoch.
    group_epoch = ctx.group("foo").group_epoch
    r = ctx.send(Req("foo", "m", epoch, rebalance_timeout_ms=5000, subscribed_topic_names=("foo",),
                     topic_partitions=ctx.member("m", "foo").assigned_sets()))
    assert r.error_code is Errors.NONE and r.member_epoch == group_epoch + 1


def test_kafka_join_accepts_empty_subscription_names() -> None:
    """Kafka accepts a join with an empty list of names (subscribed to nothing, but a member)."""
    ctx = CoreContext(group_consumer_assignors="range")
    r = ctx.send(Req("foo", "m", 0, rebalance_timeout_ms=5000, subscribed_topic_names=(), topic_partitions={}))
    assert r.error_code is Errors.NONE and r.assignment == {}
