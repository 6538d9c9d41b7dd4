"""Every group type in every path that treats a group as a whole: known to the shard, written out as records,
forgotten when its state partition moves (timers cancelled), put back, and given timers after a partition load
only when it is in that partition. Each test walks `GROUP_MAKERS`, so a new group type added there is checked
by every path at once."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from groupcoord.coordinator.core.classic.messages import JoinGroupRequest
from groupcoord.coordinator.core.group_state import forget_groups, group_records, known_group_ids, restore_groups
from groupcoord.coordinator.core.messages import CommitPartition, OffsetCommitRequest
from groupcoord.coordinator.core.partitioning import drop_groups, timers_after_partition_load
from groupcoord.coordinator.core.results import CancelTimer, ScheduleTimer
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.core.share.handlers import heartbeat as share_heartbeat
from groupcoord.coordinator.core.share.records import ShareGroupHeartbeatRequest
from groupcoord.coordinator.core.snapshot import snapshot_records
from groupcoord.coordinator.core.streams import handlers as streams_shard
from groupcoord.coordinator.core.streams.group import StreamsHeartbeatRequest
from groupcoord.coordinator.core.streams.records import NO_TASKS
from tests.core.context import CoreContext
from tests.core.streams_context import word_count

TOPICS = {"lines": 4, "app-words-repartition": 4, "app-counts-changelog": 4, "foo": 2}


def consumer(c: CoreContext, gid: str) -> None:
    c.join("c1", group_id=gid, subscribed_topic_names=["foo"])


def classic(c: CoreContext, gid: str) -> None:
    def join(member_id: str, token: int) -> object:
        return c.apply(c.shard.classic_group_join(JoinGroupRequest(
            group_id=gid, member_id=member_id, protocol_type="consumer", protocols=(("range", b""),),
            session_timeout_ms=10000, rebalance_timeout_ms=10000), c.now, token))

    first = join("", 1)  # KIP-394: MEMBER_ID_REQUIRED, with the id to join with
    join(first.member_id, 2)  # type: ignore[attr-defined]
    c.advance(3000)  # the initial rebalance delay completes the join
    assert c.shard.groups[gid].member_count() == 1


def share(c: CoreContext, gid: str) -> None:
    c.apply(share_heartbeat(c.shard, ShareGroupHeartbeatRequest(gid, "", 0, subscribed_topic_names=("foo",)), c.now))


def streams(c: CoreContext, gid: str) -> None:
    req = StreamsHeartbeatRequest(gid, "s1", 0, topology=word_count(), process_id="p1", rebalance_timeout_ms=1000,
                                  active_tasks=NO_TASKS, standby_tasks=NO_TASKS, warmup_tasks=NO_TASKS)
    assert c.apply(streams_shard.heartbeat(c.shard, req, c.now)).error_code == 0


def offsets_only(c: CoreContext, gid: str) -> None:
    c.apply(c.shard.offset_commit(OffsetCommitRequest(gid, "", -1, [CommitPartition("foo", 0, 7)]), c.now))


GROUP_MAKERS: dict[str, Callable[[CoreContext, str], None]] = {
    "consumer": consumer, "classic": classic, "share": share, "streams": streams, "offsets-only": offsets_only,
}


def make(kind: str, gid: str = "g") -> CoreContext:
    c = CoreContext(TOPICS)
    GROUP_MAKERS[kind](c, gid)
    if kind != "offsets-only":
        offsets_only(c, gid)
    return c


def state(shard: GroupCoordinatorShard) -> list[str]:
    return sorted(repr(r) for r in snapshot_records(shard))


@pytest.mark.parametrize("kind", GROUP_MAKERS)
def test_the_shard_knows_every_group_type_and_writes_it_out_whole(kind: str) -> None:
    c = make(kind)
    assert known_group_ids(c.shard) == {"g"}
    fresh = GroupCoordinatorShard(c.config, lambda: "unused", c.image)
    for record in group_records(c.shard, "g"):
        fresh.replay(record)
    assert state(fresh) == state(c.shard)


@pytest.mark.parametrize("kind", GROUP_MAKERS)
def test_a_moved_partition_forgets_every_group_type_and_cancels_its_timers(kind: str) -> None:
    c = make(kind)
    armed = {k for k in c.shard.timer_deadlines if len(k) > 1 and k[1] == "g"}
    dropped = drop_groups(c.shard, lambda gid: gid == "g")
    assert dropped.response == ["g"]
    assert known_group_ids(c.shard) == set() and state(c.shard) == state(GroupCoordinatorShard(
        c.config, lambda: "unused", c.image))
    assert armed <= {t.key for t in dropped.timers if isinstance(t, CancelTimer)}
    assert not any(len(k) > 1 and k[1] == "g" for k in c.shard.timer_deadlines)


@pytest.mark.parametrize("kind", GROUP_MAKERS)
def test_every_group_type_is_put_back_from_its_records(kind: str) -> None:
    c = make(kind)
    before = state(c.shard)
    records = group_records(c.shard, "g")
    forget_groups(c.shard, ["g"])
    restored = restore_groups(c.shard, frozenset({"g"}), records, c.now)
    assert state(c.shard) == before
    if kind != "offsets-only":
        assert any(isinstance(t, ScheduleTimer) and t.key[1:2] == ("g",) for t in restored.timers)


@pytest.mark.parametrize("kind", GROUP_MAKERS)
def test_a_partition_load_arms_the_timers_of_its_own_groups_only(kind: str) -> None:
    c = make(kind)
    GROUP_MAKERS[kind](c, "other")
    armed = timers_after_partition_load(c.shard, lambda gid: gid == "other", c.now).timers
    groups = {t.key[1] for t in armed if len(t.key) > 1}
    assert "g" not in groups


@pytest.mark.parametrize("kind", [k for k in GROUP_MAKERS if k != "offsets-only"])
def test_every_group_type_is_listed_described_and_counted(kind: str) -> None:
    c = make(kind)
    assert [g.group_id for g in c.shard.list_groups([], [], c.now).response] == ["g"]
    described = c.shard.describe_groups(["g"], c.now).response[0]
    assert described.error_code == 0 and described.group_type == kind
    views = list(c.shard.groups.values())  # what the metrics count
    assert [(v.group_id, v.group_type, v.member_count()) for v in views] == [("g", kind, 1)]
