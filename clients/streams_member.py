"""A reference streams-group member (KIP-1071) in Python: a word count with one repartition, run as tasks.

Topology (two subtopologies, as Kafka Streams would build it for `lines -> flatMap -> groupByKey -> count`):
  "0"  reads `lines`, splits each line into words, writes (word, 1) to `<app>-words-repartition`,
       partitioned by the word (stateless);
  "1"  reads the repartition topic, counts per word in a store whose every update goes to
       `<app>-counts-changelog` (same partition as the task), so the count survives a move (stateful).

The member heartbeats with StreamsGroupHeartbeat, runs exactly the active tasks it is given, and on
revocation hands a task over cleanly: it flushes what the task produced, commits the task's input offset
(under the application id, in Kafka), drops the task's state and only then reports it no longer owns it.
A task it gains restores its store from the changelog before reading on from the committed offset.
A warm-up task (a stateful task the coordinator means to move here from a live owner, KIP-441) is restored
from its changelog without processing anything: the member tails the changelog partition in `step()` and
reports, with every heartbeat, how far it got (task offsets) and the changelog's end (task end offsets);
once it is within `acceptable.recovery.lag` the coordinator moves the task, and the member reads on from
where the warm-up stopped instead of restoring from scratch. Standby tasks are not run. Driven by `step()`
so tests decide the pace; no threads.

With `exactly_once` (Kafka Streams' exactly-once with one transactional producer per task, the "alpha"
scheme) a member may die at any point, even by kill -9, without a word being lost or counted twice: each task
writes its output (repartition records, changelog updates) and its input offsets in one transaction, reads
with read_committed, and a task's new owner first calls init_transactions with the task's transactional id,
which aborts whatever the dead owner left open, before it reads the committed offset and restores the store.
`python -m groupcoord.clients.streams_member` runs one member as a process (heartbeats and steps until SIGTERM, which
hands its tasks over and leaves).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from groupcoord.clients.credentials import NO_CREDENTIALS, Credentials
from groupcoord.wire.v1 import streams_pb2 as spb
from groupcoord.wire.v1 import streams_pb2_grpc as spb_grpc

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
            state_changelog_topics=[spb.StreamsTopicInfo(
                name=changelog_topic(app),
                topic_configs=[spb.StreamsKeyValue(key="cleanup.policy", value="compact")])]),
    ])


def word_partition(word: str) -> int:
    return zlib.crc32(word.encode()) % PARTITIONS


class StreamsMemberError(RuntimeError):
    """The coordinator answered with an error this member cannot recover from by heartbeating again."""


class WordCountMember:
    def __init__(self, coordinator: str, app: str, member_id: str, process_id: str, bootstrap: str,
                 source: str = "lines", credentials: Credentials | None = None, exactly_once: bool = False,
                 commit_interval_ms: int = 0) -> None:
        self.app, self.member_id, self.process_id, self.source = app, member_id, process_id, source
        self._channel = (credentials or NO_CREDENTIALS).channel(coordinator)
        self._stub = spb_grpc.StreamsGroupCoordinatorStub(self._channel)
        self.epoch = 0
        self.heartbeat_interval_ms = 0
        self.active: set[Task] = set()
        self.stores: dict[int, Counter[str]] = {}  # task ("1", p) -> counts
        self.warmups: dict[int, Counter[str]] = {}  # warm-up task ("1", p) -> counts restored so far
        self._warm_pos: dict[int, int] = {}  # warm-up task ("1", p) -> next changelog offset to restore
        self._warm_reader: Consumer | None = None
        self._next: dict[tuple[str, int], int] = {}  # input topic partition -> next offset to process
        common = {"bootstrap.servers": bootstrap}
        self.exactly_once = exactly_once
        self.commit_interval_ms = commit_interval_ms  # Kafka Streams' commit.interval.ms (0: every step)
        self._last_commit = time.monotonic()
        self._producer = Producer({**common, "linger.ms": 0})
        self._txn: dict[Task, Producer] = {}  # exactly_once: each active task's transactional producer
        self._dirty: set[Task] = set()  # tasks with output or progress not yet committed
        isolation = {"isolation.level": "read_committed"} if exactly_once else {}
        self._consumer = Consumer({**common, "group.id": app, "enable.auto.commit": False,
                                   "auto.offset.reset": "earliest", **isolation})
        self._bootstrap = bootstrap

    # --- membership ---------------------------------------------------------------------------------------
    def heartbeat(self) -> spb.StreamsGroupHeartbeatResponse:
        req = spb.StreamsGroupHeartbeatRequest(group_id=self.app, member_id=self.member_id, member_epoch=self.epoch)
        by: dict[str, list[int]] = {}
        for s, p in sorted(self.active):
            by.setdefault(s, []).append(p)
        req.active_tasks.tasks.extend(spb.StreamsTaskIds(subtopology_id=s, partitions=ps) for s, ps in by.items())
        req.standby_tasks.SetInParent()
        req.warmup_tasks.tasks.extend([spb.StreamsTaskIds(subtopology_id="1", partitions=sorted(self.warmups))]
                                      if self.warmups else [])
        if self.epoch == 0:
            req.topology.CopyFrom(word_count_topology(self.app, self.source))
            req.process_id = self.process_id
            req.rebalance_timeout_ms = 30_000
        else:
            self._report_warmup_offsets(req)
        resp = self._stub.StreamsGroupHeartbeat(req, timeout=10)
        if resp.error_code:
            raise StreamsMemberError(f"heartbeat error {resp.error_code}: {resp.error_message}")
        self.epoch = resp.member_epoch
        self.heartbeat_interval_ms = resp.heartbeat_interval_ms
        if resp.HasField("active_tasks"):
            self._reconcile({(t.subtopology_id, p) for t in resp.active_tasks.tasks for p in t.partitions})
        if resp.HasField("warmup_tasks"):
            self._set_warmups({p for t in resp.warmup_tasks.tasks if t.subtopology_id == "1" for p in t.partitions})
        return resp

    # --- warm-up tasks --------------------------------------------------------------------------------------
    def _report_warmup_offsets(self, req: spb.StreamsGroupHeartbeatRequest) -> None:
        """Task offsets (how far each warm-up restored) and end offsets (the changelog's end): the lag the
        coordinator compares with acceptable.recovery.lag. Empty lists once there is no warm-up."""
        req.task_offsets.SetInParent()
        req.task_end_offsets.SetInParent()
        if not self.warmups or self._warm_reader is None:
            return
        topic = changelog_topic(self.app)
        for p in sorted(self.warmups):
            _, high = self._warm_reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            req.task_offsets.offsets.add(subtopology_id="1", partition=p, offset=self._warm_pos[p])
            req.task_end_offsets.offsets.add(subtopology_id="1", partition=p, offset=high)

    def _set_warmups(self, wanted: set[int]) -> None:
        """Start restoring new warm-up tasks from the changelog's beginning; forget the ones taken away."""
        wanted -= {p for s, p in self.active if s == "1"}
        if wanted == set(self.warmups):
            return
        for p in set(self.warmups) - wanted:
            del self.warmups[p], self._warm_pos[p]
        for p in wanted - set(self.warmups):
            self.warmups[p], self._warm_pos[p] = Counter(), 0
        if self._warm_reader is None:
            isolation = {"isolation.level": "read_committed"} if self.exactly_once else {}
            self._warm_reader = Consumer({"bootstrap.servers": self._bootstrap, "group.id": f"{self.app}-warmup",
                                          "enable.auto.commit": False, **isolation})
        topic = changelog_topic(self.app)
        self._warm_reader.assign([TopicPartition(topic, p, pos if pos > 0 else OFFSET_BEGINNING)
                                  for p, pos in sorted(self._warm_pos.items())])

    def _warm_up(self, max_records: int = 500) -> int:
        """Apply what the changelog has for the warm-up tasks (no input is read, nothing is produced)."""
        if not self.warmups or self._warm_reader is None:
            return 0
        n = 0
        for msg in self._warm_reader.consume(max_records, 0):
            p = msg.partition() or 0
            if msg.error() or p not in self.warmups or (msg.offset() or 0) < self._warm_pos[p]:
                continue
            self.warmups[p][(msg.key() or b"").decode()] = int(msg.value() or b"0")
            self._warm_pos[p] = (msg.offset() or 0) + 1
            n += 1
        return n

    def _take_warmup(self, p: int) -> tuple[Counter[str], int] | None:
        """A warm-up that became active: its store and where its restore goes on from."""
        if p not in self.warmups:
            return None
        return self.warmups.pop(p), self._warm_pos.pop(p)

    def _reconcile(self, assigned: set[Task]) -> None:
        revoked, added = self.active - assigned, assigned - self.active
        if revoked:
            self._commit()  # everything processed so far, for every task, before any task leaves
            for task in revoked:
                self._drop(task)
        if self.exactly_once and added:  # fences the previous owners: their open transactions are aborted first
            producers = {task: Producer({"bootstrap.servers": self._bootstrap, "linger.ms": 5,
                                         "transactional.id": f"{self.app}-{task[0]}_{task[1]}"})
                         for task in sorted(added)}
            with ThreadPoolExecutor(len(producers)) as pool:  # each waits on the broker: in parallel
                list(pool.map(lambda p: p.init_transactions(30), producers.values()))
            for task, producer in producers.items():
                producer.begin_transaction()
                self._txn[task] = producer
        stateful = sorted(p for s, p in added if s == "1")
        warmed = {p: w for p in stateful if (w := self._take_warmup(p)) is not None}
        if self.exactly_once:
            self.stores.update(committed_changelogs(self._bootstrap, changelog_topic(self.app), stateful,
                                                    start=warmed))
        else:
            for p in stateful:
                self.stores[p] = self._restore(p, warmed.get(p))
        self.active = assigned
        if revoked or added:  # an unchanged assignment keeps the consumer's fetch positions
            self._assign_inputs()

    def _drop(self, task: Task) -> None:
        """Forget a task: its store, its position and (exactly_once) its producer."""
        if task[0] == "1":
            self.stores.pop(task[1], None)
        self._next.pop(self._input_of(task), None)
        self._dirty.discard(task)
        self._txn.pop(task, None)

    def reset(self) -> None:
        """Fenced or unknown to the coordinator: drop every task without committing, and join again."""
        for task in list(self.active):
            producer = self._txn.get(task)
            if producer is not None:
                with contextlib.suppress(KafkaException):
                    producer.abort_transaction(10)
            self._drop(task)
        self.active = set()
        self.epoch = 0
        self._set_warmups(set())
        self._assign_inputs()

    def leave(self) -> None:
        """Hand every task over cleanly, then leave the group (epoch -1)."""
        self._reconcile(set())
        self._set_warmups(set())
        self._stub.StreamsGroupHeartbeat(spb.StreamsGroupHeartbeatRequest(
            group_id=self.app, member_id=self.member_id, member_epoch=-1), timeout=10)
        self.epoch = -1

    def close(self) -> None:
        self._consumer.close()
        if self._warm_reader is not None:
            self._warm_reader.close()
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
            if start >= 0:
                self._next[key] = start
            tps.append(TopicPartition(tp.topic, tp.partition, start))
        self._consumer.assign(tps)

    def _restore(self, partition: int, warmed: tuple[Counter[str], int] | None = None) -> Counter[str]:
        """The store of task ("1", partition): the latest count per word in its changelog partition (read on
        from where a warm-up stopped, if it had one)."""
        counts: Counter[str] = Counter(warmed[0]) if warmed else Counter()
        position = warmed[1] if warmed else 0
        reader = Consumer({"bootstrap.servers": self._bootstrap, "group.id": f"{self.app}-restore",
                           "enable.auto.commit": False})
        try:
            topic = changelog_topic(self.app)
            _, high = reader.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            reader.assign([TopicPartition(topic, partition, position if position > 0 else OFFSET_BEGINNING)])
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
        """Restore the warm-ups a little further; process what has arrived for the active tasks, then make it
        durable (flush, commit)."""
        self._warm_up(max_records)
        n = 0
        for msg in self._consumer.consume(max_records, timeout_s):
            if msg.error():
                continue
            topic, partition, offset = msg.topic() or "", msg.partition() or 0, msg.offset() or 0
            key = (topic, partition)
            if key not in self._next and not any(self._input_of(t) == key for t in self.active):
                continue
            if offset < self._next.get(key, 0):
                continue  # fetched before a re-assign of the partition: processed already
            task = ("0", partition) if topic == self.source else ("1", partition)
            out = self._txn[task] if self.exactly_once else self._producer
            if topic == self.source:
                for word in (msg.value() or b"").decode().split():
                    out.produce(repartition_topic(self.app), key=word.encode(), value=b"1",
                                partition=word_partition(word))
            else:
                store = self.stores[partition]
                word = (msg.key() or b"").decode()
                store[word] += 1
                out.produce(changelog_topic(self.app), key=word.encode(), value=str(store[word]).encode(),
                            partition=partition)
            self._next[key] = offset + 1
            self._dirty.add(task)
            n += 1
        if self._dirty and (time.monotonic() - self._last_commit) * 1000 >= self.commit_interval_ms:
            self._commit()
        return n

    def _commit(self) -> None:
        """Flush what the tasks produced, then commit their inputs' offsets: the order that makes a handover
        lose nothing and count nothing twice (exactly_once: both in each task's transaction)."""
        self._last_commit = time.monotonic()
        if self.exactly_once:
            for task in sorted(self._dirty):
                self._commit_task(task)
            self._dirty.clear()
            return
        self._dirty.clear()
        self._producer.flush(10)
        offsets = [TopicPartition(t, p, o) for (t, p), o in self._next.items()]
        if offsets:
            self._consumer.commit(offsets=offsets, asynchronous=False)

    def _commit_task(self, task: Task) -> None:
        producer = self._txn[task]
        key = self._input_of(task)
        offsets = [TopicPartition(key[0], key[1], self._next[key])] if key in self._next else []
        try:
            if offsets:
                producer.send_offsets_to_transaction(offsets, self._consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            producer.begin_transaction()
        except KafkaException as e:  # fenced: another member owns the task now; nothing of ours counts
            if e.args and isinstance(e.args[0], KafkaError) and not e.args[0].fatal() \
                    and e.args[0].txn_requires_abort():
                producer.abort_transaction(30)
            raise StreamsMemberError(f"task {task} could not commit: {e}") from e

    def counts(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for store in self.stores.values():
            total.update(store)
        return total


def committed_changelog(bootstrap: str, topic: str, partition: int, timeout_s: float = 60.0) -> Counter[str]:
    """The latest committed count per word in one changelog partition (read_committed, to the partition's
    end): what a task's new owner starts from."""
    return committed_changelogs(bootstrap, topic, [partition], timeout_s)[partition]


def committed_changelogs(bootstrap: str, topic: str, partitions: list[int], timeout_s: float = 60.0,
                         start: Mapping[int, tuple[Counter[str], int]] | None = None) -> dict[int, Counter[str]]:
    """`committed_changelog` for several partitions with one reader; a partition in `start` reads on from a
    warm-up's store and position."""
    start = start or {}
    counts: dict[int, Counter[str]] = {p: Counter(start[p][0]) if p in start else Counter() for p in partitions}
    if not partitions:
        return counts
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "restore", "enable.auto.commit": False,
                       "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        reader.assign([TopicPartition(topic, p, start[p][1] if p in start and start[p][1] > 0 else OFFSET_BEGINNING)
                       for p in partitions])
        left = set(partitions)
        deadline = time.monotonic() + timeout_s
        while left:
            if time.monotonic() > deadline:
                raise StreamsMemberError(f"restoring {topic} did not reach the end of {sorted(left)} in {timeout_s} s")
            msg = reader.poll(0.1)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    left.discard(msg.partition() or 0)
                continue
            counts[msg.partition() or 0][(msg.key() or b"").decode()] = int(msg.value() or b"0")
        return counts
    finally:
        reader.close()


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


def run(member: WordCountMember, stop: list[bool]) -> None:
    """Heartbeat at the coordinator's interval and process in between, until `stop[0]`; a fenced or unknown
    member drops its tasks and joins again."""
    next_beat = 0.0
    while not stop[0]:
        now = time.monotonic()
        if now >= next_beat:
            try:
                member.heartbeat()
            except (StreamsMemberError, KafkaException) as e:
                print(f"{member.member_id}: {e}; rejoining", flush=True)
                member.reset()
            next_beat = now + max(member.heartbeat_interval_ms, 50) / 1000
        try:
            member.step(timeout_s=0.05)
        except (StreamsMemberError, KafkaException) as e:
            print(f"{member.member_id}: {e}; rejoining", flush=True)
            member.reset()
            next_beat = 0.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m groupcoord.clients.streams_member",
                                description="Run one reference streams member (word count) until SIGTERM.")
    p.add_argument("--coordinator", required=True)
    p.add_argument("--bootstrap-servers", required=True)
    p.add_argument("--app", required=True)
    p.add_argument("--member-id", required=True)
    p.add_argument("--process-id", required=True)
    p.add_argument("--source", default="lines")
    p.add_argument("--exactly-once", action="store_true")
    p.add_argument("--commit-interval-ms", type=int, default=0)
    args = p.parse_args(argv)
    member = WordCountMember(args.coordinator, args.app, args.member_id, args.process_id, args.bootstrap_servers,
                             source=args.source, exactly_once=args.exactly_once,
                             commit_interval_ms=args.commit_interval_ms)
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    print(f"{args.member_id}: running", flush=True)
    try:
        run(member, stop)
        member.leave()
    finally:
        member.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
