"""The demo's view of its group: DescribeGroups, OffsetFetch and Kafka's end offsets turned into member lags,
and the live assignment's lag spread next to what `range` gives on the same snapshot."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GROUP", "GroupMonitor", "GroupView", "LagSample", "MemberView"]

GROUP = "demo"


# --- watching the group --------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class MemberView:
    member_id: str
    epoch: int
    state: str
    assignment: frozenset[int]  # partitions of the demo topic
    target: frozenset[int]


@dataclass(frozen=True, slots=True)
class GroupView:
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    topic_id: str
    members: tuple[MemberView, ...]

    @property
    def reconciled(self) -> bool:
        return self.state == "STABLE" and all(m.assignment == m.target for m in self.members)


@dataclass
class LagSample:
    at: float
    spread_live: int
    spread_range: int
    total: int
    members: dict[str, int] = field(default_factory=dict)  # driver name -> its lag, for the lag-over-time plot


class GroupMonitor:
    """DescribeGroups, OffsetFetch and Kafka end offsets, turned into member lags and assignor comparisons."""

    def __init__(self, coordinator: str, bootstrap_servers: str, topic: str, partitions: int) -> None:
        import grpc
        from confluent_kafka.admin import AdminClient

        from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

        self.topic = topic
        self.partitions = partitions
        self._channel = grpc.insecure_channel(coordinator)
        self._stub = pb_grpc.GroupCoordinatorStub(self._channel)
        self._admin: Any = AdminClient({"bootstrap.servers": bootstrap_servers, "client.id": "groupcoord-demo-monitor",
                                   "log.connection.close": False})

    def close(self) -> None:
        self._channel.close()
        self._admin = None  # destroyed now: it must not outlive the cluster

    def describe(self) -> GroupView | None:
        from groupcoord.wire.v1 import coordinator_pb2 as pb

        resp = self._stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=[GROUP]), timeout=5)
        g = resp.groups[0] if resp.groups else None
        if g is None or g.error_code:
            return None
        topic_id = ""

        def parts(tps: Any) -> frozenset[int]:
            nonlocal topic_id
            out: set[int] = set()
            for t in tps:
                if t.topic_name == self.topic or not t.topic_name:
                    topic_id = topic_id or t.topic_id
                    out.update(t.partitions)
            return frozenset(out)

        members = tuple(sorted((MemberView(m.member_id, m.member_epoch, m.state, parts(m.assignment),
                                           parts(m.target_assignment)) for m in g.members),
                               key=lambda m: m.member_id))
        return GroupView(g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name, topic_id, members)

    def offsets(self) -> dict[int, tuple[int, int, int | None]]:
        """partition -> (log start, end, committed or None)."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        from groupcoord.wire.v1 import coordinator_pb2 as pb

        def list_offsets(spec: Any) -> dict[int, int]:
            futures = self._admin.list_offsets({TopicPartition(self.topic, p): spec for p in range(self.partitions)},
                                               request_timeout=5)
            return {tp.partition: f.result(timeout=5).offset for tp, f in futures.items()}

        ends = list_offsets(OffsetSpec.latest())
        starts = list_offsets(OffsetSpec.earliest())
        resp = self._stub.OffsetFetch(pb.OffsetFetchRequest(group_id=GROUP, member_epoch=-1), timeout=5)
        committed = {p.partition_index: p.committed_offset for t in resp.topics if t.name == self.topic
                     for p in t.partitions if p.committed_offset >= 0}
        return {p: (starts.get(p, 0), ends.get(p, 0), committed.get(p)) for p in range(self.partitions)}

    @staticmethod
    def lag_of(offsets: Mapping[int, tuple[int, int, int | None]], partitions: frozenset[int]) -> int:
        total = 0
        for p in partitions:
            start, end, committed = offsets[p]
            total += max(0, end - max(committed if committed is not None else start, start))
        return total

    def spreads(self, view: GroupView, offsets: Mapping[int, tuple[int, int, int | None]]) -> tuple[int, int]:
        """(max - min member lag) for the live assignment and for `range` on the same members and lags."""
        from groupcoord.assignors import (
            GroupSpec,
            LagSnapshot,
            MemberSpec,
            PartitionOffsets,
            RangeAssignor,
            StaticTopicDescriber,
        )

        if not view.members or not view.topic_id:
            return 0, 0
        live = [self.lag_of(offsets, m.assignment) for m in view.members]
        tid = view.topic_id
        spec = GroupSpec.of({m.member_id: MemberSpec(frozenset({tid}), {tid: m.target}) for m in view.members})
        lag = LagSnapshot({(tid, p): PartitionOffsets(end, committed, start)
                           for p, (start, end, committed) in offsets.items()}, auto_offset_reset="earliest")
        ranged = RangeAssignor().assign(spec, StaticTopicDescriber({tid: self.partitions}), lag)
        by_range = [self.lag_of(offsets, ranged.get(m.member_id, {}).get(tid, frozenset())) for m in view.members]
        return max(live) - min(live), max(by_range) - min(by_range)

    def set_auto_offset_reset_earliest(self) -> None:
        """Lag-aware assignors count a partition with no committed offset as its whole log, as the drivers read
        it (`startingOffsets=earliest`)."""
        from groupcoord.wire.v1 import coordinator_pb2 as pb

        req = pb.AlterGroupConfigsRequest(group_id=GROUP)
        req.configs.add(name="consumer.auto.offset.reset", value="earliest")
        with contextlib.suppress(Exception):
            self._stub.AlterGroupConfigs(req, timeout=5)
