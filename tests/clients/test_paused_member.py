"""A member process SIGSTOPped past its lease and then resumed never acts on the partitions it held: its
first reads after the resume, made before its heartbeat thread has run, are already empty.

The child process reads `assignment()` in a loop and logs each read with the time.monotonic() taken just
before it (CLOCK_MONOTONIC is one clock for every process on the machine); the checker compares those claims
with the other members' ownership intervals from their callbacks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from groupcoord.clients.group_member import GroupMember
from tests.clients.cluster import Coordinator, TopicPartition, wait_until

CHILD = """
import json, sys, time
from groupcoord.clients.group_member import GroupMember
member = GroupMember(sys.argv[1], "paused", ["orders"], rpc_timeout_s=2).start()
while True:
    t = time.monotonic()
    claimed = sorted(member.assignment())
    print(json.dumps([t, claimed]), flush=True)
    time.sleep(0.005)
"""

SETTINGS = {"group.consumer.min.heartbeat.interval.ms": 20, "group.consumer.heartbeat.interval.ms": 100,
            "group.consumer.min.session.timeout.ms": 500, "group.consumer.session.timeout.ms": 2000,
            "group.consumer.assignment.interval.ms": 0}


def child_claims(path: Path) -> list[tuple[float, frozenset[TopicPartition]]]:
    out = []
    for line in path.read_text().splitlines():
        try:
            t, tps = json.loads(line)
        except ValueError:
            continue  # a line cut short by the kill
        out.append((t, frozenset((topic, p) for topic, p in tps)))
    return out


class Ownership:
    """Intervals during which the in-process members owned each partition, from their callbacks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.intervals: dict[tuple[int, TopicPartition], list[float]] = {}
        self.closed: list[tuple[TopicPartition, float, float]] = []

    def callbacks(self, who: int) -> dict[str, object]:
        def gained(tps: frozenset[TopicPartition]) -> None:
            with self.lock:
                for tp in tps:
                    self.intervals[(who, tp)] = [time.monotonic()]

        def dropped(tps: frozenset[TopicPartition]) -> None:
            with self.lock:
                for tp in tps:
                    start = self.intervals.pop((who, tp), None)
                    if start is not None:
                        self.closed.append((tp, start[0], time.monotonic()))
        return {"on_assigned": gained, "on_revoked": dropped, "on_lost": dropped}

    def owned_by_others(self, tp: TopicPartition, t: float) -> bool:
        with self.lock:
            if any(p == tp and start <= t < end for p, start, end in self.closed):
                return True
            return any(p == tp and start[0] <= t for (_, p), start in self.intervals.items())


def test_a_paused_member_never_acts_on_partitions_after_its_lease(tmp_path: Path) -> None:
    coordinator = Coordinator(SETTINGS).start()
    log_path = tmp_path / "child.jsonl"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    with log_path.open("w") as out:
        child = subprocess.Popen([sys.executable, "-c", CHILD, coordinator.address], stdout=out,
                                 stderr=subprocess.DEVNULL, env=env)
    ownership = Ownership()
    others: list[GroupMember] = []
    try:
        wait_until(lambda: any(len(tps) == 12 for _, tps in child_claims(log_path)), 30, "the child owns all")
        others = [GroupMember(coordinator.address, "paused", ["orders"], rpc_timeout_s=2,
                              **ownership.callbacks(i)).start() for i in range(2)]  # type: ignore[arg-type]

        def spread() -> bool:
            claims = child_claims(log_path)
            return bool(claims) and 0 < len(claims[-1][1]) < 12 and all(m.assignment() for m in others)
        wait_until(spread, 30, "the three members share the partitions")
        held = child_claims(log_path)[-1][1]
        paused = time.monotonic()
        os.kill(child.pid, signal.SIGSTOP)
        wait_until(lambda: sum(len(m.assignment()) for m in others) == 12, 30, "the others take over")
        time.sleep(0.3)
        os.kill(child.pid, signal.SIGCONT)
        resumed = time.monotonic()
        wait_until(lambda: child_claims(log_path)[-1][0] > resumed + 1.0, 30, "the child runs on")
        claims = child_claims(log_path)
        after = [(t, tps) for t, tps in claims if t > resumed]
        assert after, "the child read its assignment after the resume"
        violations = [(t, tp) for t, tps in claims for tp in tps if ownership.owned_by_others(tp, t)]
        assert violations == [], f"the resumed child claimed partitions others owned: {violations[:5]}"
        assert held and not after[0][1] & held, "its first read after the resume is already without them"
        assert paused < resumed
    finally:
        os.kill(child.pid, signal.SIGCONT)
        child.kill()
        child.wait()
        for m in others:
            m.close()
        coordinator.stop()
