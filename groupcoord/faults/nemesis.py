"""The nemesis: a seeded schedule of faults, and how each one is injected into and healed in the cluster.

Why a schedule drawn up front from ``--seed``: two runs with the same seed inject the same faults, on the
same targets, for the same durations, in the same order (the timing of the processes still varies). The
first faults cycle through every kind once, in a seeded order, so even a short run injects each kind; in that
first cycle the faults aimed at one member take their targets from each member kind (consumer, share,
streams) in turn, so a short run also hits every kind of member.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from groupcoord.faults.checker import Event, Kind
from groupcoord.faults.cluster import Cluster


class Fault(StrEnum):
    COORDINATOR_KILL = "coordinator-kill-9"  # kill -9 and restart with its state dir
    COORDINATOR_WIPE = "coordinator-stateless-restart"  # kill -9, delete the state dir, restart
    COORDINATOR_PAUSE = "coordinator-sigstop"  # SIGSTOP past the session timeout, then SIGCONT
    MEMBER_PAUSE = "member-sigstop"  # SIGSTOP one member past its session, then SIGCONT
    MEMBER_KILL = "member-kill-9"  # kill -9 one member and start a new process in its place
    PROXY_SILENCE = "proxy-silence"  # one member's connection swallows every byte past its session
    PROXY_DELAY = "proxy-delay"  # one member's bytes arrive late
    PROXY_DROP = "proxy-drop"  # one member's connections are reset and refused for a while


# Weights after the first cycle: stateless restarts are rare in life and reset the durability check.
WEIGHTS: dict[StrEnum, int] = {Fault.COORDINATOR_KILL: 3, Fault.COORDINATOR_WIPE: 1, Fault.COORDINATOR_PAUSE: 2,
           Fault.MEMBER_PAUSE: 3, Fault.MEMBER_KILL: 3, Fault.PROXY_SILENCE: 3, Fault.PROXY_DELAY: 2,
           Fault.PROXY_DROP: 3}


def aimed_at_member(fault: str) -> bool:
    """Member faults pick their target among the member slots; the others act on coordinators or brokers."""
    return fault.startswith(("member-", "proxy-"))


@dataclass(frozen=True, slots=True)
class Step:
    number: int
    fault: StrEnum  # a `Fault`, or a `nemesis_kafka.KafkaFault`
    target: int  # member slot (other faults may use it to pick their own target)
    duration_s: float  # how long the fault holds
    delay_s: float = 0.0  # PROXY_DELAY: per chunk

    def describe(self, member: str = "") -> str:
        """`member`: the target's name (default m<slot>)."""
        who = f" {member or f'm{self.target}'}" if aimed_at_member(self.fault) else ""
        extra = f" delay {self.delay_s * 1000:.0f} ms" if self.delay_s else ""
        return f"{self.fault}{who} for {self.duration_s:.1f} s{extra}"


def hold(rng: random.Random, fault: StrEnum, session_s: float) -> tuple[float, float]:
    """How long a fault of the single-node suite holds, and its delay (PROXY_DELAY)."""
    past_session = session_s * rng.uniform(1.3, 2.0)
    if fault in (Fault.COORDINATOR_PAUSE, Fault.MEMBER_PAUSE, Fault.PROXY_SILENCE):
        return past_session, 0.0
    if fault is Fault.PROXY_DELAY:
        return rng.uniform(1.0, 2.0) * session_s, rng.uniform(0.03, 0.25) * session_s
    if fault is Fault.PROXY_DROP:
        return rng.uniform(0.1, 0.8) * session_s, 0.0
    return 0.0, 0.0


def schedule(seed: int, members: int, session_s: float, faults: Sequence[StrEnum] = tuple(Fault),
             roles: Sequence[str] = (), weights: Mapping[StrEnum, int] = WEIGHTS,
             holds: Callable[[random.Random, StrEnum, float], tuple[float, float]] = hold) -> Callable[[int], Step]:
    """`step(n)` for n = 1, 2, ...; the same seed (and `faults`) gives the same steps. `roles`: each member
    slot's kind (default: all one kind). `weights` and `holds`: the fault kinds' frequencies after the first
    cycle and their durations (the Kafka-backed suite passes its own)."""
    rng = random.Random(seed)
    roles = list(roles) or ["consumer"] * members
    kinds_of_member = sorted(set(roles))
    member_faults_seen = [0]
    first = list(dict.fromkeys(faults))
    if not first:
        raise ValueError("no fault kind to inject")
    rng.shuffle(first)
    kinds = [f for f in weights if f in faults]
    kind_weights = [weights[f] for f in kinds]
    cache: list[Step] = []

    def draw(n: int) -> Step:
        fault = first[n - 1] if n <= len(first) else rng.choices(kinds, kind_weights)[0]
        target = rng.randrange(members)
        if n <= len(first) and aimed_at_member(fault):
            role = kinds_of_member[member_faults_seen[0] % len(kinds_of_member)]
            member_faults_seen[0] += 1
            slots = [i for i, r in enumerate(roles) if r == role]
            target = slots[target % len(slots)]
        duration_s, delay_s = holds(rng, fault, session_s)
        return Step(n, fault, target, duration_s, delay_s)

    def step(n: int) -> Step:
        while len(cache) < n:
            cache.append(draw(len(cache) + 1))
        return cache[n - 1]

    return step


def inject(cluster: Cluster, step: Step) -> None:
    """Inject the fault, hold it for its duration, heal it; returns when the cluster is whole again."""
    m = cluster.members[step.target]
    f = step.fault
    if f is Fault.COORDINATOR_KILL:
        cluster.kill_coordinator()
        cluster.start_coordinator()
    elif f is Fault.COORDINATOR_WIPE:
        t = cluster.kill_coordinator()
        cluster.wipe_state()
        cluster.record(Event(t, Kind.STATE_WIPED))
        cluster.start_coordinator()
    elif f is Fault.COORDINATOR_PAUSE:
        cluster.signal_coordinator(signal.SIGSTOP)
        time.sleep(step.duration_s)
        cluster.signal_coordinator(signal.SIGCONT)
    elif f is Fault.MEMBER_PAUSE:
        cluster.stop_member(m)
        time.sleep(step.duration_s)
        cluster.resume_member(m)
    elif f is Fault.MEMBER_KILL:
        cluster.kill_member(m)
        cluster.start_member(m)
    elif f is Fault.PROXY_SILENCE:
        m.proxy.silence()
        time.sleep(step.duration_s)
        m.proxy.forward()
    elif f is Fault.PROXY_DELAY:
        m.proxy.delay(step.delay_s)
        time.sleep(step.duration_s)
        m.proxy.forward()
    elif f is Fault.PROXY_DROP:
        m.proxy.drop()
        time.sleep(step.duration_s)
        m.proxy.forward()
