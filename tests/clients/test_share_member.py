"""ShareMember against the real server on loopback and the embedded Kafka: queue semantics on 2 partitions
with 3 members, one of which dies holding locks."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Producer

from groupcoord.clients.share_member import RELEASE, ShareMember
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.embedded_kafka import EmbeddedKafka

SHARE_FAST = {
    "group.share.min.heartbeat.interval.ms": 20,
    "group.share.heartbeat.interval.ms": 100,
    "group.share.min.session.timeout.ms": 500,
    "group.share.session.timeout.ms": 2000,
    "group.share.assignment.interval.ms": 100,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.record.lock.duration.ms": 1500,
}
TOTAL = 400


def wait_until(cond: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_three_members_share_two_partitions_and_a_dead_members_records_come_back() -> None:
    with EmbeddedKafka(brokers=1) as kafka:
        kafka.create_topic("jobs", 2)
        options = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping(SHARE_FAST),
                                metadata_source=StaticMetadataSource({"jobs": 2}), metadata_poll_s=0.2)
        with ServerThread(options) as server:
            members = [ShareMember(server.address, "queue", ["jobs"], kafka.bootstrap_servers).start()
                       for _ in range(3)]
            try:
                wait_until(lambda: all(m.assignment() for m in members), what="every member assigned")
                wait_until(lambda: set().union(*(m.assignment() for m in members)) == {("jobs", 0), ("jobs", 1)},
                           what="both partitions covered")
                for m in members:  # share-partitions start at the log end (share.auto.offset.reset=latest)
                    assert m.poll(timeout=2) == []
                producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
                for i in range(TOTAL):
                    producer.produce("jobs", value=str(i).encode(), partition=i % 2)
                assert producer.flush(10) == 0

                doomed = members[0]
                held = []
                wait_until(lambda: bool(held.extend(doomed.poll(max_records=30, timeout=2)) or held),
                           what="the doomed member acquires records")
                doomed.close(leave=False)  # dies holding its locks: no acknowledgement, no leave
                held_offsets = {(r.partition, r.offset) for r in held}

                processed: list[tuple[str, tuple[int, int], int]] = []
                live = members[1:]
                released_once = False

                def drain() -> bool:
                    nonlocal released_once
                    for i, m in enumerate(live):
                        records = m.poll(max_records=50, timeout=2)
                        if records and not released_once:  # give some back: they are redelivered
                            released_once = True
                            assert all(not r.lock_expired() for r in records[:1])
                            m.acknowledge(records[:1], RELEASE)
                            records = records[1:]
                        for r in records:
                            processed.append((f"m{i + 1}", (r.partition, r.offset), r.delivery_count))
                        results = m.acknowledge(records)
                        assert all(res.error_code == 0 for res in results), results
                    return {o for _, o, _ in processed} >= {(p, o) for p in (0, 1) for o in range(TOTAL // 2)}

                wait_until(drain, timeout=60, what="every record processed")
                seen: dict[tuple[int, int], int] = {}
                for _, o, _ in processed:
                    seen[o] = seen.get(o, 0) + 1
                duplicates = {o for o, n in seen.items() if n > 1}
                assert duplicates == set()  # the live members never processed a record twice
                assert held_offsets <= set(seen)  # the dead member's records came back after lock expiry
                assert all(count >= 2 for _, o, count in processed if o in held_offsets)
                assert {who for who, _, _ in processed} == {"m1", "m2"}  # both live members did work
            finally:
                for m in members[1:]:
                    m.close()


DOOMED = """
import json, sys, time
from groupcoord.clients.share_member import ShareMember
m = ShareMember(sys.argv[1], "queue", ["jobs"], sys.argv[2]).start()
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    records = m.poll(max_records=25, timeout=2)
    if records:
        print(json.dumps([[r.partition, r.offset] for r in records]), flush=True)
        time.sleep(3600)  # holds its locks until killed
    time.sleep(0.05)
