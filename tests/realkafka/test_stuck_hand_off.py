"""A hand-off whose transaction cannot commit does not hold the partitions back from their next owner.

Found by the Kafka-backed fault suite (`groupcoord faults --mode kafka --minutes 30 --seed 1`): an instance handing
off partitions it had lost waited 27 s on its polling thread for a transaction whose flush could not finish
("handing off state partitions: still waiting after 10 s ... 20 s", then "Failed to flush all outstanding
messages within the API timeout"). Its consumer took no part in the rebalance meanwhile, so the partitions of an
instance killed at that moment went to no one: 34 s without a coordinator against a bound of about 9.4 s (the 3 s
session plus replay).

Here instance A reaches the broker through a proxy that swallows its Produce requests (and forwards everything
else: its heartbeats, claims, the transactions' AddPartitionsToTxn and EndTxn, its loaders), so each of its
transactions stays open until `commit_transaction` gives up after 30 s. A owns every state partition and has a
commit pending in each; instance B, connected directly, then joins, and the cooperative rebalance moves some of
A's partitions to it. B must serve them within about the session timeout, not after A's transactions time out
(B's `init_transactions` aborts A's open transaction; the broker writes the markers itself). The commits pending
on A are never acknowledged, and B serves what A acknowledged before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.kafka_broker import KafkaBroker
from tests.realkafka.test_split_brain import committed_offset, fetch
from tests.realkafka.test_stale_fencing import commit
from tests.realkafka.test_unanswered_claim import (
    PARTITIONS,
    SESSION_MS,
    RequestSwallowingProxy,
    cut_broker,
    owned,
    serving,
    start_instance,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

__all__ = ["cut_broker"]  # the fixture, imported for pytest

PRODUCE = 0  # Kafka's API key
# The session, the two rounds of a cooperative rebalance and B's load, with room for a loaded machine; well under
# the 30 s after which A's stuck commits give up.
TAKEOVER_BOUND_S = SESSION_MS / 1000 + 7


@pytest.fixture
def instances() -> Iterator[list[ServerThread]]:
    started: list[ServerThread] = []
    yield started
    for instance in reversed(started):
        instance.stop()


def test_a_hand_off_stuck_on_a_transaction_that_cannot_commit_lets_the_next_owner_serve_within_the_session(
        cut_broker: tuple[KafkaBroker, RequestSwallowingProxy], instances: list[ServerThread]) -> None:
    broker, proxy = cut_broker
    proxy.api_keys = {PRODUCE}
    groups: dict[int, str] = {}
    i = 0
    while len(groups) < PARTITIONS:
        groups.setdefault(state_partition(f"stuck-{i}", PARTITIONS), f"stuck-{i}")
        i += 1
    a = start_instance(proxy.address)
    instances.append(a)
    wait_for(lambda: serving(a) == set(range(PARTITIONS)), "instance A serves every partition", timeout_s=90)
    for group in groups.values():
        wait_for(lambda g=group: commit(a.address, g, 1) == 0, f"instance A acknowledges a commit of {group}",
                 timeout_s=30)

    codes: list[int] = []
    try:
        proxy.swallowing = True  # from here on no transaction of A can commit
        committers = [threading.Thread(target=lambda g=group: codes.append(commit(a.address, g, 2)), daemon=True)
                      for group in groups.values()]
        for thread in committers:  # one open transaction per partition
            thread.start()
        time.sleep(1.0)

        started = time.monotonic()
        b = start_instance(broker.bootstrap_servers)
        instances.append(b)
        wait_for(lambda: bool(owned(b)), "instance B serves some of A's partitions", timeout_s=60)
        took = time.monotonic() - started
        print(f"instance B served partitions {sorted(owned(b))} {took:.1f} s after it started")
        assert took < TAKEOVER_BOUND_S, (
            f"instance B served partitions only {took:.1f} s after it started (bound {TAKEOVER_BOUND_S:.0f} s): "
            "A's hand-off waited for transactions that could not commit")
        for thread in committers:
            thread.join(30)
    finally:
        proxy.swallowing = False
        proxy.reset()  # the swallowed requests fail at once instead of after their timeout
    assert 0 not in codes, f"a commit was acknowledged while none of A's transactions could commit: {codes}"
    for p in owned(b):
        group = groups[p]
        wait_for(lambda g=group: committed_offset(fetch(b.address, g)) >= 1,
                 f"instance B serves {group} with the offset A acknowledged", timeout_s=30)
