"""The local log: every record survives encode/decode, reopen, snapshots and a torn tail."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from groupcoord.coordinator.core import records as r
from groupcoord.coordinator.core.snapshot import snapshot_records
from groupcoord.coordinator.runtime import record_codec
from groupcoord.coordinator.runtime.log import FileLog
from tests.core.context import CoreContext


def busy_context(seed: int = 3, steps: int = 400) -> CoreContext:
    """A shard after a random mix of joins, heartbeats, leaves, crashes, commits and config changes."""
    rng = random.Random(seed)
    ctx = CoreContext({"foo": 6, "bar": 3})
    live: dict[str, int] = {}
    for step in range(steps):
        roll = rng.random()
        if roll < 0.25 or not live:
            mid = f"m{step}"
            resp = ctx.join(mid, instance_id=f"i{step}" if rng.random() < 0.3 else None)
            live[mid] = resp.member_epoch
        elif roll < 0.7:
            mid = rng.choice(sorted(live))
            member = ctx.group().members.get(mid)
            if member is None:
                live.pop(mid)
                continue
            owned = {t: frozenset(p) for t, p in member.assigned_partitions.items()}
            resp = ctx.heartbeat(member_id=mid, member_epoch=member.member_epoch, topic_partitions=owned)
            live[mid] = resp.member_epoch
        elif roll < 0.8:
            mid = rng.choice(sorted(live))
            ctx.heartbeat(member_id=mid, member_epoch=-1)
            live.pop(mid)
        elif roll < 0.95 and live:
            mid = rng.choice(sorted(live))
            member = ctx.group().members.get(mid)
            if member is not None:
                from groupcoord.coordinator.core.messages import CommitPartition, OffsetCommitRequest
                ctx.apply(ctx.shard.offset_commit(OffsetCommitRequest(
                    "grp", mid, member.member_epoch, [CommitPartition("foo", rng.randrange(6), rng.randrange(10**6))]),
                    ctx.now))
        else:
            ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignment.interval.ms": str(rng.randrange(50))},
                                                    False, ctx.now))
        ctx.advance(rng.randrange(0, 3000))
    return ctx


def state_of(shard: Any) -> Any:
    groups = {}
    for gid, g in shard.groups.items():
        targets = {k: dict(v) for k, v in g.target_assignment.items()}
        groups[gid] = (g.group_epoch, g.metadata_hash, dict(g.members), targets, g.target_assignment_epoch,
                       g.assignment_timestamp_ms, dict(g.partition_owner), dict(g.static_members))
    offsets = {gid: dict(shard.offsets.committed(gid)) for gid in shard.offsets.group_ids()}
    return groups, offsets, shard.group_configs


def test_every_record_type_survives_encode_and_decode() -> None:
    ctx = busy_context()
    kinds = {type(rec) for rec in ctx.records}
    assert {r.ConsumerGroupMetadata, r.ConsumerGroupMemberMetadata, r.ConsumerGroupCurrentMemberAssignment,
            r.ConsumerGroupTargetAssignmentMember, r.ConsumerGroupTargetAssignmentMetadata, r.OffsetCommit,
            r.GroupConfig, r.ConsumerGroupMemberMetadataTombstone,
            r.ConsumerGroupCurrentMemberAssignmentTombstone} <= kinds
    for rec in ctx.records:
        decoded = record_codec.decode(record_codec.encode(rec))
        assert type(decoded) is type(rec)
        assert _normalised(decoded) == _normalised(rec), rec


def _normalised(rec: Any) -> bytes:
    """Records compare by their canonical encoding (empty partition sets and dict order do not matter)."""
    return record_codec.encode(rec)


def test_reopening_the_log_replays_to_the_same_state(tmp_path: Path) -> None:
    ctx = busy_context()
    log = FileLog(tmp_path)
    log.load(lambda rec: None)
    log.append_sync(ctx.records)
    log.close()
    fresh = CoreContext({"foo": 6, "bar": 3}).shard
    report = FileLog(tmp_path).load(fresh.replay)
    assert report.log_records == len(ctx.records) and report.truncated_bytes == 0
    assert state_of(fresh) == state_of(ctx.shard)


def test_a_snapshot_replaces_the_log_it_covers(tmp_path: Path) -> None:
    ctx = busy_context()
    log = FileLog(tmp_path)
    log.load(lambda rec: None)
    log.append_sync(ctx.records)
    generation = log.rotate()
    log.write_snapshot(generation, snapshot_records(ctx.shard))
    extra = busy_context(seed=9, steps=50).records[:20]
    log.append_sync(extra)
    log.close()
    assert not (tmp_path / f"{generation:08d}.log").exists()
    expected = CoreContext({"foo": 6, "bar": 3}).shard
    for rec in [*snapshot_records(ctx.shard), *extra]:
        expected.replay(rec)
    fresh = CoreContext({"foo": 6, "bar": 3}).shard
    report = FileLog(tmp_path).load(fresh.replay)
    assert report.snapshot_generation == generation and report.log_records == len(extra)
    assert state_of(fresh) == state_of(expected)
