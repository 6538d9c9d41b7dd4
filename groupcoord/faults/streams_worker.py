"""One streams member process of the fault suite: a minimal KIP-1071 member over the generated stubs.

There is no streams client in `clients/` that runs without Kafka (`streams_member.WordCountMember` reads and
writes real topics), so this member speaks StreamsGroupHeartbeat itself, like the tests' `Member`: one
stateless subtopology "0" reading the topic, so task ("0", p) is partition p. It runs in one thread: heartbeat
at the coordinator's interval, reporting the active tasks it runs; process its tasks every `--interval-ms`.
It keeps a client-side lease (`clients/lease.py`): from when its last successful heartbeat was sent, for the
session minus a margin; no RPC waits past it, and when it runs out the member stops every task before it acts
again; it then joins again only one lease later (so does a member answered 69, the group unknown: a coordinator
restarted without state would otherwise give it tasks that others still run under their leases). A task it
is told to give up it keeps running until it reports it released: it stops it just before the next heartbeat
(sent 50 ms later), which omits it. So a coordinator that gives the task to another member before the owner
reported it released shows as two owners at once.
One JSON line per observation on stdout, flushed:

    {"ev": "assigned" | "revoked" | "lost", "t": MONOTONIC, "p": [TASK PARTITIONS]}
    {"ev": "process", "t": MONOTONIC, "p": [TASK PARTITIONS]}   # it acted on these tasks at that time

    python -m groupcoord.faults.streams_worker --target 127.0.0.1:PORT --group G --topic T --session-timeout-ms 3000
"""

from __future__ import annotations

import logging
import math
import sys
import time
import uuid

import grpc

from groupcoord.clients.lease import CHANNEL_OPTIONS, lease_duration_s
from groupcoord.faults.worker import Reporter
from groupcoord.faults.worker_cli import run_worker
from groupcoord.wire.v1 import streams_pb2 as spb
from groupcoord.wire.v1 import streams_pb2_grpc as spb_grpc

FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH, GROUP_ID_NOT_FOUND = 110, 25, 113, 69

log = logging.getLogger("groupcoord.faults.streams_worker")


class StreamsWorker:
    def __init__(self, target: str, group: str, topic: str, interval_s: float, rpc_timeout_s: float,
                 session_timeout_ms: int) -> None:
        self.target, self.group, self.topic = target, group, topic
        self.interval_s, self.rpc_timeout_s, self.session_timeout_ms = interval_s, rpc_timeout_s, session_timeout_ms
        self.member_id = str(uuid.uuid4())
        self.process_id = str(uuid.uuid4())
        self.epoch = 0
        self.heartbeat_interval_ms = 200
        self.active: set[int] = set()
        self.releasing: set[int] = set()  # active tasks the coordinator asked back: stopped at the next heartbeat
        self.rejoin_not_before = 0.0
        self.lease_until = -math.inf
        self.out = Reporter()
        self._channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        self._stub = spb_grpc.StreamsGroupCoordinatorStub(self._channel)

    def _request(self) -> spb.StreamsGroupHeartbeatRequest:
        req = spb.StreamsGroupHeartbeatRequest(group_id=self.group, member_id=self.member_id, member_epoch=self.epoch)
        if self.active:
            req.active_tasks.tasks.add(subtopology_id="0", partitions=sorted(self.active))
        req.active_tasks.SetInParent()
        req.standby_tasks.SetInParent()
        req.warmup_tasks.SetInParent()
        if self.epoch == 0:
            req.topology.CopyFrom(spb.StreamsTopology(epoch=1, subtopologies=[
                spb.StreamsSubtopology(subtopology_id="0", source_topics=[self.topic])]))
            req.process_id = self.process_id
            req.rebalance_timeout_ms = self.session_timeout_ms
        return req

    def drop(self, why: str) -> None:
        """Stop every task at once (`why`: revoked or lost)."""
        if self.active:
            self.out.emit(ev=why, t=time.monotonic(), p=sorted(self.active))
        self.active, self.releasing = set(), set()

    def lose(self) -> None:
        """The lease ran out: stop every task and join again as a new member (the coordinator removes the old one
        when its session runs out, if it has not already), once the other members' leases that began before
        ours ran out have run out too (`wait_for_leases`)."""
        self.drop("lost")
        self.member_id, self.epoch = str(uuid.uuid4()), 0
        self.wait_for_leases()

    def wait_for_leases(self) -> None:
        """Join again only one lease from now: a coordinator that forgot the group (restarted without state)
        would give this member tasks that others still run under their leases, as `GroupMember` does after 69."""
        self.rejoin_not_before = time.monotonic() + lease_duration_s(self.session_timeout_ms,
                                                                     self.heartbeat_interval_ms)

    def heartbeat(self) -> None:
        if self.releasing:  # stop them now; this heartbeat reports them released
            self.out.emit(ev="revoked", t=time.monotonic(), p=sorted(self.releasing))
            self.active -= self.releasing
            self.releasing = set()
        now = time.monotonic()
        if self.epoch == 0 and now < self.rejoin_not_before:
            return
        joined = self.epoch > 0
        deadline = self.rpc_timeout_s if self.lease_until < now else min(self.rpc_timeout_s,
                                                                          max(self.lease_until - now, 0.05))
        sent = time.monotonic()
        try:
            resp = self._stub.StreamsGroupHeartbeat(self._request(), timeout=deadline)
        except grpc.RpcError as e:
            log.info("heartbeat failed: %s", e.code())
            return
        # 69 to a member that had joined: the coordinator forgot the group (a restart without state)
        if resp.error_code in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH, GROUP_ID_NOT_FOUND):
            self.drop("lost")
            self.epoch = 0
            if resp.error_code == GROUP_ID_NOT_FOUND and joined:
                self.wait_for_leases()
            return
        if resp.error_code:
            log.warning("heartbeat error %d: %s", resp.error_code, resp.error_message)
            return
        if time.monotonic() >= self.lease_until and self.epoch > 0:
            self.lose()  # the reply came after the lease ran out: what we held may be someone else's
            return
        self.lease_until = sent + lease_duration_s(self.session_timeout_ms, self.heartbeat_interval_ms)
        self.epoch = resp.member_epoch
        self.heartbeat_interval_ms = max(resp.heartbeat_interval_ms, 10)
        if resp.HasField("active_tasks"):
            target = {p for t in resp.active_tasks.tasks if t.subtopology_id == "0" for p in t.partitions}
            new = target - self.active
            self.releasing = self.active - target
            self.active |= new
            if new:
                self.out.emit(ev="assigned", t=time.monotonic(), p=sorted(new))

    def run(self) -> None:
        next_beat = next_process = 0.0
        while True:
            now = time.monotonic()
            if self.epoch > 0 and now >= self.lease_until:
                self.lose()
            if now >= next_beat:
                self.heartbeat()
                next_beat = time.monotonic() + (0.05 if self.releasing else self.heartbeat_interval_ms / 1000)
            now = time.monotonic()
            if self.active and now < self.lease_until and now >= next_process:
                self.out.emit(ev="process", t=now, p=sorted(self.active))
                next_process = now + self.interval_s
            time.sleep(0.02)


def main(argv: list[str] | None = None) -> int:
    return run_worker("groupcoord.faults.streams_worker", StreamsWorker, argv)


if __name__ == "__main__":
    sys.exit(main())
