"""What the harness asks the coordinator directly (no proxy): its view of each group, and the read-backs.

Used for two things only: convergence (the coordinator's assignment must match what the member processes
claim) and the read-backs after healing (committed offsets, share-partition offsets) that the checker compares
with what members were acknowledged. Every call answers None when the coordinator does not answer cleanly.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

from groupcoord.clients.lease import CHANNEL_OPTIONS
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from groupcoord.wire.v1 import share_pb2 as shpb
from groupcoord.wire.v1 import share_pb2_grpc as shpb_grpc
from groupcoord.wire.v1 import streams_pb2 as stpb
from groupcoord.wire.v1 import streams_pb2_grpc as stpb_grpc


class CoordinatorViews:
    def __init__(self, address: str, groups: dict[str, str], topic: str, share_topic: str) -> None:
        self.groups = groups
        self.topic = topic
        self.share_topic = share_topic
        self._channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)  # reconnect soon after a restart
        self.stub = pb_grpc.GroupCoordinatorStub(self._channel)
        self._share = shpb_grpc.ShareGroupCoordinatorStub(self._channel)
        self._streams = stpb_grpc.StreamsGroupCoordinatorStub(self._channel)

    def consumer_assignment(self) -> list[list[int]] | None:
        """Per member of the consumer group, its partitions; None unless every member is STABLE."""
        try:
            group = self.stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=[self.groups["consumer"]]),
                                             timeout=2).groups[0]
        except (grpc.RpcError, IndexError):
            return None
        if group.error_code or any(m.state != "STABLE" for m in group.members):
            return None
        return [sorted(p for tp in m.assignment for p in tp.partitions) for m in group.members]

    def streams_assignment(self) -> list[list[int]] | None:
        """Per member of the streams group, its active tasks; None unless the group is Stable and every member
        runs its target assignment."""
        try:
            group = self._streams.StreamsGroupDescribe(
                stpb.StreamsGroupDescribeRequest(group_ids=[self.groups["streams"]]), timeout=2).groups[0]
        except (grpc.RpcError, IndexError):
            return None
        if group.error_code or group.group_state != "Stable":
            return None
        out = []
        for m in group.members:
            active = sorted(p for t in m.active_tasks for p in t.partitions)
            if active != sorted(p for t in m.target_active_tasks for p in t.partitions):
                return None
            out.append(active)
        return out

    def committed_offsets(self, role: str = "consumer") -> tuple[tuple[int, int], ...] | None:
        """OffsetFetch of the whole consumer (or classic) group: (partition, committed offset), sorted."""
        try:
            resp = self.stub.OffsetFetch(pb.OffsetFetchRequest(group_id=self.groups[role], member_epoch=-1),
                                         timeout=10)
        except grpc.RpcError:
            return None
        if resp.error_code:
            return None
        return tuple(sorted((p.partition_index, p.committed_offset) for tp in resp.topics if tp.name == self.topic
                            for p in tp.partitions))

    def share_offsets(self) -> tuple[tuple[int, int, int], ...] | None:
        """DescribeShareGroupOffsets of the share group: (partition, start offset, end offset), sorted."""
        try:
            resp = self._share.DescribeShareGroupOffsets(
                shpb.DescribeShareGroupOffsetsRequest(group_id=self.groups["share"]), timeout=10)
        except grpc.RpcError:
            return None
        if resp.error_code:
            return None
        return tuple(sorted((p.partition, p.start_offset, p.end_offset) for p in resp.partitions
                            if p.topic_name == self.share_topic))

    def close(self) -> None:
        self._channel.close()


class RoutedViews:
    """The same views with several instances: each question goes to the instance that answers for its group
    (`owner(kind)`, the router's), and is None while no instance does."""

    def __init__(self, owner: Callable[[str], str | None], groups: dict[str, str], topic: str,
                 share_topic: str) -> None:
        self._owner = owner
        self._args = (groups, topic, share_topic)
        self._views: dict[str, CoordinatorViews] = {}

    def _at(self, kind: str) -> CoordinatorViews | None:
        address = self._owner(kind)
        if address is None:
            return None
        if address not in self._views:
            self._views[address] = CoordinatorViews(address, *self._args)
        return self._views[address]

    def consumer_assignment(self) -> list[list[int]] | None:
        views = self._at("consumer")
        return None if views is None else views.consumer_assignment()

    def streams_assignment(self) -> list[list[int]] | None:
        views = self._at("streams")
        return None if views is None else views.streams_assignment()

    def committed_offsets(self, role: str = "consumer") -> tuple[tuple[int, int], ...] | None:
        views = self._at(role)
        return None if views is None else views.committed_offsets(role)

    def share_offsets(self) -> tuple[tuple[int, int, int], ...] | None:
        views = self._at("share")
        return None if views is None else views.share_offsets()

    def close(self) -> None:
        for views in self._views.values():
            views.close()
