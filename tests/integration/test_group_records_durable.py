"""The records added for regex resolution and offset retention survive the file log and its snapshots, so
a restarted coordinator resolves, lists and expires exactly as before the restart."""

from __future__ import annotations

from pathlib import Path

from groupcoord.coordinator.core.messages import CommitPartition, OffsetCommitRequest
from groupcoord.coordinator.core.records import ConsumerGroupRegularExpression, GroupEmptySince
from groupcoord.coordinator.core.snapshot import snapshot_records
from groupcoord.coordinator.runtime.log import FileLog
from tests.core.context import CoreContext, shard_state


def scenario() -> CoreContext:
    ctx = CoreContext({"foo": 2, "fizz": 1, "bar": 1})
    ctx.join("a", subscribed_topic_regex="f.*")
    ctx.join("b", subscribed_topic_regex="b.*")
    ctx.stabilise()
    ctx.apply(ctx.shard.offset_commit(OffsetCommitRequest("grp", "a", ctx.member("a").member_epoch,
                                                          [CommitPartition("foo", 0, 7)]), ctx.now))
    ctx.apply(ctx.shard.offset_commit(OffsetCommitRequest("standalone", "", -1, [CommitPartition("bar", 0, 3)]),
                                      ctx.now))
    ctx.heartbeat(member_id="b", member_epoch=-1)
    ctx.heartbeat(member_id="a", member_epoch=-1)
    ctx.join("c", group_id="other", subscribed_topic_regex="fi.*")
    return ctx


def test_regex_and_empty_since_records_survive_the_log_and_a_snapshot(tmp_path: Path) -> None:
    ctx = scenario()
    assert any(isinstance(r, ConsumerGroupRegularExpression) for r in ctx.records)
    assert any(isinstance(r, GroupEmptySince) for r in ctx.records)
    log = FileLog(tmp_path / "log")
    log.load(lambda rec: None)
    log.append_sync(ctx.records)
    log.close()
    fresh = CoreContext({"foo": 2, "fizz": 1, "bar": 1}).shard
    FileLog(tmp_path / "log").load(fresh.replay)
    assert shard_state(fresh) == shard_state(ctx.shard)
    assert fresh.empty_since == {"grp": ctx.shard.empty_since["grp"]}
    assert fresh.groups["other"].resolved_regexes == {"fi.*": frozenset({"fizz"})}

    snap = FileLog(tmp_path / "snap")
    snap.load(lambda rec: None)
    snap.write_snapshot(snap.rotate(), snapshot_records(ctx.shard))
    snap.close()
    from_snapshot = CoreContext({"foo": 2, "fizz": 1, "bar": 1}).shard
    FileLog(tmp_path / "snap").load(from_snapshot.replay)
    assert shard_state(from_snapshot) == shard_state(ctx.shard)
