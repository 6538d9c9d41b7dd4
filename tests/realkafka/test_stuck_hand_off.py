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
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from groupcoord.coordinator.core.partitioning import state_partition
from groupcoord.coordinator.runtime.kafka_txn import PartitionWriter
from groupcoord.coordinator.runtime.record_codec import PartitionFenced
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.kafka_broker import KafkaBroker
from tests.realkafka.test_split_brain import committed_offset, fetch
from tests.realkafka.test_stale_fencing import commit
from tests.realkafka.test_unanswered_claim import (
    PARTITIONS,
    SESSION_MS,
    STATE_TOPIC,
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


def test_an_abandoned_writer_whose_transaction_commits_after_all_acknowledges_nothing(
        cut_broker: tuple[KafkaBroker, RequestSwallowingProxy], monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing acknowledged before durable: an operation failed when its writer was abandoned stays failed when its
    transaction commits later (durable, never acknowledged: the next owner replays it)."""
    broker, proxy = cut_broker
    proxy.api_keys = {PRODUCE}
    crashed: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", crashed.append)
    failures: list[object] = []
    writer = PartitionWriter(STATE_TOPIC, 0, {"bootstrap.servers": proxy.address}, writer_tag="abandoned",
                             linger_s=0, on_failed=lambda *args: failures.append(args))
    writer.start(30)
    writer.submit([(b"before", b"1")]).result(30)
    proxy.swallowing = True
    stuck = writer.submit([(b"abandoned", b"2")])
    time.sleep(1.0)  # its Produce request is swallowed: the commit waits
    assert writer.abandon("handed off") == 1
    with pytest.raises(PartitionFenced):
        stuck.result(0)
    assert writer.submit([(b"after", b"3")]).exception(0) is not None, "an abandoned writer takes nothing more"

    proxy.swallowing = False
    proxy.reset()  # the producer sends the swallowed request again and its transaction commits
    wait_for(lambda: b"abandoned" in committed_keys(broker.bootstrap_servers, STATE_TOPIC, 0),
             "the abandoned transaction commits after all", timeout_s=40)
    for thread in threading.enumerate():
        if thread.name == "groupcoord-txn-0":
            thread.join(30)
    assert isinstance(stuck.exception(0), PartitionFenced), "its operation stays failed: never acknowledged"
    writer_crashes = [c.exc_value for c in crashed if c.thread is not None and c.thread.name == "groupcoord-txn-0"]
    assert not writer_crashes, writer_crashes  # (the proxy's own threads may fail on its reset)
    assert not failures, "the abandoned writer's commit reported nothing to its former owner"


def committed_keys(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "stuck-hand-off-reader",
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "enable.auto.commit": False})
    keys: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        while True:
            msg = consumer.poll(5)
            if msg is None:
                return keys
            if (error := msg.error()) is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return keys
                continue
            keys.append(msg.key() or b"")
    finally:
        consumer.close()
