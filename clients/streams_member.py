"""A reference streams-group member (KIP-1071) in Python: a word count with one repartition, run as tasks.

Topology (two subtopologies, as Kafka Streams would build it for `lines -> flatMap -> groupByKey -> count`):
  "0"  reads `lines`, splits each line into words, writes (word, 1) to `<app>-words-repartition`,
       partitioned by the word (stateless);
  "1"  reads the repartition topic, counts per word in a store whose every update goes to
       `<app>-counts-changelog` (same partition as the task), so the count survives a move (stateful).

The member heartbeats with StreamsGroupHeartbeat, runs exactly the active tasks it is given, and on
revocation hands a task over cleanly: it flushes what the task produced, commits the task's input offset
(under the application id, in Kafka), drops the task's state and only then reports it no longer owns it.
A task it gains restores its store from the changelog before reading on from the committed offset. Standby
and warm-up tasks are not run (it never reports task offsets, so the coordinator never needs to move a
task for a warm-up it did not do). Driven by `step()` so tests decide the pace; no threads.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from clients.credentials import NO_CREDENTIALS, Credentials
from groupcoord.v1 import streams_pb2 as spb
from groupcoord.v1 import streams_pb2_grpc as spb_grpc

Task = tuple[str, int]
PARTITIONS = 4


def repartition_topic(app: str) -> str:
    return f"{app}-words-repartition"


def changelog_topic(app: str) -> str:
    return f"{app}-counts-changelog"


def word_count_topology(app: str, source: str = "lines", epoch: int = 1) -> spb.StreamsTopology:
    return spb.StreamsTopology(epoch=epoch, subtopologies=[
        spb.StreamsSubtopology(subtopology_id="0", source_topics=[source],
                               repartition_sink_topics=[repartition_topic(app)]),
        spb.StreamsSubtopology(
            subtopology_id="1",
            repartition_source_topics=[spb.StreamsTopicInfo(name=repartition_topic(app), partitions=PARTITIONS)],
            state_changelog_topics=[spb.StreamsTopicInfo(name=changelog_topic(app))]),
    ])


def word_partition(word: str) -> int:
    return zlib.crc32(word.encode()) % PARTITIONS


class StreamsMemberError(RuntimeError):
    """The coordinator answered with an error this member cannot recover from by heartbeating again."""


class WordCountMember:
    def __init__(self, coordinator: str, app: str, member_id: str, process_id: str, bootstrap: str,
                 source: str = "lines", credentials: Credentials | None = None) -> None:
        self.app, self.member_id, self.process_id, self.source = app, member_id, process_id, source
        self._channel = (credentials or NO_CREDENTIALS).channel(coordinator)
        self._stub = spb_grpc.StreamsGroupCoordinatorStub(self._channel)
        self.epoch = 0
        self.heartbeat_interval_ms = 0
        self.active: set[Task] = set()
        self.stores: dict[int, Counter[str]] = {}  # task ("1", p) -> counts
        self._next: dict[tuple[str, int], int] = {}  # input topic partition -> next offset to process
        common = {"bootstrap.servers": bootstrap}
        self._producer = Producer({**common, "linger.ms": 0})
        self._consumer = Consumer({**common, "group.id": app, "enable.auto.commit": False,
                                   "auto.offset.reset": "earliest"})
        self._bootstrap = bootstrap

    # --- membership ---------------------------------------------------------------------------------------
    def heartbeat(self) -> spb.StreamsGroupHeartbeatResponse:
        req = spb.StreamsGroupHeartbeatRequest(group_id=self.app, member_id=self.member_id, member_epoch=self.epoch)
        by: dict[str, list[int]] = {}
        for s, p in sorted(self.active):
            by.setdefault(s, []).append(p)
        req.active_tasks.tasks.extend(spb.StreamsTaskIds(subtopology_id=s, partitions=ps) for s, ps in by.items())
        req.standby_tasks.SetInParent()
        req.warmup_tasks.SetInParent()
        if self.epoch == 0:
            req.topology.CopyFrom(word_count_topology(self.app, self.source))
            req.process_id = self.process_id
            req.rebalance_timeout_ms = 30_000
        resp = self._stub.StreamsGroupHeartbeat(req, timeout=10)
        if resp.error_code:
            raise StreamsMemberError(f"heartbeat error {resp.error_code}: {resp.error_message}")
        self.epoch = resp.member_epoch
        self.heartbeat_interval_ms = resp.heartbeat_interval_ms
        if resp.HasField("active_tasks"):
            self._reconcile({(t.subtopology_id, p) for t in resp.active_tasks.tasks for p in t.partitions})
        return resp

    def _reconcile(self, assigned: set[Task]) -> None:
        revoked, added = self.active - assigned, assigned - self.active
        if revoked:
            self._commit()  # everything processed so far, for every task, before any task leaves
            for task in revoked:
                if task[0] == "1":
                    self.stores.pop(task[1], None)
                self._next.pop(self._input_of(task), None)
        for task in added:
            if task[0] == "1":
                self.stores[task[1]] = self._restore(task[1])
        self.active = assigned
        self._assign_inputs()

    def leave(self) -> None:
        """Hand every task over cleanly, then leave the group (epoch -1)."""
        self._reconcile(set())
        self._stub.StreamsGroupHeartbeat(spb.StreamsGroupHeartbeatRequest(
            group_id=self.app, member_id=self.member_id, member_epoch=-1), timeout=10)
        self.epoch = -1

    def close(self) -> None:
        self._consumer.close()
        self._producer.flush(10)
        self._channel.close()

    # --- tasks --------------------------------------------------------------------------------------------
    def _input_of(self, task: Task) -> tuple[str, int]:
        return (self.source if task[0] == "0" else repartition_topic(self.app), task[1])

    def _assign_inputs(self) -> None:
        inputs = [self._input_of(t) for t in sorted(self.active)]
        if not inputs:
            self._consumer.unassign()
            return
        committed = self._consumer.committed([TopicPartition(t, p) for t, p in inputs], timeout=10)
        tps = []
        for tp in committed:
            key = (tp.topic, tp.partition)
            start = self._next.get(key, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
            tps.append(TopicPartition(tp.topic, tp.partition, start))
        self._consumer.assign(tps)

    def _restore(self, partition: int) -> Counter[str]:
        """The store of task ("1", partition): the latest count per word in its changelog partition."""
        counts: Counter[str] = Counter()
        reader = Consumer({"bootstrap.servers": self._bootstrap, "group.id": f"{self.app}-restore",
                           "enable.auto.commit": False})
        try:
            topic = changelog_topic(self.app)
            _, high = reader.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            reader.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
            position = 0
            while position < high:
                msg = reader.poll(1.0)
                if msg is None or msg.error():
                    continue
                counts[(msg.key() or b"").decode()] = int(msg.value() or b"0")
                position = (msg.offset() or 0) + 1
        finally:
            reader.close()
        return counts

    def step(self, max_records: int = 500, timeout_s: float = 0.05) -> int:
        """Process what has arrived for the active tasks, then make it durable (flush, commit)."""
        n = 0
        for msg in self._consumer.consume(max_records, timeout_s):
            if msg.error():
                continue
            topic, partition, offset = msg.topic() or "", msg.partition() or 0, msg.offset() or 0
            key = (topic, partition)
            if key not in self._next and not any(self._input_of(t) == key for t in self.active):
                continue
            if topic == self.source:
                for word in (msg.value() or b"").decode().split():
                    self._producer.produce(repartition_topic(self.app), key=word.encode(), value=b"1",
                                           partition=word_partition(word))
            else:
                store = self.stores[partition]
                word = (msg.key() or b"").decode()
                store[word] += 1
                self._producer.produce(changelog_topic(self.app), key=word.encode(),
                                       value=str(store[word]).encode(), partition=partition)
            self._next[key] = offset + 1
            n += 1
        if n:
            self._commit()
        return n

    def _commit(self) -> None:
        """Flush what the tasks produced, then commit their inputs' offsets: the order that makes a handover
        lose nothing and count nothing twice."""
        self._producer.flush(10)
        offsets = [TopicPartition(t, p, o) for (t, p), o in self._next.items()]
        if offsets:
            self._consumer.commit(offsets=offsets, asynchronous=False)

    def counts(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for store in self.stores.values():
            total.update(store)
        return total


def changelog_counts(bootstrap: str, app: str) -> Counter[str]:
    """The latest count per word over the whole changelog: what a restore of every task would see."""
    reader = WordCountMember.__new__(WordCountMember)
    reader.app, reader._bootstrap = app, bootstrap
    total: Counter[str] = Counter()
    for p in range(PARTITIONS):
        total.update(reader._restore(p))
    return total


def split_words(lines: Iterable[str]) -> Counter[str]:
    return Counter(w for line in lines for w in line.split())
