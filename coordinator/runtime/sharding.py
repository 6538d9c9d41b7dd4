"""Several coordinator instances share the groups, and Kafka decides who serves which.

This module owns the state partitions (routing, gaining, losing, fencing); its options are in
`kafka_state_options`, its lease in `ownership_lease`, its directory in `ownership_directory`.

Theory of operation. The state topic has P partitions and a group lives in partition hash(group_id) mod P
(`groupcoord.coordinator.core.partitioning`). The instances are members of one Kafka consumer group subscribed to the
state topic ("groupcoord-coordinators.<topic>"): Kafka's group protocol, not ours, hands each partition to
exactly one live instance, and moves it when an instance joins, leaves or stops heartbeating
(`session.timeout.ms`). The cooperative-sticky assignor moves only the partitions that must move, so an
instance joining does not make every group unavailable. The consumer never reads (its partitions are paused):
membership is all it is for.

Per partition, on this instance (all of it on the runtime's event loop, so it is ordered with every request):

    not owned --assigned--> LOADING --replayed--> OWNED --revoked/lost--> not owned

- assigned (`on_assign`): mark LOADING (requests for its groups get COORDINATOR_LOAD_IN_PROGRESS), start the
  partition's transactional writer (`init_transactions` fences the previous owner), read the partition from the
  topic (read_committed) on a worker thread, replay it into the shard as one operation on the event queue
  (the same replay as any other load), arm those groups' timers, mark OWNED: serve.
- revoked (`on_revoke`, and `on_lost` when the session expired): stop routing to its groups (NOT_COORDINATOR),
  queue an operation that drops them from the shard (a barrier: every operation queued before it has handed
  its records to the writer), wait until those transactions committed or failed, close the writer, then let
  the rebalance continue. Kafka gives a revoked partition to the next owner only after this callback returns,
  so its replay sees every record this instance acknowledged. The wait is bounded (`hand_off_wait_s`): half the
  session when revoked, none when lost (another instance may own the partition already). While the polling
  thread waits, this instance takes no part in any rebalance (the partitions of an instance that died meanwhile
  go to no one) and renews no lease; a transaction whose broker does not answer gives up only after 30 s
  (issue 29: a takeover of 34 s). What has not committed by then is abandoned (`PartitionWriter.abandon`): its
  operations fail (their callers get NOT_COORDINATOR: never acknowledged) and the writer's thread finishes in
  the background. That transaction is aborted by the next owner's `init_transactions` before it loads, or
  committed before that and replayed: durable, unacknowledged, as a write whose reply was lost.
- fenced (the writer's transaction failed: PRODUCER_FENCED because another instance called `init_transactions`,
  or any other error): stop routing to its groups at once (NOT_COORDINATOR), fail the operations not committed
  (their callers get NOT_COORDINATOR: they were never acknowledged), drop the groups from memory (it may be
  ahead of the log). If Kafka still assigns the partition here, gain it again: after a failure other than a
  fencing always; after a fencing only while the lease holds (then no other instance can own the partition, and
  what fenced us was a stale `init_transactions` of an instance that had the partition assigned and revoked
  before its call completed).

Lease. Kafka moves a partition away from an instance whose session lapsed (no heartbeat for
`session.timeout.ms`) without asking it, so an instance cut off from the group's coordinator must stop serving
before that can happen. Every heartbeat interval the polling thread commits this instance's directory claims
(an OffsetCommit under the group's generation, which the broker refuses from an ex-member and, for a classic
group in Stable or PreparingRebalance, counts as a heartbeat: Kafka's `OffsetMetadataManager` renews the
session). A success sent at time T confirms ownership until T + session.timeout.ms - margin
(`lease_margin_ms`, default a fifth of the session timeout); past that, with no newer confirmation, the router
answers NOT_COORDINATOR for every group (on this instance's monotonic clock). The margin covers the clock-rate
difference with the broker and the time between the router's check and the response leaving. A process that
was paused (SIGSTOP, a long stall) finds its lease lapsed when it resumes, before its
first request, and its writers are fenced by then if another instance took over. The claims and their results:
`ownership_lease.Lease` (asynchronous, one in flight, each result matched to its claim by a serial).

Directory. Each owner commits, in the coordinators' group, an offset for each partition it is assigned whose
metadata is its advertised `host:port` (an OffsetCommit under the group's generation: Kafka rejects it from an
instance that is no longer a member). `FindCoordinator` answers from those commits, read periodically with
OffsetFetch by a consumer of that group that never subscribes. (librdkafka's mock cluster implements neither
DescribeGroups nor ConsumerGroupDescribe, so members' client ids and assignments cannot be described there.)
An entry can be stale for a moment after a move: a client that reaches an instance no longer owning the
group gets NOT_COORDINATOR and asks again. The reader: `ownership_directory.OwnershipDirectory`.

Fenced: an instance cut off from the group can have records queued or a transaction open when another
instance gains the partition; that instance's `init_transactions` aborts the open transaction and the zombie's
later commits fail with PRODUCER_FENCED, so replay (read_committed) never sees them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.partitioning import (
    drop_groups,
    in_partitions,
    state_partition,
    timers_after_partition_load,
)
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.runtime.kafka_log import KafkaRecordLog
from groupcoord.coordinator.runtime.kafka_state_options import KafkaStateOptions, format_host_port
from groupcoord.coordinator.runtime.ownership_directory import OwnershipDirectory
from groupcoord.coordinator.runtime.ownership_lease import Lease
from groupcoord.coordinator.runtime.record_codec import PartitionFenced
from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime

log = logging.getLogger("groupcoord.sharding")


class PartitionState(enum.Enum):
    LOADING = "loading"
    OWNED = "owned"


@dataclass(frozen=True, slots=True)
class Located:
    """FindCoordinator's answer for one group: an address, or why there is none yet."""

    host: str = ""
    port: int = 0
    error: Errors = Errors.NONE
    message: str = ""


