"""One member process of the fault suite: a real `GroupMember` that commits for what it owns and reports.

Why a process of its own: the nemesis must kill -9 and SIGSTOP members, which only a real process allows.
It writes one JSON line per observation to stdout, flushed at once, so a kill loses nothing it reported:

    {"ev": "assigned" | "revoked" | "lost", "t": MONOTONIC, "p": [PARTITIONS]}
    {"ev": "commit", "ts": SENT, "t": DONE, "try": [PARTITIONS], "ok": {"P": OFFSET}}
    {"ev": "fatal", "t": MONOTONIC, "error": "..."}   # the client stopped on an error it deemed fatal

Offsets are the monotonic clock in microseconds at sending, so a later commit carries a larger offset.
The application behaves as a careful consumer: it commits only for partitions that both its callbacks and
``assignment()`` say it owns; ``on_revoked`` waits for the commit in flight before it returns (the revocation
is acknowledged after it); ``on_lost`` stops at once (the partitions are gone).

    python -m groupcoord.faults.worker --target 127.0.0.1:PORT --group G --topic T [--interval-ms 50]

`--protocol classic` runs the same application on a `ClassicGroupMember` (JoinGroup/SyncGroup, cooperative-sticky
assignment computed by the leader; `--partitions` tells it the topic's size), so classic groups are checked by
the same history and checker. `--pin-target`: every coordinator address the client learns from FindCoordinator
is reached through `--target` all the same (the Kafka-backed suite's proxy follows the group to its instance).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
import threading
import time
from typing import Any

import grpc

from groupcoord.clients.classic_member import ClassicGroupMember
from groupcoord.clients.group_member import GroupMember, TopicPartition
from groupcoord.clients.lease import CHANNEL_OPTIONS


class Reporter:
    def __init__(self) -> None:
        self._lock = threading.Lock()

    def emit(self, **fields: Any) -> None:
        line = json.dumps(fields, separators=(",", ":"))
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


def _pinned_channel(target: str, address: str) -> grpc.Channel:
    """A channel to `target` whatever `address` FindCoordinator named: the proxy in front routes it."""
    return grpc.insecure_channel(target, options=CHANNEL_OPTIONS)


class Worker:
    def __init__(self, target: str, group: str, topic: str, interval_s: float, rpc_timeout_s: float, *,
                 protocol: str = "consumer", partitions: int = 0, session_timeout_ms: int = 10_000,
                 pin_target: bool = False) -> None:
        self.topic = topic
        self.interval_s = interval_s
        self.out = Reporter()
        self._state = threading.Lock()  # guards `owned`; never held across an RPC
        self._commit = threading.Lock()  # held while a commit is in flight
        self.owned: set[int] = set()
        self.member: GroupMember | ClassicGroupMember
        if protocol == "classic":
            self.member = ClassicGroupMember(
                target, group, [topic], partitions={topic: partitions}, on_assigned=self.on_assigned,
                on_revoked=self.on_revoked, on_lost=self.on_lost, session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=session_timeout_ms, heartbeat_interval_ms=max(50, session_timeout_ms // 10),
                rpc_timeout_s=rpc_timeout_s)
        else:
            factory = functools.partial(_pinned_channel, target) if pin_target else None
            self.member = GroupMember(target, group, [topic], on_assigned=self.on_assigned,
                                      on_revoked=self.on_revoked, on_lost=self.on_lost, rpc_timeout_s=rpc_timeout_s,
                                      channel_factory=factory)

    def on_assigned(self, tps: frozenset[TopicPartition]) -> None:
        ps = sorted(p for _, p in tps)
        t = time.monotonic()
        with self._state:
            self.owned.update(ps)
        self.out.emit(ev="assigned", t=t, p=ps)

    def on_revoked(self, tps: frozenset[TopicPartition]) -> None:
        ps = sorted(p for _, p in tps)
        with self._commit, self._state:
            self.owned.difference_update(ps)
            t = time.monotonic()
        self.out.emit(ev="revoked", t=t, p=ps)

    def on_lost(self, tps: frozenset[TopicPartition]) -> None:
        ps = sorted(p for _, p in tps)
        with self._state:
            self.owned.difference_update(ps)
            t = time.monotonic()
        self.out.emit(ev="lost", t=t, p=ps)

    def commit_once(self) -> None:
        # What the client says this process may read now (taken outside our locks: a client may call back
        # under its own lock). Acting needs both our callbacks' view and the client's.
        allowed = {p for topic, p in self.member.assignment() if topic == self.topic}
        with self._commit:
            with self._state:
                ps = sorted(self.owned & allowed)
                t_sent = time.monotonic()
            if not ps:
                return
            offset = int(t_sent * 1_000_000)
            ok: dict[str, int] = {}
            try:
                errors = self.member.commit_offsets({(self.topic, p): offset for p in ps})
                ok = {str(p): offset for (_, p), code in errors.items() if code == 0}
            except Exception as e:  # a failed commit is not acknowledged; report the attempt all the same
                logging.getLogger("groupcoord.faults.worker").info("commit failed: %s", type(e).__name__)
            self.out.emit(ev="commit", ts=t_sent, t=time.monotonic(), ok=ok, **{"try": ps})

    def run(self) -> None:
        self.member.start()
        fatal_reported = False
        while True:
            time.sleep(self.interval_s)
            self.commit_once()
            if self.member.fatal_error is not None and not fatal_reported:
                fatal_reported = True
                self.out.emit(ev="fatal", t=time.monotonic(), error=str(self.member.fatal_error)[:200])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="groupcoord.faults.worker")
    p.add_argument("--target", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--interval-ms", type=int, default=50)
    p.add_argument("--rpc-timeout-ms", type=int, default=2000)
    p.add_argument("--protocol", choices=("consumer", "classic"), default="consumer")
    p.add_argument("--partitions", type=int, default=0, help="classic: the topic's partition count")
    p.add_argument("--session-timeout-ms", type=int, default=10_000, help="classic: the member's session")
    p.add_argument("--pin-target", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    Worker(args.target, args.group, args.topic, args.interval_ms / 1000, args.rpc_timeout_ms / 1000,
           protocol=args.protocol, partitions=args.partitions, session_timeout_ms=args.session_timeout_ms,
           pin_target=args.pin_target).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
