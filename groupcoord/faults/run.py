"""`groupcoord faults`: run the fault suite (Jepsen-style) and print its figures.

    groupcoord faults --minutes 30 --seed 1          # the long run quoted in the README
    groupcoord faults --steps 8 --seed 7             # each fault kind once (the suite's short run)
    groupcoord faults --members 4 --share-members 0 --streams-members 0   # consumer members only
    groupcoord faults --mode kafka --minutes 30 --seed 1   # 3 Kafka brokers, 3 instances (kafka_cluster.py)

Members of three kinds run side by side, each kind in its own group on one topic: consumer-group members
(`--members`), share-group members (`--share-members`) and streams-group members (`--streams-members`).
Each step injects one fault from the seeded schedule (`nemesis.py`), holds it, heals it, waits until every
group converges (every partition owned by exactly one live consumer, every task by exactly one live streams
member, the coordinator agreeing, every share member acknowledging again, with no ownership change for a
settle window), reads back the committed offsets and share-partition offsets, and checks the whole history
so far (`checker.py`, `checker_share.py`). A progress line per step; the figures per member kind at the end.
Exit status 1 when any violation was found.

`--mode kafka` runs the same members (and classic-group members, `--classic-members`) against instances of
the Kafka-backed mode over a real 3-broker Kafka cluster, with the faults of `nemesis_kafka.py`; at the end a
fresh instance, started alone, replays the state topic and the acknowledged commits and share acknowledgements
are read back from it. It adds the unavailability table, takeover times and replay times (`availability.py`).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TextIO

from groupcoord.faults.availability import kafka_figures
from groupcoord.faults.checker import Event, Findings, Kind, check
from groupcoord.faults.cluster import Cluster, Timing
from groupcoord.faults.kafka_cluster import KafkaModeCluster, KafkaTiming
from groupcoord.faults.nemesis import Fault, aimed_at_member, inject, schedule
from groupcoord.faults.nemesis_kafka import KAFKA_MODE_FAULTS, KAFKA_WEIGHTS, KafkaFault, inject_kafka, kafka_hold


@dataclass(frozen=True, slots=True)
class Options:
    seed: int = 1
    minutes: float = 0.0
    steps: int = 0  # 0: as many as fit in `minutes`
    members: int = 4
    share_members: int = 2
    streams_members: int = 2
    partitions: int = 12
    share_partitions: int = 1
    timing: Timing = Timing()
    converge_timeout_s: float | None = None  # None: 30 s; --mode kafka: KafkaTiming.converge_bound_s
    pause_s: float = 0.5  # normal operation between steps
    stop_on_violation: bool = False
    faults: tuple[StrEnum, ...] = tuple(Fault)
    workdir: Path | None = None
    mode: str = "single"  # single | kafka
    classic_members: int = 0
    kafka: KafkaTiming = KafkaTiming()


@dataclass(slots=True)
class Report:
    steps: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    member_faults: Counter[str] = field(default_factory=Counter)  # member kind -> faults aimed at one of them
    convergence_s: list[tuple[float, str]] = field(default_factory=list)
    step_starts: list[tuple[float, str]] = field(default_factory=list)  # (monotonic time, fault kind)
    findings: Findings = field(default_factory=Findings)
    fatal_member_errors: int = 0
    elapsed_s: float = 0.0
    workdir: str = ""
    kafka_figures: str = ""  # --mode kafka: unavailability, takeover and replay figures
    durations: list[tuple[str, float, float]] = field(default_factory=list)  # (phase, fault s, converge s)

    @property
    def violations(self) -> int:
        return len(self.findings.violations)

    @property
    def not_converged(self) -> int:
        return self.findings.by_kind().get("not_converged", 0)

    def violations_by_fault(self) -> Counter[tuple[str, str]]:
        """(violation kind, the fault of the step in which it began) -> count."""
        out: Counter[tuple[str, str]] = Counter()
        for v in self.findings.violations:
            fault = next((k for t, k in reversed(self.step_starts) if t <= v.t), "start")
            out[(v.kind, fault)] += 1
        return out

    def worst_convergence(self) -> tuple[float, str]:
        return max(self.convergence_s, default=(0.0, "-"))


def wait_converged(cluster: Cluster, healed: float, timeout_s: float, settle_s: float) -> float | None:
    """Seconds from `healed` until the group converged and stayed so for `settle_s`; None on timeout."""
    deadline = healed + timeout_s
    while time.monotonic() < deadline:
        if cluster.converged(healed) and time.monotonic() - cluster.quiet_since() >= settle_s:
            return max(healed, cluster.quiet_since()) - healed
        time.sleep(0.05)
    return None


def _not_converged_detail(cluster: Cluster, healed: float) -> str:
    live = cluster.live_members()
    owners = cluster.state.owners(cluster.live_members("consumer"))
    unowned = cluster.partitions - len(owners) if cluster.of_role("consumer") else 0
    shared = sum(1 for v in owners.values() if len(v) > 1)
    fatal = sum(m.fatal for m in cluster.members)
    kinds = ", ".join(cluster.not_converged_kinds(healed)) or "none"
    return (f"not converged: {kinds}; {unowned} partition(s) unowned, {shared} claimed by several consumers, "
            f"{len(live)}/{len(cluster.members)} members live, {fatal} member(s) stopped on a fatal client error")


def converge_timeout_s(opts: Options) -> float:
    if opts.converge_timeout_s is not None:
        return opts.converge_timeout_s
    return opts.kafka.converge_bound_s(opts.timing.session_timeout_ms) if opts.mode == "kafka" else 30.0


def _settle_then_check(cluster: Cluster, label: str, healed: float, opts: Options, report: Report) -> str:
    settle_s = max(1.0, 5 * opts.timing.heartbeat_interval_ms / 1000)
    bound = converge_timeout_s(opts)
    took = wait_converged(cluster, healed, bound, settle_s)
    if took is None:
        detail = f"{label}: {_not_converged_detail(cluster, healed)}"
        cluster.record(Event(time.monotonic(), Kind.NOT_CONVERGED, detail=detail))
        outcome = f"NOT converged within {bound:.0f} s"
    else:
        report.convergence_s.append((took, label))
        outcome = f"converged in {took:.2f} s"
    for _ in range(20):
        if cluster.fetch_offsets():
            break
        time.sleep(0.25)
    report.findings = check(cluster.snapshot())
    return outcome


def run(opts: Options, out: TextIO = sys.stdout) -> Report:
    def say(line: str) -> None:
        print(f"[{time.monotonic() - started:7.1f} s] {line}", file=out, flush=True)

    started = time.monotonic()
    report = Report()
    workdir = opts.workdir or Path(tempfile.mkdtemp(prefix="groupcoord-faults-"))
    report.workdir = str(workdir)
    kafka = opts.mode == "kafka"
    cluster: Cluster
    if kafka:
        cluster = KafkaModeCluster(workdir, opts.members, opts.partitions, opts.timing, opts.kafka,
                                   share_members=opts.share_members, streams_members=opts.streams_members,
                                   classic_members=opts.classic_members, share_partitions=opts.share_partitions)
    else:
        cluster = Cluster(workdir, opts.members, opts.partitions, opts.timing, share_members=opts.share_members,
                          streams_members=opts.streams_members, share_partitions=opts.share_partitions,
                          classic_members=opts.classic_members)
    roles = [m.role for m in cluster.members]
    if isinstance(cluster, KafkaModeCluster):
        step_of = schedule(opts.seed, len(roles), opts.kafka.state_session_timeout_ms / 1000, opts.faults, roles,
                           KAFKA_WEIGHTS, kafka_hold)
        kafka_cluster = cluster
        inject_step = lambda step: inject_kafka(kafka_cluster, step)  # noqa: E731
        where = (f"{opts.kafka.brokers} Kafka brokers (session {opts.kafka.broker_session_timeout_ms} ms), "
                 f"{opts.kafka.instances} instances, state topic of {opts.kafka.state_partitions} partitions, "
                 f"state session {opts.kafka.state_session_timeout_ms} ms")
    else:
        step_of = schedule(opts.seed, len(roles), opts.timing.session_timeout_ms / 1000, opts.faults, roles)
        inject_step = lambda step: inject(cluster, step)  # noqa: E731
        where = "one coordinator with a state dir"
    say(f"seed {opts.seed}: {where}; {opts.members} consumer, {opts.classic_members} classic, {opts.share_members} "
        f"share and {opts.streams_members} streams members, topics t:{opts.partitions} and "
        f"t-queue:{opts.share_partitions} (share), session {opts.timing.session_timeout_ms} ms, heartbeat "
        f"{opts.timing.heartbeat_interval_ms} ms; convergence bound {converge_timeout_s(opts):.0f} s; "
        f"workdir {workdir}")
    try:
        t0 = time.monotonic()
        cluster.start()
        t1 = time.monotonic()
        outcome = _settle_then_check(cluster, "start", t1, opts, report)
        report.durations.append(("start", t1 - t0, time.monotonic() - t1))
        phases = ", ".join(f"{what} at {s:.1f} s" for what, s in getattr(cluster, "start_phases", []))
        say(f"start: {outcome}; {_took(report.durations[-1])}" + (f"; {phases}" if phases else ""))
        end = started + opts.minutes * 60
        n = 0
        while (opts.steps and n < opts.steps) or (not opts.steps and time.monotonic() < end):
            n += 1
            step = step_of(n)
            t0 = time.monotonic()
            report.step_starts.append((t0, step.fault.value))
            inject_step(step)
            t1 = time.monotonic()
            report.steps = n
            report.faults[step.fault.value] += 1
            target = cluster.members[step.target]
            if aimed_at_member(step.fault):
                report.member_faults[target.role] += 1
            outcome = _settle_then_check(cluster, f"step {n} {step.fault}", t1, opts, report)
            report.durations.append((f"step {n} {step.fault}", t1 - t0, time.monotonic() - t1))
            kinds = ", ".join(f"{k}={v}" for k, v in sorted(report.findings.by_kind().items())) or "none"
            say(f"step {n}: {step.describe(target.name.split('.')[0])}: {outcome}; {_took(report.durations[-1])}; "
                f"violations so far: {kinds}")
            if opts.stop_on_violation and report.violations:
                say("stopping at the first violation (--stop-on-violation)")
                break
            time.sleep(opts.pause_s)
        if isinstance(cluster, KafkaModeCluster):
            say("read-back: every member and instance stopped, a fresh instance replays the state topic")
            t0 = time.monotonic()
            report.step_starts.append((t0, READ_BACK))
            if not cluster.read_back_fresh():
                cluster.record(Event(time.monotonic(), Kind.NOT_CONVERGED,
                                     detail="read-back: the fresh instance did not serve every group in time"))
            report.findings = check(cluster.snapshot())
            report.durations.append((READ_BACK, time.monotonic() - t0, 0.0))
            say(f"read-back: {report.findings.acknowledged_commits} acknowledged commits and "
                f"{report.findings.records_accepted} accepted share records checked against the fresh instance")
    except KeyboardInterrupt:
        say("interrupted: the figures cover the steps completed")
    finally:
        if isinstance(cluster, KafkaModeCluster):
            report.kafka_figures = kafka_figures(cluster.snapshot(), report.step_starts, report.faults,
                                                 cluster.replay_times(), opts.kafka.state_session_timeout_ms)
        report.fatal_member_errors = sum(m.fatal for m in cluster.members)
        cluster.close()
        report.elapsed_s = time.monotonic() - started
        if opts.workdir is None and not report.violations:
            shutil.rmtree(workdir, ignore_errors=True)
    return report


READ_BACK = "read-back"  # the steps' label for the final read-back (its unavailability is by design)


def _took(phase: tuple[str, float, float]) -> str:
    _, fault_s, converge_s = phase
    return f"took {fault_s + converge_s:.1f} s (fault {fault_s:.1f} s, then {converge_s:.1f} s to converge and check)"


def durations(report: Report) -> str:
    """Where the wall time went: per phase, the fault (injected, held, healed; start: processes up) and the wait
    for convergence with its settle window and read-backs."""
    lines = ["wall time per phase (fault: injected, held and healed; converge: settled and read back)",
             f"  {'phase':<36} {'fault s':>8} {'converge s':>11} {'total s':>8}"]
    lines += [f"  {label:<36} {f:>8.1f} {c:>11.1f} {f + c:>8.1f}" for label, f, c in report.durations]
    return "\n".join(lines)

VIOLATIONS_BY_KIND = {
    "consumer and classic": ("double_ownership", "lost_commit"),
    "share": ("share_double_acquire", "share_redelivered", "share_double_accept", "share_lost_ack"),
    "streams": ("streams_double_active",),
    "all kinds": ("not_converged",),
}


def figures(report: Report) -> str:
    f = report.findings
    worst, where = report.worst_convergence()
    by_kind = f.by_kind()
    lines = [
        "fault suite figures",
        f"  elapsed                        {report.elapsed_s:.0f} s",
        f"  steps (faults injected)        {report.steps}",
        *(f"    {k:<28} {n}" for k, n in sorted(report.faults.items())),
        "  member faults by member kind   " + (", ".join(f"{k} {n}" for k, n in sorted(report.member_faults.items()))
                                             or "none"),
        "  consumer members",
        f"    acknowledged commits         {f.acknowledged_commits}",
        f"    ownership intervals          {f.ownership_intervals}",
        f"    lost by design (stateless restart; not violations) {f.lost_by_design} partition offsets",
        "  share members",
        f"    records acquired             {f.records_acquired}",
        f"    records accepted (acked)     {f.records_accepted}",
        f"    accepted, forgotten by design (stateless restart; not violations) {f.share_lost_by_design}",
        "  streams members",
        f"    active-task intervals        {f.task_intervals}",
        f"  violations                     {len(f.violations)}",
    ]
    for kind, names in VIOLATIONS_BY_KIND.items():
        lines.append(f"    {kind}")
        lines.extend(f"      {k:<26} {by_kind.get(k, 0)}" for k in names)
    lines += [
        f"  worst time to converge         {worst:.2f} s ({where}); {report.not_converged} step(s) did not converge",
        f"  members stopped on a fatal client error {report.fatal_member_errors}",
    ]
    if report.kafka_figures:
        lines.append(report.kafka_figures)
    if report.durations:
        lines.append(durations(report))
    if f.violations:
        lines.append("violations by the fault of the step in which they began:")
        by_fault = sorted(report.violations_by_fault().items())
        lines.extend(f"  {kind} during {fault}: {n}" for (kind, fault), n in by_fault)
        lines.append("first violations:")
        lines.extend(f"  {v.kind}: {v.detail}" for v in f.violations[:10])
        lines.append(f"history and process logs kept in {report.workdir}")
    return "\n".join(lines)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _fault_kinds(names: str) -> tuple[StrEnum, ...]:
    kinds: dict[str, StrEnum] = {f.value: f for f in (*Fault, *KafkaFault)}
    return tuple(kinds[name.strip()] for name in names.split(",") if name.strip())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="groupcoord faults", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=("single", "kafka"), default="single",
                   help="single: one coordinator with a state dir (default); kafka: 3 instances over 3 Kafka brokers")
    p.add_argument("--minutes", type=float, default=1.0, help="how long to inject faults (default 1)")
    p.add_argument("--steps", type=int, default=0, help="inject exactly this many faults instead of --minutes")
    p.add_argument("--seed", type=int, default=1, help="the fault schedule's seed (default 1)")
    p.add_argument("--members", type=int, default=4, help="consumer-group member processes (default 4)")
    p.add_argument("--share-members", type=int, default=2, help="share-group member processes (default 2)")
    p.add_argument("--streams-members", type=int, default=2, help="streams-group member processes (default 2)")
    p.add_argument("--classic-members", type=int, default=None,
                   help="classic-group member processes (default 0; 2 with --mode kafka)")
    p.add_argument("--partitions", type=int, default=12, help="partitions of the topic (default 12)")
    p.add_argument("--share-partitions", type=int, default=1,
                   help="partitions of the share members' topic (default 1: every share member reads it)")
    p.add_argument("--session-timeout-ms", type=int, default=3000)
    p.add_argument("--heartbeat-interval-ms", type=int, default=200)
    p.add_argument("--instances", type=int, default=3, help="--mode kafka: groupcoord instances (default 3)")
    p.add_argument("--state-partitions", type=int, default=6, help="--mode kafka: state topic partitions (default 6)")
    p.add_argument("--state-session-timeout-ms", type=int, default=3000,
                   help="--mode kafka: the instances' --state-session-timeout-ms (default 3000)")
    p.add_argument("--broker-session-timeout-ms", type=int, default=9000,
                   help="--mode kafka: the brokers' broker.session.timeout.ms (default 9000, Kafka's), with the "
                        "controller's failure detection scaled to it")
    p.add_argument("--converge-timeout-s", type=float, default=None,
                   help="how long a step may take to converge (default 30; --mode kafka: six times the chain of "
                        "broker, state and member session timeouts, at least 30)")
    p.add_argument("--workdir", type=Path, help="keep the state dir, history.jsonl and logs here")
    p.add_argument("--stop-on-violation", action="store_true", help="stop after the step that found the first one")
    p.add_argument("--faults", default=None,
                   help="comma-separated fault kinds to inject (default: every kind of the mode): "
                   + ", ".join(f.value for f in (*Fault, *KafkaFault)))
    args = p.parse_args(argv)
    kafka = args.mode == "kafka"
    classic = args.classic_members if args.classic_members is not None else (2 if kafka else 0)
    if min(args.members, args.share_members, args.streams_members, classic, args.steps) < 0 \
            or args.partitions < 1 or args.share_partitions < 1 \
            or args.members + args.share_members + args.streams_members + classic < 1:
        p.error("--partitions and the sum of members must be positive; no count negative")
    if not 1 <= args.instances < 4:
        p.error("--instances: 1 to 3 (a fourth is the one the nemesis adds)")
    default = ",".join(f.value for f in (KAFKA_MODE_FAULTS if kafka else Fault))
    try:
        faults = _fault_kinds(args.faults or default)
    except KeyError:
        p.error(f"--faults: one of {', '.join(f.value for f in (*Fault, *KafkaFault))}, comma-separated")
    if not faults:
        p.error("--faults names no fault kind")
    if not kafka and any(isinstance(f, KafkaFault) for f in faults):
        p.error("--faults: the instance and broker faults need --mode kafka")
    timing = Timing(session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=args.heartbeat_interval_ms)
    opts = Options(seed=args.seed, minutes=args.minutes, steps=args.steps, members=args.members,
                   share_members=args.share_members, streams_members=args.streams_members,
                   share_partitions=args.share_partitions, classic_members=classic, mode=args.mode,
                   kafka=KafkaTiming(instances=args.instances, state_partitions=args.state_partitions,
                                     state_session_timeout_ms=args.state_session_timeout_ms,
                                     broker_session_timeout_ms=args.broker_session_timeout_ms),
                   partitions=args.partitions, timing=timing, converge_timeout_s=args.converge_timeout_s,
                   workdir=args.workdir, stop_on_violation=args.stop_on_violation, faults=faults)
    # SIGTERM stops the run like Ctrl-C does, so that the processes it started are killed on the way out.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        report = run(opts)
    except RuntimeError as e:  # the coordinator did not come up: say so in one line
        print(f"groupcoord faults: {e}", file=sys.stderr)
        return 2
    print(figures(report), flush=True)
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
