"""One share member process of the fault suite: a real `ShareMember` that acquires, processes and acknowledges.

The log it reads is synthetic: every partition's end grows with the monotonic clock (`RATE` records a second)
from log start 0, and the member sends those watermarks with each ShareAcquire (`ShareMember(watermarks=...)`),
so no Kafka is needed and every process sees the same log. The member heartbeats in a thread of its own and
keeps a client-side membership lease (`clients/lease.py`): from when its last successful heartbeat was sent,
for the session minus a margin. It holds an acquired range until the earlier of the lock deadline the client
computed (from when it sent ShareAcquire) and that lease; it acknowledges only before that, ACCEPT mostly and
RELEASE now and then (so records are redelivered, too). It processes most acquisitions quickly and one in ten
for most of the lock duration, so that other members ask for records while those are still locked. Once it
sends an acknowledgement it is done with those records, whatever the answer (a reply lost on the way does not
tell whether the coordinator applied it).
One JSON line per observation on stdout, flushed:

    {"ev": "acquired", "ts": SENT, "t": RECEIVED, "until": HELD_UNTIL, "r": [[P, FIRST, LAST], ...]}
    {"ev": "ack_sent", "t": SENT, "type": "accept" | "release", "r": [[P, FIRST, LAST], ...]}   # before sending
    {"ev": "acked", "ts": SENT, "t": RECEIVED, "type": "accept" | "release", "r": [[P, FIRST, LAST], ...]}

`acked` lists only the ranges acknowledged without error; a failed or unanswered acknowledgement has none.

    python -m groupcoord.faults.share_worker --target 127.0.0.1:PORT --group G --topic T --session-timeout-ms 3000
"""

from __future__ import annotations

import logging
import math
import random
import sys
import threading
import time

import grpc

from groupcoord.clients.lease import CHANNEL_OPTIONS, lease_duration_s
from groupcoord.clients.share_member import (
    ACCEPT,
    FENCED_MEMBER_EPOCH,
    GROUP_ID_NOT_FOUND,
    RELEASE,
    UNKNOWN_MEMBER_ID,
    ShareMember,
)
from groupcoord.faults.worker import Reporter
from groupcoord.faults.worker_cli import run_worker

RATE = 50  # records a second per partition
RELEASE_ONE_IN = 10  # acquisitions given back with RELEASE instead of ACCEPT
SLOW_ONE_IN = 10  # acquisitions processed for most of the lock duration

log = logging.getLogger("groupcoord.faults.share_worker")


def watermarks(topic: str, partition: int) -> tuple[int, int]:
    return 0, int(time.monotonic() * RATE)


class ShareWorker:
    def __init__(self, target: str, group: str, topic: str, interval_s: float, rpc_timeout_s: float,
                 session_timeout_ms: int) -> None:
        self.interval_s = interval_s
        self.session_timeout_ms = session_timeout_ms
        self.out = Reporter()
        self.lease_until = -math.inf
        self.last_heartbeat_error: object = 0  # an error code or a gRPC status: logged when it changes
        self.rng = random.Random()
        channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        self.member = ShareMember(target, group, [topic], "", channel=channel, watermarks=watermarks,
                                  rpc_timeout_s=rpc_timeout_s)

    def heartbeat_loop(self) -> None:
        while True:
            sent = time.monotonic()
            try:
                resp = self.member.heartbeat()
            except grpc.RpcError as e:
                (log.warning if e.code() != self.last_heartbeat_error else log.info)("heartbeat failed: %s", e.code())
                self.last_heartbeat_error = e.code()
                time.sleep(0.05)
                continue
            if resp.error_code == 0:
                interval_ms = int(self.member.heartbeat_interval_s * 1000)
                self.lease_until = sent + lease_duration_s(self.session_timeout_ms, interval_ms)
            elif resp.error_code in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND):
                self.lease_until = -math.inf  # no longer a member: the coordinator released what we held
            if resp.error_code and resp.error_code != self.last_heartbeat_error:
                log.warning("heartbeat answered %d: %s", resp.error_code, resp.error_message[:200])
            self.last_heartbeat_error = resp.error_code
            time.sleep(self.member.heartbeat_interval_s)

    def processing_s(self) -> float:
        """Mostly quick; one time in `SLOW_ONE_IN` most of the lock duration, so that another member asks for
        records while these are still locked (a coordinator that let a lock go early would hand them out)."""
        lock_s = self.member.record_lock_duration_ms / 1000
        if self.rng.randrange(SLOW_ONE_IN) == 0 and lock_s > 0:
            return self.rng.uniform(0.4, 0.7) * lock_s
        return self.rng.uniform(0, self.interval_s)

    def step(self) -> None:
        lease = self.lease_until
        sent = time.monotonic()
        if sent >= lease:
            return
        try:
            got = self.member.acquire(max_records=100)
        except grpc.RpcError as e:
            log.info("acquire failed: %s", e.code())
            return
        if not got:
            if self.member.last_error is not None:  # an answer with an error: say which
                log.warning("acquire answered %d: %s", *self.member.last_error)
                self.member.last_error = None
            return
        until = min(min(r.lock_deadline for r in got), lease)
        self.out.emit(ev="acquired", ts=sent, t=time.monotonic(), until=until,
                      r=[[r.partition, r.first_offset, r.last_offset] for r in got])
        time.sleep(self.processing_s())
        kind = RELEASE if self.rng.randrange(RELEASE_ONE_IN) == 0 else ACCEPT
        ack_sent = time.monotonic()
        if ack_sent >= until:
            return  # too late: the lock (or the membership) may be gone; the records come back to someone
        type_name = "accept" if kind == ACCEPT else "release"
        self.out.emit(ev="ack_sent", t=ack_sent, type=type_name,
                      r=[[r.partition, r.first_offset, r.last_offset] for r in got])
        try:
            results = self.member.acknowledge_ranges(got, kind)
        except grpc.RpcError as e:
            log.info("acknowledge failed: %s", e.code())
            return
        ok = [[r.partition, r.first_offset, r.last_offset] for r in results if r.error_code == 0]
        if ok:
            self.out.emit(ev="acked", ts=ack_sent, t=time.monotonic(), type=type_name, r=ok)

    def run(self) -> None:
        threading.Thread(target=self.heartbeat_loop, daemon=True, name="share-heartbeat").start()
        while True:
            time.sleep(self.interval_s)
            self.step()


def main(argv: list[str] | None = None) -> int:
    return run_worker("groupcoord.faults.share_worker", ShareWorker, argv)


if __name__ == "__main__":
    sys.exit(main())
