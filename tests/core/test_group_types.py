"""Every group type behind the one `Group` protocol: a group id has one type (streams groups included, though
they live apart from the shard's `groups`), and the generic admin paths see each type's own answers."""

from __future__ import annotations

from groupcoord.coordinator.core.classic.messages import HeartbeatRequest, JoinGroupRequest
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.share.handlers import heartbeat as share_heartbeat
from groupcoord.coordinator.core.share.records import ShareGroupHeartbeatRequest
from groupcoord.coordinator.core.streams import handlers as streams_shard
from groupcoord.coordinator.core.streams.group import StreamsHeartbeatRequest
from groupcoord.coordinator.core.streams.records import NO_TASKS
from tests.core.context import CoreContext
from tests.core.streams_context import word_count

STREAMS_TOPICS = {"lines": 4, "app-words-repartition": 4, "app-counts-changelog": 4}


def _streams_group(c: CoreContext, group_id: str) -> None:
    req = StreamsHeartbeatRequest(group_id, "s1", 0, topology=word_count(), process_id="p1",
                                  rebalance_timeout_ms=1000, active_tasks=NO_TASKS, standby_tasks=NO_TASKS,
                                  warmup_tasks=NO_TASKS)
    assert c.apply(streams_shard.heartbeat(c.shard, req, c.now)).error_code == 0


def test_a_streams_group_id_is_not_taken_by_consumer_share_or_classic_requests() -> None:
    c = CoreContext(STREAMS_TOPICS)
    _streams_group(c, "app")
    consumer = c.heartbeat("app", "", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["lines"],
                           topic_partitions={})
    assert consumer.error_code is Errors.GROUP_ID_NOT_FOUND
    share = c.apply(share_heartbeat(c.shard, ShareGroupHeartbeatRequest("app", "", 0,
                                                                        subscribed_topic_names=("lines",)), c.now))
    assert share.error_code is Errors.GROUP_ID_NOT_FOUND
    join = c.shard.classic_group_join(JoinGroupRequest(
        group_id="app", member_id="", protocol_type="consumer", protocols=(),
        session_timeout_ms=10000, rebalance_timeout_ms=10000), c.now, 1).response
    assert join is not None and join.error_code is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert c.shard.groups["app"].group_type == "streams"  # still the streams group's: nothing else took the id
    described = c.shard.describe_groups(["app"], c.now).response[0]
    assert (described.group_type, [m.member_id for m in described.members]) == ("streams", ["s1"])


def test_a_classic_request_for_a_group_of_another_type_names_that_type() -> None:
    c = CoreContext({"lines": 2})
    c.apply(share_heartbeat(c.shard, ShareGroupHeartbeatRequest("sg", "", 0, subscribed_topic_names=("lines",)),
                            c.now))
    response = c.shard.classic_group_heartbeat(HeartbeatRequest("sg", 1, "m1"), c.now).response
    assert response.error_code is Errors.GROUP_ID_NOT_FOUND
    assert response.error_message == "Group sg is a share group, not a classic group."


def test_every_group_type_is_listed_described_and_sized_through_the_one_protocol() -> None:
    c = CoreContext({**STREAMS_TOPICS, "foo": 2})
    c.join("c1", group_id="cg", subscribed_topic_names=["foo"])
    c.apply(share_heartbeat(c.shard, ShareGroupHeartbeatRequest("sg", "", 0, subscribed_topic_names=("foo",)),
                            c.now))
    c.apply(c.shard.classic_group_join(JoinGroupRequest(
        group_id="kg", member_id="", protocol_type="consumer", protocols=(("range", b""),),
        session_timeout_ms=10000, rebalance_timeout_ms=10000), c.now, 1))
    _streams_group(c, "app")
    listed = {g.group_id: g.group_type for g in c.shard.list_groups([], [], c.now).response}
    assert listed == {"cg": "consumer", "sg": "share", "kg": "classic", "app": "streams"}
    described = c.shard.describe_groups(["cg", "sg", "kg", "app"], c.now).response
    assert [d.group_type for d in described] == ["consumer", "share", "classic", "streams"]
    sizes = {gid: c.shard.groups.get(gid).member_count() for gid in listed}  # type: ignore[union-attr]
    assert sizes == {"cg": 1, "sg": 1, "kg": 0, "app": 1}, "kg's first JoinGroup is still answered MEMBER_ID_REQUIRED"
