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
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from typing import Any

from groupcoord.clients.group_member import GroupMember, TopicPartition


class Reporter:
    def __init__(self) -> None:
        self._lock = threading.Lock()

    def emit(self, **fields: Any) -> None:
        line = json.dumps(fields, separators=(",", ":"))
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


class Worker:
    def __init__(self, target: str, group: str, topic: str, interval_s: float, rpc_timeout_s: float) -> None:
        self.topic = topic
        self.interval_s = interval_s
        self.out = Reporter()
        self._state = threading.Lock()  # guards `owned`; never held across an RPC
        self._commit = threading.Lock()  # held while a commit is in flight
        self.owned: set[int] = set()
        self.member = GroupMember(target, group, [topic], on_assigned=self.on_assigned,
                                  on_revoked=self.on_revoked, on_lost=self.on_lost, rpc_timeout_s=rpc_timeout_s)

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
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    Worker(args.target, args.group, args.topic, args.interval_ms / 1000, args.rpc_timeout_ms / 1000).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
