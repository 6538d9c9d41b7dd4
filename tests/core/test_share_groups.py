"""Share groups (KIP-932) in the sans-I/O core, with the virtual clock: membership, the simple assignor's
sharing, KIP-1263 batching/offload, share-partition acquisition locks, acknowledgements, replay."""

from __future__ import annotations

from typing import Any

from groupcoord.coordinator.core.classic.messages import JoinGroupRequest
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.core.share.acquisition import acknowledge, acquire
from groupcoord.coordinator.core.share.group import ShareGroup
from groupcoord.coordinator.core.share.handlers import heartbeat
from groupcoord.coordinator.core.share.records import (
    AcknowledgeRange,
    AcquirePartition,
    ShareAcknowledgeRequest,
    ShareAcquireRequest,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from tests.core.context import START_MS, CoreContext

SHARE_FAST: dict[str, Any] = {
    "group.share.min.session.timeout.ms": 100,
    "group.share.session.timeout.ms": 3000,
    "group.share.min.heartbeat.interval.ms": 10,
    "group.share.heartbeat.interval.ms": 500,
    "group.share.assignment.interval.ms": 0,
    "group.share.assignor.offload.enable": False,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.record.lock.duration.ms": 1000,
}


class ShareContext(CoreContext):
    def __init__(self, topics: dict[str, int] | None = None, auto_complete_runs: bool = True,
                 **share: Any) -> None:
        overrides = dict(SHARE_FAST)
        overrides.update({k.replace("_", "."): v for k, v in share.items()})
        super().__init__(topics if topics is not None else {"foo": 2}, auto_complete_runs=auto_complete_runs,
                         overrides=overrides)

    def hb(self, member_id: str, epoch: int = 0, topics: tuple[str, ...] | None = ("foo",), group_id: str = "sg",
           **fields: Any) -> ShareGroupHeartbeatResponse:
        req = ShareGroupHeartbeatRequest(group_id, member_id, epoch,
                                         subscribed_topic_names=topics if epoch == 0 else None, **fields)
        response: ShareGroupHeartbeatResponse = self.apply(heartbeat(self.shard, req, self.now))
        return response

    def sgroup(self, group_id: str = "sg") -> ShareGroup:
        g = self.shard.groups[group_id]
        assert isinstance(g, ShareGroup)
        return g

    def assigned(self, member_id: str, group_id: str = "sg") -> dict[str, frozenset[int]]:
        return {t: frozenset(p) for t, p in self.sgroup(group_id).members[member_id].assigned_partitions.items()}

    def keep_alive(self, group_id: str = "sg") -> None:
        for mid, m in sorted(self.sgroup(group_id).members.items()):
            self.hb(mid, m.member_epoch, group_id=group_id)

    def acquire(self, member_id: str, partition: int = 0, end: int = 1000, start: int = 0, max_records: int = 500,
                topic: str = "foo") -> Any:
        req = ShareAcquireRequest("sg", member_id, (AcquirePartition(self.tid(topic), partition, start, end),),
                                  max_records)
        return self.apply(acquire(self.shard, req, self.now)).partitions[0]

    def ack(self, member_id: str, first: int, last: int, kind: int, partition: int = 0,  # type: ignore[override]
            topic: str = "foo") -> Any:
        req = ShareAcknowledgeRequest("sg", member_id, (AcknowledgeRange(self.tid(topic), partition, first, last,
                                                                         kind),))
        return self.apply(acknowledge(self.shard, req, self.now)).results[0]

    def fresh(self) -> GroupCoordinatorShard:
        shard = GroupCoordinatorShard(self.config, lambda: "unused", self.image)
        for r in self.records:
            shard.replay(r)
        return shard


def share_state(shard: GroupCoordinatorShard) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for gid, g in shard.groups.items():
        assert isinstance(g, ShareGroup)
        out[gid] = (g.group_epoch, g.metadata_hash, dict(g.members), dict(g.target_assignment),
                    g.target_assignment_epoch, g.assignment_timestamp_ms, dict(g.partitions))
    return out


# --- membership ---------------------------------------------------------------------------------------------
def test_first_member_gets_every_partition_at_the_first_computed_epoch() -> None:
    c = ShareContext()
    r = c.hb("m1")
    assert r.error_code is Errors.NONE and r.member_epoch == 2 and r.heartbeat_interval_ms == 500
    assert r.assignment == {c.tid("foo"): frozenset({0, 1})}
    assert c.sgroup().listed().group_state == "STABLE"


def test_members_beyond_the_partition_count_share_partitions() -> None:
    c = ShareContext()
    for m in ("m1", "m2", "m3"):
        c.hb(m)
    c.keep_alive()
    per_member = [c.assigned(m).get(c.tid("foo"), frozenset()) for m in ("m1", "m2", "m3")]
    # Kafka's sharing: ceil(3/2) = 2 members per partition, the 4 slots split 1/1/2 over the members.
    assert sorted(len(p) for p in per_member) == [1, 1, 2]
    assert all(sum(p in ps for ps in per_member) == 2 for p in (0, 1))


def test_a_new_member_gets_its_partitions_at_once_without_revocation() -> None:
    c = ShareContext()
    c.hb("m1")
    r2 = c.hb("m2")
    assert r2.member_epoch == 3 and len(r2.assignment[c.tid("foo")]) == 1  # type: ignore[index]
    r1 = c.hb("m1", 2)
    assert r1.member_epoch == 3 and r1.assignment is not None and len(r1.assignment[c.tid("foo")]) == 1


def test_assignment_interval_batches_from_when_the_last_computation_finished() -> None:
    c = ShareContext(group_share_assignment_interval_ms=1000)
    c.hb("m1")
    r2 = c.hb("m2")
    g = c.sgroup()
    assert g.group_epoch == 3 and g.target_assignment_epoch == 2 and r2.assignment == {}
    c.advance(999)
    c.hb("m1", 2)
    assert c.sgroup().target_assignment_epoch == 2
    c.advance(1)
    c.hb("m1", 2)
    assert c.sgroup().target_assignment_epoch == 3


def test_group_override_of_the_assignment_interval_wins_over_the_broker() -> None:
    c = ShareContext(group_share_assignment_interval_ms=0)
    c.shard.group_configs["sg"] = {"share.assignment.interval.ms": 5000}
    c.hb("m1")
    c.hb("m2")
    assert c.sgroup().target_assignment_epoch == 2 and c.shard.stats.assignor_skipped_interval >= 1


def test_offload_reserves_epoch_one_guards_the_inflight_run_and_catches_up_after() -> None:
    c = ShareContext(auto_complete_runs=False, group_share_assignor_offload_enable=True)
    r = c.hb("m1")
    assert r.member_epoch == 1 and r.assignment == {}  # epoch 1: the empty assignment
    assert len(c.pending_runs) == 1
    c.hb("m2")
    assert len(c.pending_runs) == 1 and c.shard.stats.assignor_skipped_inflight == 1
    c.complete_runs()
    g = c.sgroup()
    assert g.target_assignment_epoch == 2 and g.group_epoch == 3
    assert c.hb("m1", 1).assignment == {c.tid("foo"): frozenset({0, 1})}
    assert len(c.pending_runs) == 1  # the change the run missed (m2) triggers the next run
    c.complete_runs()
    assert c.hb("m2", 1).member_epoch == 3 and c.assigned("m2")


def test_session_timeout_fences_the_member_and_leave_removes_it() -> None:
    c = ShareContext()
    c.hb("m1")
    c.hb("m2")
    c.advance(2000)
    c.hb("m1", 2)
    c.advance(1500)
    assert set(c.sgroup().members) == {"m1"}
    r = c.hb("m1", 3)
    assert r.error_code is Errors.NONE
    left = c.hb("m1", -1)
    assert left.member_epoch == -1 and c.sgroup().describe().group_state == "EMPTY"


def test_stale_or_newer_member_epochs_are_fenced() -> None:
    c = ShareContext()
    c.hb("m1")
    c.hb("m2")
    c.hb("m1", 2)  # m1 at 3, previous 2
    assert c.hb("m1", 2).error_code is Errors.NONE  # the previous epoch is tolerated (lost response)
    assert c.hb("m1", 1).error_code is Errors.FENCED_MEMBER_EPOCH
    assert c.hb("m1", 9).error_code is Errors.FENCED_MEMBER_EPOCH
    assert c.hb("ghost", 3).error_code is Errors.UNKNOWN_MEMBER_ID


def test_group_max_size_refuses_another_member() -> None:
    c = ShareContext(group_share_max_size=1)
    c.hb("m1")
    assert c.hb("m2").error_code is Errors.GROUP_MAX_SIZE_REACHED


def test_invalid_heartbeats_are_refused_with_invalid_request() -> None:
    c = ShareContext()
    assert c.hb("m1", topics=None).error_code is Errors.INVALID_REQUEST
    assert c.hb("", 3).error_code is Errors.INVALID_REQUEST
    assert c.hb("m1", -2).error_code is Errors.INVALID_REQUEST
    assert c.hb("m1", group_id=" ").error_code is Errors.INVALID_REQUEST


def test_a_group_id_has_one_type() -> None:
    c = ShareContext()
    c.heartbeat("cg", "c1", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["foo"], topic_partitions={})
    assert c.hb("s1", group_id="cg").error_code is Errors.GROUP_ID_NOT_FOUND
    c.hb("m1")
    c.hb("m1", -1)  # empty share group: still a share group
    consumer = c.heartbeat("sg", "c1", 0, rebalance_timeout_ms=1000, subscribed_topic_names=["foo"],
                           topic_partitions={})
    assert consumer.error_code is Errors.GROUP_ID_NOT_FOUND
    join = c.shard.classic_group_join(JoinGroupRequest(
        group_id="sg", member_id="", protocol_type="consumer", protocols=(),
        session_timeout_ms=10000, rebalance_timeout_ms=10000), c.now, 1).response
    assert join is not None and join.error_code is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert isinstance(c.shard.groups["sg"], ShareGroup)


def test_topics_no_longer_subscribed_are_dropped_at_once() -> None:
    c = ShareContext({"foo": 2, "bar": 2}, group_share_assignment_interval_ms=10000)
    c.hb("m1", topics=("foo", "bar"))
    assert set(c.assigned("m1")) == {c.tid("foo"), c.tid("bar")}
    req = ShareGroupHeartbeatRequest("sg", "m1", 2, subscribed_topic_names=("foo",))
    r = c.apply(heartbeat(c.shard, req, c.now))
    assert r.assignment == {c.tid("foo"): frozenset({0, 1})}  # the target lags (batching); bar is gone anyway


# --- share-partitions --------------------------------------------------------------------------------------
def test_acquire_starts_at_the_log_end_by_default_and_at_the_start_when_earliest() -> None:
    c = ShareContext()
    c.hb("m1")
    assert c.acquire("m1", end=100).ranges == ()
    c.apply(c.shard.alter_group_configs("sg", {"share.auto.offset.reset": "earliest"}, False, c.now))
    got = c.acquire("m1", partition=1, start=10, end=100, max_records=50)
    assert got.ranges == ((10, 59, 1),) and got.lock_deadline_ms == c.now + 1000


def test_lock_expiry_makes_records_available_again_with_a_higher_delivery_count() -> None:
    c = ShareContext()
    c.shard.group_configs["sg"] = {"share.auto.offset.reset": "earliest"}
    c.hb("m1")
    c.hb("m2")
    c.keep_alive()
    holder = next(m for m in ("m1", "m2") if 0 in c.assigned(m)[c.tid("foo")])
    assert c.acquire(holder, end=10).ranges == ((0, 9, 1),)
    assert c.ack(holder, 0, 4, 1).error_code is Errors.NONE
    c.advance(1000)  # the lock timer fires
    sp = c.sgroup().partitions[(c.tid("foo"), 0)]
    assert sp.start_offset == 5 and sp.acquired_count() == 0
    c.keep_alive()
    assert c.acquire(holder, end=10).ranges == ((5, 9, 2),)
    late = c.ack(holder, 5, 9, 1)
    assert late.error_code is Errors.NONE


def test_an_expired_lock_cannot_be_acknowledged() -> None:
    c = ShareContext()
    c.shard.group_configs["sg"] = {"share.auto.offset.reset": "earliest"}
    c.hb("m1")
    c.acquire("m1", end=10)
    c.now += 1000  # past the deadline, before the timer operation ran
    assert c.ack("m1", 0, 9, 1).error_code is Errors.INVALID_RECORD_STATE


def test_renew_extends_a_held_lock_by_the_lock_duration_and_keeps_the_delivery_count() -> None:
    """KIP-1222's AcknowledgeType RENEW (4): a slow processor keeps its records instead of losing them."""
    c = ShareContext()
    c.shard.group_configs["sg"] = {"share.auto.offset.reset": "earliest"}
    c.hb("m1")
    assert c.acquire("m1", end=10).ranges == ((0, 9, 1),)
    c.advance(800)
    assert c.ack("m1", 0, 9, 4).error_code is Errors.NONE
    c.advance(800)  # 1600 ms after the acquisition: past the first deadline, inside the renewed one
    c.keep_alive()
    sp = c.sgroup().partitions[(c.tid("foo"), 0)]
    assert sp.acquired_count() == 10 and sp.next_lock_deadline() == START_MS + 800 + 1000
    assert c.acquire("m1", end=10).ranges == ()  # still held: nothing to redeliver
    assert c.ack("m1", 0, 9, 1).error_code is Errors.NONE
    assert c.sgroup().partitions[(c.tid("foo"), 0)].start_offset == 10


def test_a_lock_that_expired_or_another_member_holds_cannot_be_renewed() -> None:
    c = ShareContext()
    c.shard.group_configs["sg"] = {"share.auto.offset.reset": "earliest"}
    c.hb("m1")
    c.acquire("m1", end=10)
    c.now += 1000
    assert c.ack("m1", 0, 9, 4).error_code is Errors.INVALID_RECORD_STATE
    assert c.sgroup().partitions[(c.tid("foo"), 0)].acquired_count() == 0


def test_delivery_count_limit_archives_and_the_start_offset_moves_past() -> None:
    c = ShareContext(group_share_delivery_count_limit=2)
    c.shard.group_configs["sg"] = {"share.auto.offset.reset": "earliest"}
    c.hb("m1")
    c.acquire("m1", end=3)
    assert c.ack("m1", 0, 2, 2).error_code is Errors.NONE  # release: delivery 1 < 2, available again
    assert c.acquire("m1", end=3).ranges == ((0, 2, 2),)
    assert c.ack("m1", 0, 0, 2).error_code is Errors.NONE  # release at the limit: archived
    assert c.ack("m1", 2, 2, 3).error_code is Errors.NONE  # reject: archived
    sp = c.sgroup().partitions[(c.tid("foo"), 0)]
    assert sp.start_offset == 1
    assert c.ack("m1", 1, 1, 1).error_code is Errors.NONE
    assert c.sgroup().partitions[(c.tid("foo"), 0)].start_offset == 3


def test_another_members_records_and_unassigned_partitions_are_refused() -> None:
    c = ShareContext({"foo": 1})
    c.shard.group_configs["sg"] = {"share.auto.offset.reset": "earliest"}
    c.hb("m1")
    c.hb("m2")
    c.keep_alive()
    c.acquire("m1", end=10, max_records=5)
    assert c.ack("m2", 0, 4, 1).error_code is Errors.INVALID_RECORD_STATE
    assert c.acquire("m2", end=10).ranges == ((5, 9, 1),)  # the same partition, other records
    assert c.acquire("m1", partition=1).error_code is Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_in_flight_records_are_bounded_by_the_record_lock_limit() -> None:
    c = ShareContext(group_share_partition_max_record_locks=100)
    c.shard.group_configs["sg"] = {"share.auto.offset.reset": "earliest"}
    c.hb("m1")
    assert c.acquire("m1", end=1000, max_records=500).ranges == ((0, 99, 1),)
    assert c.acquire("m1", end=1000).ranges == ()
    c.ack("m1", 0, 49, 1)
    assert c.acquire("m1", end=1000).ranges == ((100, 149, 1),)


def test_a_fenced_member_releases_its_locks() -> None:
    c = ShareContext()
    c.shard.group_configs["sg"] = {"share.auto.offset.reset": "earliest",
                                   "share.record.lock.duration.ms": 60000}
    c.hb("m1")
    c.acquire("m1", end=10)
    c.advance(3000)  # session timeout (3 s) before the lock (60 s)
    sp = c.sgroup().partitions[(c.tid("foo"), 0)]
    assert sp.acquired_count() == 0 and sp.batches[0].delivery_count == 1


def test_replay_rebuilds_the_same_share_groups_and_partitions() -> None:
    c = ShareContext(group_share_assignment_interval_ms=500)
    c.shard.group_configs["sg"] = {"share.auto.offset.reset": "earliest"}
    for m in ("m1", "m2", "m3"):
        c.hb(m)
    c.advance(500)
    c.keep_alive()
    for m in ("m1", "m2", "m3"):
        for p in c.assigned(m).get(c.tid("foo"), ()):
            c.acquire(m, partition=p, end=40, max_records=7)
    c.ack("m1", 0, 3, 1) if 0 in c.assigned("m1").get(c.tid("foo"), ()) else None
    c.advance(1000)
    c.keep_alive()
    c.hb("m3", c.sgroup().members["m3"].member_epoch)
    c.hb("m3", -1)
    assert share_state(c.fresh()) == share_state(c.shard)
    assert c.now > START_MS


def test_every_share_record_survives_the_log_encoding() -> None:
    from groupcoord.coordinator.runtime import record_codec

    c = ShareContext()
    c.shard.group_configs["sg"] = {"share.auto.offset.reset": "earliest"}
    c.hb("m1", rack_id="r1")
    c.hb("m2")
    c.keep_alive()
    c.acquire("m1", end=10) if c.assigned("m1") else None
    c.hb("m2", -1)
    assert c.records
    for record in c.records:
        assert record_codec.decode(record_codec.encode(record)) == record
    for record in c.sgroup().deletion_records():
        assert record_codec.decode(record_codec.encode(record)) == record


def test_share_groups_are_described_and_listed_with_their_type() -> None:
    from groupcoord.coordinator.core import admin

    c = ShareContext()
    c.hb("m1")
    described = admin.describe_groups(c.shard, ["sg"])[0]
    assert (described.group_type, described.group_state, described.assignor_name) == ("share", "STABLE", "simple")
    assert described.members[0].assignment == {c.tid("foo"): frozenset({0, 1})}
    listed = admin.list_groups(c.shard, [], ["share"])
    assert [(g.group_id, g.group_type) for g in listed] == [("sg", "share")]
    assert admin.delete_groups(c.shard, ["sg"]).response[0].error_code is Errors.NON_EMPTY_GROUP
    c.hb("m1", -1)
    assert c.apply(admin.delete_groups(c.shard, ["sg"]))[0].error_code is Errors.NONE
    assert "sg" not in c.shard.groups and "sg" not in c.fresh().groups


def test_offset_delete_on_a_share_group_is_group_id_not_found() -> None:
    """Kafka's ShareGroup.validateOffsetDelete: a share group has no committed offsets to delete."""
    c = ShareContext()
    c.hb("m1")
    group_result, partitions = c.apply(c.shard.delete_offsets("sg", [("foo", 0)], c.now))
    assert (group_result.error_code, partitions) == (Errors.GROUP_ID_NOT_FOUND, [])


def test_an_empty_share_group_keeps_its_delivery_state_through_the_offsets_retention_check() -> None:
    c = ShareContext()
    c.shard.group_configs["sg"] = {"share.auto.offset.reset": "earliest"}
    c.hb("m1")
    c.acquire("m1", end=10)
    c.ack("m1", 0, 9, 1)
    c.hb("m1", -1)
    c.advance(int(c.config["offsets.retention.check.interval.ms"]) * 2)
    assert c.sgroup().partitions[(c.tid("foo"), 0)].start_offset == 10


def test_new_partitions_of_a_subscribed_topic_are_assigned_at_the_next_heartbeat() -> None:
    c = ShareContext()
    c.hb("m1")
    c.set_metadata({"foo": 4})
    r = c.hb("m1", 2)
    assert r.member_epoch == 3 and r.assignment == {c.tid("foo"): frozenset({0, 1, 2, 3})}


def test_simulated_share_scale_up_matches_the_seed_offload_costs_at_most_a_heartbeat_batching_less() -> None:
    from groupcoord.coordinator.share_simulation import simulate_share_scale_up
    from groupcoord.coordinator.simulation import simulate_scale_up

    base = simulate_share_scale_up(10, 0, False)
    offloaded = simulate_share_scale_up(10, 0, True)
    batched = simulate_share_scale_up(10, 1000, False)
    assert base <= offloaded <= base + 5000
    assert simulate_share_scale_up(1, 0, True) - simulate_share_scale_up(1, 0, False) <= 5000
    consumer_delay = simulate_scale_up(10, 1000, False).completion_ms - simulate_scale_up(10, 0, False).completion_ms
    assert batched - base < consumer_delay


class KnownOffsets:
    """The LagProvider interface over a dict (the in-memory implementation the Kafka lag source stands for)."""

    def __init__(self, offsets: dict[tuple[str, int], tuple[int, int]]) -> None:
        self.known = offsets

    def offsets(self, topic_partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        return {tp: self.known[tp] for tp in topic_partitions if tp in self.known}


def test_acquire_without_offsets_uses_the_runtimes_known_log_offsets() -> None:
    c = ShareContext()
    c.shard.lag_provider = KnownOffsets({("foo", 0): (5, 50)})
    c.shard.group_configs["sg"] = {"share.auto.offset.reset": "earliest"}
    c.hb("m1")
    assert c.acquire("m1", start=-1, end=-1).ranges == ((5, 49, 1),)
    assert c.acquire("m1", partition=1, start=-1, end=-1).error_code is Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_a_snapshot_of_the_shard_rebuilds_the_same_share_groups() -> None:
    from groupcoord.coordinator.core.snapshot import snapshot_records, timers_after_load

    c = ShareContext()
    c.shard.group_configs["sg"] = {"share.auto.offset.reset": "earliest"}
    c.hb("m1")
    c.hb("m2")
    c.keep_alive()
    for m in ("m1", "m2"):
        for p in c.assigned(m)[c.tid("foo")]:
            c.acquire(m, partition=p, end=30, max_records=10)
    fresh = GroupCoordinatorShard(c.config, lambda: "unused", c.image)
    for record in snapshot_records(c.shard):
        fresh.replay(record)
    assert share_state(fresh) == share_state(c.shard)
    keys = {t.key[0] for t in timers_after_load(fresh, c.now).timers}
    assert {"share-session", "share-lock"} <= keys