"""


def test_a_member_killed_with_sigkill_loses_its_locks_and_its_records_are_redelivered() -> None:
    import json
    import os
    import signal
    import subprocess
    import sys

    with EmbeddedKafka(brokers=1) as kafka:
        kafka.create_topic("jobs", 2)
        options = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping(SHARE_FAST),
                                metadata_source=StaticMetadataSource({"jobs": 2}), metadata_poll_s=0.2)
        with ServerThread(options) as server:
            live = ShareMember(server.address, "queue", ["jobs"], kafka.bootstrap_servers).start()
            try:
                wait_until(lambda: live.assignment() == {("jobs", 0), ("jobs", 1)}, what="live member assigned")
                assert live.poll(timeout=2) == []  # initialises both share-partitions at the log end
                env = {**os.environ, "PYTHONPATH": os.getcwd()}
                doomed = subprocess.Popen([sys.executable, "-c", DOOMED, server.address, kafka.bootstrap_servers],
                                          stdout=subprocess.PIPE, text=True, env=env)
                try:
                    wait_until(lambda: len(server.server.runtime.shard.groups["queue"].members) == 2,  # type: ignore
                               what="the doomed member joined")
                    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
                    for i in range(200):
                        producer.produce("jobs", value=str(i).encode(), partition=i % 2)
                    assert producer.flush(10) == 0
                    line = doomed.stdout.readline() if doomed.stdout else ""
                    held = {(p, o) for p, o in json.loads(line)}
                    assert held
                finally:
                    doomed.send_signal(signal.SIGKILL)
                    doomed.wait(10)
                processed: dict[tuple[int, int], int] = {}

                def drain() -> bool:
                    records = live.poll(max_records=100, timeout=2)
                    for r in records:
                        processed[(r.partition, r.offset)] = r.delivery_count
                    assert all(res.error_code == 0 for res in live.acknowledge(records))
                    return set(processed) == {(p, o) for p in (0, 1) for o in range(100)}

                wait_until(drain, timeout=60, what="every record processed after the kill")
                assert all(processed[o] == 2 for o in held)  # redelivered once the dead member's locks expired
                assert all(n == 1 for o, n in processed.items() if o not in held)
            finally:
                live.close()


PAUSED = """
import json, sys, time
from groupcoord.clients.share_member import ShareMember
m = ShareMember(sys.argv[1], "paused", ["jobs"], sys.argv[2]).start()
deadline = time.monotonic() + 60
records = []
while not records and time.monotonic() < deadline:
    records = m.poll(max_records=10, timeout=2)
    time.sleep(0.05)
print(json.dumps([[r.partition, r.offset] for r in records]), flush=True)
sys.stdin.readline()  # the test stops us (SIGSTOP) here, and resumes us after our locks expired
expired_before = all(r.lock_expired() for r in records)
results = m.acknowledge(records)
print(json.dumps({"expired_before": expired_before, "codes": [r.error_code for r in results],
                  "lock_expired": [r.lock_expired for r in results]}), flush=True)
m.close()
"""


def test_a_member_paused_past_its_lock_sees_the_expiry_and_its_records_went_to_another_member() -> None:
    import json
    import os
    import signal
    import subprocess
    import sys

    config = {**SHARE_FAST, "group.share.session.timeout.ms": 20000, "group.share.max.session.timeout.ms": 60000,
              "group.share.record.lock.duration.ms": 1000}
    with EmbeddedKafka(brokers=1) as kafka:
        kafka.create_topic("jobs", 1)
        options = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping(config),
                                metadata_source=StaticMetadataSource({"jobs": 1}), metadata_poll_s=0.2)
        with ServerThread(options) as server:
            live = ShareMember(server.address, "paused", ["jobs"], kafka.bootstrap_servers).start()
            env = {**os.environ, "PYTHONPATH": os.getcwd()}
            paused = subprocess.Popen([sys.executable, "-c", PAUSED, server.address, kafka.bootstrap_servers],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
            try:
                wait_until(lambda: live.assignment() == {("jobs", 0)}, what="live member assigned")
                assert live.poll(timeout=2) == []  # the share-partition starts at the log end
                producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
                for i in range(10):
                    producer.produce("jobs", value=str(i).encode(), partition=0)
                assert producer.flush(10) == 0
                assert paused.stdout is not None and paused.stdin is not None
                held = {(p, o) for p, o in json.loads(paused.stdout.readline())}
                assert held
                paused.send_signal(signal.SIGSTOP)
                got: dict[tuple[int, int], int] = {}

                def redelivered() -> bool:
                    records = live.poll(max_records=10, timeout=2)
                    got.update({(r.partition, r.offset): r.delivery_count for r in records})
                    assert all(res.error_code == 0 for res in live.acknowledge(records))
                    return held <= set(got)

                wait_until(redelivered, timeout=30, what="the paused member's records redelivered")
                assert all(got[o] == 2 for o in held)
                paused.send_signal(signal.SIGCONT)
                paused.stdin.write("ack\n")
                paused.stdin.flush()
                outcome = json.loads(paused.stdout.readline())
                assert outcome["expired_before"] is True  # visible before acknowledging
                assert set(outcome["codes"]) == {121} and all(outcome["lock_expired"])  # INVALID_RECORD_STATE
                assert paused.wait(30) == 0
            finally:
                if paused.poll() is None:
                    paused.send_signal(signal.SIGCONT)
                    paused.kill()
                live.close()