class PartitionOwnership:
    """The router of the runtime (call it with a group id), the directory for FindCoordinator, and this
    instance's membership in the coordinators' consumer group."""

    def __init__(self, runtime: CoordinatorRuntime, record_log: KafkaRecordLog, options: KafkaStateOptions) -> None:
        self.runtime = runtime
        self.log = record_log
        self.options = options
        self.partitions = options.partitions
        self.topic = options.topic
        # Event-loop state: read by the router, changed only by coroutines and operations on the loop.
        self._state: dict[int, PartitionState] = {}
        self._epochs: dict[int, int] = {}  # bumped on every gain and loss: a load finishing late sees it moved
        self._tasks: set[asyncio.Task[None]] = set()
        self._directory = OwnershipDirectory(options)
        self._advertised = ("", 0)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._consumer: Consumer | None = None
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._unclaimed: set[int] = set()  # assigned partitions not yet recorded in the directory (polling thread)
        self._assigned: set[int] = set()  # what Kafka assigns this instance now (polling thread writes)
        self.lease = Lease(options)
        # How long a revoked partition's hand-off waits for its transactions. The polling thread waits with it
        # (no claims, no rebalance): the lease lapses `lease_ms` after the last claim, 0.8 session by default.
        self.hand_off_wait_s = options.session_timeout_ms / 2000
        # The hand-off's blocking steps get threads of their own: on asyncio's default pool they queued behind the
        # loads (`acquire` and `load_partition` each hold a thread up to the load timeout), unbounded. Idle, they
        # end with the executor (a fenced partition may still hand off after `stop`, so it is not shut down there).
        self._hand_off_threads = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="groupcoord-hand-off")
        self.fenced = 0  # times a partition's writer failed (metrics, tests)
        record_log.transactional = True
        record_log.on_fenced = self._on_fenced

    def lease_remaining_s(self) -> float:
        return self.lease.remaining_s()

    # --- routing (event loop) ----------------------------------------------------------------------------------
    def __call__(self, group_id: str) -> tuple[Errors, str] | None:
        p = state_partition(group_id, self.partitions)
        state = self._state.get(p)
        if state is PartitionState.OWNED:
            if self.lease_remaining_s() > 0:
                return None
            return (Errors.NOT_COORDINATOR,
                    f"This instance cannot confirm it still owns partition {p} of {self.topic} (group {group_id}): "
                    "its session in the coordinators' group may have lapsed; ask FindCoordinator.")
        if state is PartitionState.LOADING:
            return (Errors.COORDINATOR_LOAD_IN_PROGRESS,
                    f"Partition {p} of {self.topic}, which holds group {group_id}, is loading; retry.")
        return (Errors.NOT_COORDINATOR,
                f"This instance does not own partition {p} of {self.topic}, which holds group {group_id}; "
                "ask FindCoordinator.")

    def locate(self, group_id: str) -> Located:
        """Who coordinates `group_id`: this instance if it owns (or is loading) the group's partition, else the
        instance that last claimed it in the directory."""
        p = state_partition(group_id, self.partitions)
        state = self._state.get(p)
        if state is PartitionState.LOADING or (state is PartitionState.OWNED and self.lease_remaining_s() > 0):
            return Located(*self._advertised)
        owner = self._directory.entries.get(p)
        if owner is None or owner == self._advertised:  # never claimed, or our own claim from before a move
            return Located(error=Errors.COORDINATOR_NOT_AVAILABLE,
                           message=f"No instance owns partition {p} of {self.topic} (group {group_id}) yet; retry.")
        return Located(*owner)

    def owned(self) -> dict[int, PartitionState]:
        return dict(self._state)

    def count(self, state: PartitionState) -> float:
        """For the metrics gauges (read from the scrape thread: a snapshot of the dict, never iterated live)."""
        return float(sum(1 for s in list(self._state.values()) if s is state))

    def gauges(self) -> dict[str, tuple[str, Callable[[], float]]]:
        out: dict[str, tuple[str, Callable[[], float]]] = {f"groupcoord_state_partitions_{state.value}": (
            f"Partitions of the state topic this instance holds, {state.value}", functools.partial(self.count, state))
            for state in PartitionState}
        out["groupcoord_state_partition_writer_failures"] = (
            "Times a state partition's transactional writer failed or was fenced since start",
            lambda: float(self.fenced))
        out["groupcoord_state_lease_remaining_seconds"] = (
            "Seconds this instance may still serve its partitions without a new membership confirmation",
            lambda: max(-1.0, self.lease_remaining_s()))
        return out

    def directory(self) -> dict[int, tuple[str, int]]:
        return dict(self._directory.entries)

    # --- lifecycle ---------------------------------------------------------------------------------------------
    def start(self, advertised: tuple[str, int]) -> None:
        """Join the coordinators' group (call on the event loop, after the runtime started)."""
        self._loop = asyncio.get_running_loop()
        self._advertised = advertised
        self._directory.advertised = advertised
        o = self.options
        session = o.session_timeout_ms
        heartbeat = o.heartbeat_ms
        self._consumer = Consumer({
            "bootstrap.servers": o.bootstrap_servers, **o.client_config, "group.id": o.coordinators_group,
            "client.id": format_host_port(*advertised), "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": session, "heartbeat.interval.ms": heartbeat, "enable.auto.commit": False,
            "on_commit": self._on_commit,
            "auto.offset.reset": "latest", **o.consumer_config})
        self._consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                 on_lost=self._on_lost)
        directory = functools.partial(self._directory.run, self._stopping)
        for target, name in ((self._poll, "groupcoord-ownership"), (directory, "groupcoord-directory")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Leave the coordinators' group: Kafka hands this instance's partitions to the others at once, after
        `on_revoke` has dropped them here. Blocking; call from a thread other than the event loop's."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=60)
        self._threads.clear()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._cancel_loads)

    def wait_claimed_elsewhere(self, partitions: list[int], timeout_s: float) -> bool:
        """After `stop`: wait (up to `timeout_s`) until another instance has claimed each of `partitions` in the
        directory (`OwnershipDirectory.wait_claimed_elsewhere`). Blocking."""
        return self._directory.wait_claimed_elsewhere(partitions, timeout_s)

    def _cancel_loads(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def _poll(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        owner = format_host_port(*self._advertised)
        try:
            while not self._stopping.is_set():
                msg = consumer.poll(0.1)  # serves the rebalance and commit callbacks; partitions are paused
                if msg is not None and msg.error() is not None:
                    log.warning("coordinators' group: %s", msg.error())
                if self.lease.due(time.monotonic(), bool(self._assigned), bool(self._unclaimed)):
                    self.lease.claim(consumer, sorted(self._assigned | self._unclaimed), owner)
        finally:
            consumer.close()  # revokes what we own (on_revoke runs here) and leaves the group

    def _on_commit(self, error: KafkaError | None, tps: list[TopicPartition]) -> None:
        """A claim's result (the polling thread): what it confirmed is in the directory now."""
        self._unclaimed.difference_update(self.lease.on_commit(error, tps))

    # --- rebalance callbacks (the polling thread) --------------------------------------------------------------
    def _on_assign(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        consumer.incremental_assign(tps)
        if not tps:
            return
        consumer.pause(tps)
        partitions = sorted(tp.partition for tp in tps)
        log.info("assigned state partitions %s: loading", partitions)
        self._assigned.update(partitions)
        self._call_on_loop(self._gain(partitions), wait=False)
        self._unclaimed.update(partitions)  # claimed by the polling loop once the rebalance completes

    def _on_revoke(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        self._hand_off(tps, "revoked")
        consumer.incremental_unassign(tps)

    def _on_lost(self, consumer: Consumer, tps: list[TopicPartition]) -> None:
        self._hand_off(tps, "lost")
        consumer.incremental_unassign(tps)

    def _hand_off(self, tps: list[TopicPartition], why: str) -> None:
        if not tps:
            return
        partitions = sorted(tp.partition for tp in tps)
        self._unclaimed.difference_update(partitions)
        self._assigned.difference_update(partitions)
        log.info("state partitions %s %s: handing their groups off", partitions, why)
        self._call_on_loop(self._lose(partitions, 0.0 if why == "lost" else self.hand_off_wait_s), wait=True)

    def _call_on_loop(self, coro: Any, wait: bool) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            coro.close()
            return
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        if not wait:
            return
        # Bounded by `_lose` (it abandons the transactions that do not settle in time); a loop that stopped
        # running cannot finish it.
        waited = 0
        while True:
            try:
                future.result(timeout=10)
                return
            except TimeoutError:
                waited += 10
                if loop.is_closed() or not loop.is_running():
                    log.error("the event loop stopped while handing off state partitions")
                    future.cancel()
                    return
                log.warning("handing off state partitions: still waiting after %d s", waited)
            except Exception:
                log.exception("handing off state partitions failed")
                return

    # --- gaining and losing partitions (event loop) ------------------------------------------------------------
    async def _gain(self, partitions: list[int]) -> None:
        for p in partitions:
            epoch = self._epochs[p] = self._epochs.get(p, 0) + 1
            self._state[p] = PartitionState.LOADING
            task = asyncio.create_task(self._load(p, epoch), name=f"groupcoord-load-{p}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _load(self, p: int, epoch: int) -> None:
        backoff = 0.2
        while self._epochs.get(p) == epoch and not self._stopping.is_set():
            records: list[Any] = []
            try:
                # Fence the previous owner first: its open transaction is aborted (or completed) before we read.
                await asyncio.to_thread(self.log.acquire, p, self.options.load_timeout_s)
                if self._epochs.get(p) != epoch:
                    break
                report = await asyncio.to_thread(self.log.load_partition, p, records.append,
                                                 self.options.load_timeout_s)
                applied = await self.runtime.submit(f"load-partition-{p}",
                                                    functools.partial(self._apply_load, p, epoch, records))
            except Exception:
                log.exception("loading state partition %d failed; retrying in %.1f s", p, backoff)
                await self.runtime.submit(f"unload-partition-{p}", lambda now: self._drop([p]))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            if applied:
                log.info("state partition %d loaded: %d records up to offset %d in %.2f s", p, report.records,
                         report.end_offset, report.seconds)
                return
            break
        if self._epochs.get(p) != epoch or p not in self._state:  # moved away meanwhile: stop writing it
            await asyncio.to_thread(self.log.release, p)

    def _apply_load(self, p: int, epoch: int, records: list[Any], now: int) -> Result[bool]:
        """Replay partition `p` (an operation on the event queue) unless it moved away meanwhile."""
        if self._epochs.get(p) != epoch or self._state.get(p) is not PartitionState.LOADING:
            return Result(False)
        mine = in_partitions(self.partitions, {p})
        stale = drop_groups(self.runtime.shard, mine)  # nothing, unless an earlier load failed half-way
        for record in records:
            self.runtime.shard.replay(record)
        armed = timers_after_partition_load(self.runtime.shard, mine, now)
        self._state[p] = PartitionState.OWNED
        return Result(True, timers=stale.timers + armed.timers, from_log=True)

    def _drop(self, partitions: list[int]) -> Result[list[str]]:
        result = drop_groups(self.runtime.shard, in_partitions(self.partitions, set(partitions)))
        result.from_log = True
        return result

    async def _lose(self, partitions: list[int], wait_s: float) -> None:
        """Drop the partitions' groups, wait up to `wait_s` for their appends to commit, then release the writers,
        abandoning what has not committed (see the module docstring)."""
        for p in partitions:
            self._epochs[p] = self._epochs.get(p, 0) + 1
            self._state.pop(p, None)  # from now on the router answers NOT_COORDINATOR
        dropped = await self.runtime.submit("drop-partitions", lambda now: self._drop(partitions))
        deadline = time.monotonic() + wait_s
        pending = self.log.pending_for(partitions)
        loop = asyncio.get_running_loop()
        threads = self._hand_off_threads
        if pending and wait_s > 0:  # concurrent futures: nothing is left unobserved when the wait times out
            await loop.run_in_executor(threads, concurrent.futures.wait, pending, wait_s)
        abandoned: dict[int, int] = {}
        for p in partitions:
            if p not in self._state:  # not gained again meanwhile
                failed = await loop.run_in_executor(threads, self.log.release, p,
                                                    max(0.0, deadline - time.monotonic()))
                if failed:
                    abandoned[p] = failed
        if abandoned:
            log.warning("state partitions %s handed off with %d append(s) not committed after %.1f s: failed, "
                        "never acknowledged (their callers get NOT_COORDINATOR); the next owner's "
                        "init_transactions aborts their transactions", sorted(abandoned), sum(abandoned.values()),
                        wait_s)
        log.info("state partitions %s handed off: dropped %d group(s)", partitions, len(dropped))

    # --- fenced (a writer's thread, then the event loop) -------------------------------------------------------
    def _on_fenced(self, error: PartitionFenced, fatal: bool) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._fenced_on_loop, error.partition, fatal)

    def _fenced_on_loop(self, p: int, fatal: bool) -> None:
        self.fenced += 1
        if p not in self._state:
            return
        self._epochs[p] = self._epochs.get(p, 0) + 1
        self._state.pop(p, None)  # NOT_COORDINATOR from now on
        log.warning("state partition %d: writer %s; dropping its groups", p,
                    "fenced by a newer owner" if fatal else "failed")
        task = asyncio.create_task(self._after_fenced(p, fatal), name=f"groupcoord-fenced-{p}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _after_fenced(self, p: int, fatal: bool) -> None:
        await self._lose([p], self.hand_off_wait_s)
        # Still ours: a fresh writer (which fences whoever fenced us) and a fresh replay. Fenced while Kafka
        # assigns the partition here and the lease holds means a stale acquisition fenced us: a former assignee
        # whose init_transactions finished after ours. No other instance can own it before our lease lapses.
        ours = p in self._assigned and (not fatal or self.lease_remaining_s() > 0)
        if ours and not self._stopping.is_set():
            await self._gain([p])
