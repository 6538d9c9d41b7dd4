"""The Kafka-backed suite's nemesis: faults of instances, of their links to Kafka, and of Kafka itself.

Drawn by the same seeded `nemesis.schedule` as the single-node suite (its own kinds, weights and hold times);
member faults of the single-node suite (``proxy-silence``: a client cut off from its instance) are injected
by `nemesis.inject`. The fault on an instance hits the instance serving the group of kind `target mod 4`, so
every fault on an instance moves groups.
"""

from __future__ import annotations

import random
import signal
import time
from enum import StrEnum

from groupcoord.faults.history import Event, Kind
from groupcoord.faults.kafka_cluster import KafkaModeCluster
from groupcoord.faults.nemesis import Fault, Step, inject

KAFKA_DELAY_S = 0.5  # the slowed instance<->Kafka link: per chunk, each way


class KafkaFault(StrEnum):
    INSTANCE_KILL = "instance-kill-9"  # kill -9, wait until its groups are served elsewhere, start it again
    INSTANCE_PAUSE = "instance-sigstop"  # SIGSTOP past the coordinators' session, then SIGCONT
    INSTANCE_KAFKA_CUT = "instance-kafka-cut"  # its Kafka proxies swallow every byte past the session
    INSTANCE_KAFKA_DELAY = "instance-kafka-delay"  # its Kafka proxies delay every chunk by 500 ms
    BROKER_KILL = "broker-kill-9"  # kill -9 one Kafka broker, then restart it on its data
    ROLLING_RESTART = "instance-rolling-restart"  # SIGTERM and restart every instance, one after another
    ADD_REMOVE = "instance-add-remove"  # a fourth instance joins, takes partitions, then leaves (SIGTERM)


# The kinds `groupcoord faults --mode kafka` injects by default: its own, and a client cut off its instance.
KAFKA_MODE_FAULTS: tuple[StrEnum, ...] = (*KafkaFault, Fault.PROXY_SILENCE)
KAFKA_WEIGHTS: dict[StrEnum, int] = {
    KafkaFault.INSTANCE_KILL: 3, KafkaFault.INSTANCE_PAUSE: 2, KafkaFault.INSTANCE_KAFKA_CUT: 2,
    KafkaFault.INSTANCE_KAFKA_DELAY: 2, KafkaFault.BROKER_KILL: 2, KafkaFault.ROLLING_RESTART: 1,
    KafkaFault.ADD_REMOVE: 1, Fault.PROXY_SILENCE: 2, Fault.MEMBER_KILL: 1, Fault.MEMBER_PAUSE: 1,
}


def kafka_hold(rng: random.Random, fault: StrEnum, session_s: float) -> tuple[float, float]:
    """How long a fault holds (past the session where it must outlast one), and its delay."""
    past_session = session_s * rng.uniform(1.3, 2.0)
    if fault in (KafkaFault.INSTANCE_PAUSE, KafkaFault.INSTANCE_KAFKA_CUT, Fault.PROXY_SILENCE, Fault.MEMBER_PAUSE):
        return past_session, 0.0
    if fault is KafkaFault.INSTANCE_KAFKA_DELAY:
        return rng.uniform(1.0, 2.0) * session_s, KAFKA_DELAY_S
    if fault is KafkaFault.BROKER_KILL:
        return rng.uniform(0.5, 1.5) * session_s, 0.0
    return 0.0, 0.0


def inject_kafka(cluster: KafkaModeCluster, step: Step) -> None:
    """Inject the fault, hold it, heal it; returns when every instance and broker is back."""
    f = step.fault
    if isinstance(f, Fault):
        inject(cluster, step)
        return
    k = cluster.kafka_timing
    session_s = k.state_session_timeout_ms / 1000
    if f is KafkaFault.BROKER_KILL:
        assert cluster.broker is not None
        node = step.target % k.brokers + 1
        cluster.record(Event(time.monotonic(), Kind.NEMESIS, detail=f"broker-kill-9 {node}", role="nemesis"))
        cluster.broker.kill_node(node)
        time.sleep(step.duration_s)
        cluster.broker.restart_node(node)
        return
    if f is KafkaFault.ROLLING_RESTART:
        for inst in [i for i in cluster.instances if i.running()]:
            cluster.stop_instance(inst)
            cluster.start_instance(inst)
            cluster.wait_for(cluster.router.all_served, 6 * session_s + 30)
        return
    if f is KafkaFault.ADD_REMOVE:
        extra = next(i for i in cluster.instances if not i.running())
        loads = len(cluster.replay_times())
        cluster.start_instance(extra)
        cluster.wait_for(lambda: len(cluster.replay_times()) > loads, 4 * session_s + 10)
        cluster.stop_instance(extra)
        return
    inst = cluster.target_instance(step.target)
    if f is not KafkaFault.INSTANCE_KILL:  # kill_instance records the kill itself, at the kill
        cluster.record(Event(time.monotonic(), Kind.NEMESIS, detail=f"{f} {inst.address}", role="nemesis"))
    if f is KafkaFault.INSTANCE_KILL:
        cluster.kill_instance(inst)
        cluster.wait_for(lambda: cluster.router.all_served() and inst.address not in cluster.router.owners().values(),
                         6 * session_s + 30)
        cluster.start_instance(inst)
    elif f is KafkaFault.INSTANCE_PAUSE:
        cluster.signal_instance(inst, signal.SIGSTOP)
        time.sleep(step.duration_s)
        cluster.signal_instance(inst, signal.SIGCONT)
    elif f in (KafkaFault.INSTANCE_KAFKA_CUT, KafkaFault.INSTANCE_KAFKA_DELAY):
        for proxy in inst.kafka_proxies:
            proxy.silence() if f is KafkaFault.INSTANCE_KAFKA_CUT else proxy.delay(step.delay_s)
        time.sleep(step.duration_s)
        for proxy in inst.kafka_proxies:
            proxy.forward()
