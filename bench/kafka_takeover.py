"""Takeover in the Kafka-backed mode: how long a dead (or stopped) instance's groups go unserved.

    python -m bench.kafka_takeover [--rounds 3] [--sessions 10000,3000,1000]

For each `--state-session-timeout-ms` in `--sessions`, a fresh `faults.kafka_cluster.KafkaModeCluster` (3 Kafka
brokers, 3 instances, two consumer members committing), then `--rounds` times: kill -9 the instance serving the
consumer group, wait until every group is served elsewhere, start it again. Then the same with SIGTERM (a clean
leave of the coordinators' group) at the longest session. Takeover is what the probes saw (`availability.py`):
from the kill (or SIGTERM) to the first answer from another instance, for each group the instance served.
Kafka waits the session timeout for a dead member; the new owner then fences the old writer and replays the
partition (`replay` is the instances' own log line, per partition load).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from groupcoord.faults.availability import percentile, takeovers
from groupcoord.faults.cluster import Timing
from groupcoord.faults.kafka_cluster import KafkaModeCluster, KafkaTiming


def run_case(how: str, session_ms: int, rounds: int, workdir: Path) -> tuple[list[float], list[float]]:
    """(takeover seconds per group moved, replay seconds per partition load)."""
    cluster = KafkaModeCluster(workdir, 2, 12, Timing(), KafkaTiming(state_session_timeout_ms=session_ms))
    try:
        cluster.start()
        time.sleep(3)
        for r in range(rounds):
            victim = cluster.target_instance(0)  # the consumer group's instance
            loads = len(cluster.replay_times())
            if how == "kill-9":
                cluster.kill_instance(victim)
            else:
                cluster.stop_instance(victim)
            cluster.wait_for(lambda v=victim: cluster.router.all_served()  # type: ignore[misc]
                             and v.address not in cluster.router.owners().values(), session_ms / 1000 * 4 + 60)
            replays = [s for _, _, s in cluster.replay_times()[loads:]]
            print(f"  round {r + 1}: groups served elsewhere; {len(replays)} partition load(s)", flush=True)
            cluster.start_instance(victim)
            cluster.wait_for(cluster.router.all_served, 60)
            time.sleep(2)
        fault = "instance-kill-9" if how == "kill-9" else "instance-sigterm"
        taken = [s for _, s in takeovers(cluster.snapshot(), fault)]
        return taken, [s for _, _, s in cluster.replay_times()]
    finally:
        cluster.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.kafka_takeover", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sessions", default="10000,3000,1000", help="--state-session-timeout-ms values to try")
    args = p.parse_args(argv)
    sessions = [int(s) for s in args.sessions.split(",")]
    cases = [("kill-9", s) for s in sessions] + [("sigterm", max(sessions))]
    rows = []
    for how, session_ms in cases:
        workdir = Path(tempfile.mkdtemp(prefix=f"kafka-takeover-{how}-{session_ms}-"))
        print(f"{how}, state session {session_ms} ms ({workdir})", flush=True)
        taken, replays = run_case(how, session_ms, args.rounds, workdir)
        rows.append((how, session_ms, taken, replays))
    print(f"{'how':<8} {'session ms':>10} {'groups':>6} {'takeover p50 s':>14} {'max s':>6} "
          f"{'replay p50 s':>12} {'max s':>6}")
    for how, session_ms, taken, replays in rows:
        t50, tmax = (percentile(taken, 0.5), max(taken)) if taken else (float("nan"), float("nan"))
        r50, rmax = (percentile(replays, 0.5), max(replays)) if replays else (float("nan"), float("nan"))
        print(f"{how:<8} {session_ms:>10} {len(taken):>6} {t50:>14.2f} {tmax:>6.2f} {r50:>12.2f} {rmax:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
