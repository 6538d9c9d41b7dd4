"""Several coordinator instances share the groups, and Kafka decides who serves which.

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
  the rebalance continue. It waits as long as that takes (no deadline after which it proceeds anyway): Kafka
  gives the partition to the next owner only after this callback returns, so the next owner's replay sees
  every record this instance acknowledged. (Were the callback to hang, the next owner's `init_transactions`
  would still fence this instance's writer.)
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
first request, and its writers are fenced by then if another instance took over.

Directory. Each owner commits, in the coordinators' group, an offset for each partition it is assigned whose
metadata is its advertised `host:port` (an OffsetCommit under the group's generation: Kafka rejects it from an
instance that is no longer a member). `FindCoordinator` answers from those commits, read periodically with
OffsetFetch by a consumer of that group that never subscribes. (librdkafka's mock cluster implements neither
DescribeGroups nor ConsumerGroupDescribe, so members' client ids and assignments cannot be described there.)
An entry can be stale for a moment after a move: a client that reaches an instance no longer owning the
group gets NOT_COORDINATOR and asks again.

Fenced: an instance cut off from the group can have records queued or a transaction open when another
instance gains the partition; that instance's `init_transactions` aborts the open transaction and the zombie's
later commits fail with PRODUCER_FENCED, so replay (read_committed) never sees them.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.partitioning import (
    drop_groups,
    in_partitions,
    state_partition,
    timers_after_partition_load,
)
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.runtime.kafka_log import KafkaRecordLog
from groupcoord.coordinator.runtime.record_codec import PartitionFenced
from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime

log = logging.getLogger("groupcoord.sharding")


def parse_host_port(value: str) -> tuple[str, int]:
    """`host:port` or `[v6]:port` -> (host, port); raises ValueError with the offending text."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)


def format_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class KafkaStateOptions:
    """Records in a Kafka topic; groups sharded over every instance configured with the same topic."""

    bootstrap_servers: str
    topic: str = "__groupcoord_state"
    partitions: int = 50  # Kafka's offsets.topic.num.partitions; must equal the topic's partition count
    group_id: str | None = None  # the coordinators' consumer group; default "groupcoord-coordinators.<topic>"
    session_timeout_ms: int = 10_000  # how long a dead instance keeps its partitions
    heartbeat_interval_ms: int | None = None  # default: a fifth of the session timeout
    lease_margin_ms: int | None = None  # serve until confirmed + session - margin; default: a fifth of the session
    directory_refresh_ms: int = 1_000
    load_timeout_s: float = 60.0
    linger_ms: int = 5
    create_topic: bool = True  # create it (compacted) when missing; the mock cluster cannot: tests create it
    client_config: Mapping[str, Any] = field(default_factory=dict)  # for every Kafka client (e.g. SASL/SSL)
    producer_config: Mapping[str, Any] = field(default_factory=dict)  # the record log's producer
    consumer_config: Mapping[str, Any] = field(default_factory=dict)  # the coordinators' group member

    @property
    def heartbeat_ms(self) -> int:
        return self.heartbeat_interval_ms or max(100, self.session_timeout_ms // 5)

    @property
    def lease_ms(self) -> int:
        """How long a confirmation of membership lets this instance serve: session timeout minus the margin."""
        margin = self.lease_margin_ms if self.lease_margin_ms is not None else self.session_timeout_ms // 5
        return self.session_timeout_ms - margin

    @property
    def coordinators_group(self) -> str:
        return self.group_id or f"groupcoord-coordinators.{self.topic}"

    def record_log(self, client_id: str = "groupcoord") -> KafkaRecordLog:
        return KafkaRecordLog(self.bootstrap_servers, self.topic, self.partitions, client_id=client_id,
                              linger_ms=self.linger_ms, create_topic=self.create_topic, transactional=True,
                              client_config=self.client_config, producer_config=self.producer_config)


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
        # Replaced whole by the directory thread: partition -> (host, port) of the owner that claimed it.
        self._directory: dict[int, tuple[str, int]] = {}
        self._advertised = ("", 0)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._consumer: Consumer | None = None
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._unclaimed: set[int] = set()  # assigned partitions not yet recorded in the directory (polling thread)
        self._assigned: set[int] = set()  # what Kafka assigns this instance now (polling thread writes)
        self._confirmed_at = float("-inf")  # monotonic send time of the last membership confirmation
        self._lapse_reported = False  # a failed renewal after the lease lapsed was logged (polling thread)
        # Claims in flight, oldest first: serial (the offset each claim commits) -> (send time, partitions).
        self._claims: dict[int, tuple[float, list[int]]] = {}
        self._serial = 0
        self._next_renew = 0.0
        self.fenced = 0  # times a partition's writer failed (metrics, tests)
        record_log.transactional = True
        record_log.on_fenced = self._on_fenced

    def lease_remaining_s(self) -> float:
        return self._confirmed_at + self.options.lease_ms / 1000 - time.monotonic()

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
        owner = self._directory.get(p)
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
        return dict(self._directory)

    # --- lifecycle ---------------------------------------------------------------------------------------------
    def start(self, advertised: tuple[str, int]) -> None:
        """Join the coordinators' group (call on the event loop, after the runtime started)."""
        self._loop = asyncio.get_running_loop()
        self._advertised = advertised
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
        for target, name in ((self._poll, "groupcoord-ownership"), (self._refresh_directory, "groupcoord-directory")):
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
        directory, so a leaving instance keeps answering NOT_COORDINATOR (clients ask FindCoordinator again)
        until someone else owns its groups, instead of refusing calls while no one does. Blocking."""
        if not partitions:
            return True
        o = self.options
        reader = Consumer({"bootstrap.servers": o.bootstrap_servers, **o.client_config,
                           "group.id": o.coordinators_group, "enable.auto.commit": False,
                           "client.id": f"{format_host_port(*self._advertised)}-leaving"})
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                try:
                    committed = reader.committed([TopicPartition(self.topic, p) for p in partitions],
                                                 timeout=max(0.1, min(5.0, deadline - time.monotonic())))
                except Exception as e:  # noqa: BLE001 - a leaving instance only waits less
                    log.debug("reading the directory while leaving failed: %s", e)
                    committed = []
                owners = self._parse_directory(committed)
                if all(owners.get(p, self._advertised) != self._advertised for p in partitions):
                    return True
                time.sleep(0.1)
            return False
        finally:
            reader.close()

    def _cancel_loads(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def _poll(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        renew_s = self.options.heartbeat_ms / 1000
        try:
            while not self._stopping.is_set():
                msg = consumer.poll(0.1)  # serves the rebalance and commit callbacks; partitions are paused
                if msg is not None and msg.error() is not None:
                    log.warning("coordinators' group: %s", msg.error())
                now = time.monotonic()
                newest = next(reversed(self._claims.values()), None)
                stuck = newest is not None and now - newest[0] > self.options.session_timeout_ms / 1000
                if (self._unclaimed or self._assigned) and (self._unclaimed or now >= self._next_renew) \
                        and (not self._claims or stuck):
                    self._claim(consumer)
                    self._next_renew = now + renew_s
        finally:
            consumer.close()  # revokes what we own (on_revoke runs here) and leaves the group

    def _claim(self, consumer: Consumer) -> None:
        """Record this instance as the owner of the assigned partitions in the directory, and renew the lease. The
        commit carries the group generation, so it fails while a rebalance is in progress (retried) and from an
        ex-member; its success confirms membership as of its send time (`_on_commit`).

        Asynchronous: a synchronous commit held the polling thread, which also serves the rebalance callbacks,
        for tens of seconds after instance pauses and broker kills (the fault suite saw an owner Kafka still
        assigned a partition to answer NOT_COORDINATOR for 36-80 s, its lease unrenewed, until another
        rebalance). One commit is in flight at a time, unless it has waited longer than a session.

        Each claim commits its own serial as the offset (the consumer never reads; the directory reads only the
        metadata), so that its result renews the lease from its own send time: a claim left unanswered (its request
        lost while the coordinator moved) is answered by a timeout long after the claims sent after it, and pairing
        results with claims in send order gave each answered claim the send time of the one before it, a session
        old, so the lease stayed lapsed until the lost one timed out (tests/realkafka/test_unanswered_claim.py)."""
        partitions = sorted(self._assigned | self._unclaimed)
        claim = format_host_port(*self._advertised)
        self._serial += 1
        serial = self._serial
        self._claims[serial] = (time.monotonic(), partitions)
        try:
            consumer.commit(offsets=[TopicPartition(self.topic, p, serial, metadata=claim) for p in partitions],
                            asynchronous=True)
        except KafkaException as e:
            del self._claims[serial]
            self._claimed(None, e)

    def _on_commit(self, error: KafkaError | None, tps: list[TopicPartition]) -> None:
        """A claim's result (the polling thread), found by its serial. A success makes the claims sent before it
        moot: they are forgotten, and their results, when they come, ignored."""
        serial = tps[0].offset if tps else -1
        claim = self._claims.pop(serial, None)
        if claim is None:
            return
        if error is None:
            for older in [s for s in self._claims if s < serial]:
                del self._claims[older]
        self._claimed(claim, error)

    def _claimed(self, claim: tuple[float, list[int]] | None, error: object) -> None:
        now = time.monotonic()
        if claim is None or error is not None:
            lapsed = self.lease_remaining_s() <= 0
            (log.warning if lapsed and not self._lapse_reported else log.debug)(
                "recording ownership of partitions %s in the directory failed (%s); retrying%s",
                claim[1] if claim else sorted(self._assigned), error,
                "; the lease has lapsed: NOT_COORDINATOR" if lapsed else "")
            self._lapse_reported = self._lapse_reported or lapsed
            self._next_renew = now + 0.2
            return
        sent, partitions = claim
        if self._lapse_reported or (now - sent) * 1000 > self.options.lease_ms:
            log.warning("lease renewed %.1f s after it lapsed; the commit took %.1f s (partitions %s)",
                        max(0.0, -self.lease_remaining_s()), now - sent, partitions)
            self._lapse_reported = False
        self._confirmed_at = max(self._confirmed_at, sent)
        self._unclaimed.difference_update(partitions)

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
        self._call_on_loop(self._lose(partitions), wait=True)

    def _call_on_loop(self, coro: Any, wait: bool) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            coro.close()
            return
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        if not wait:
            return
        # No deadline: the next owner must not load before this instance's transactions settled. Each one is
        # bounded by the writer's transaction timeout; a loop that stopped running cannot finish it.
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

    async def _lose(self, partitions: list[int]) -> None:
        for p in partitions:
            self._epochs[p] = self._epochs.get(p, 0) + 1
            self._state.pop(p, None)  # from now on the router answers NOT_COORDINATOR
        dropped = await self.runtime.submit("drop-partitions", lambda now: self._drop(partitions))
        pending = [asyncio.wrap_future(f) for f in self.log.pending_for(partitions)]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        for p in partitions:
            if p not in self._state:  # not gained again meanwhile
                await asyncio.to_thread(self.log.release, p)
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
        await self._lose([p])
        # Still ours: a fresh writer (which fences whoever fenced us) and a fresh replay. Fenced while Kafka
        # assigns the partition here and the lease holds means a stale acquisition fenced us: a former assignee
        # whose init_transactions finished after ours. No other instance can own it before our lease lapses.
        ours = p in self._assigned and (not fatal or self.lease_remaining_s() > 0)
        if ours and not self._stopping.is_set():
            await self._gain([p])

    # --- directory (its own thread) ----------------------------------------------------------------------------
    def _refresh_directory(self) -> None:
        """Read the owners' claims with a consumer of the coordinators' group that never subscribes (so never
        joins). Not `AdminClient.list_consumer_group_offsets`: in librdkafka (2.16.1 here) a NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS answer to the admin OffsetFetch dereferences the consumer-group handle an
        admin client does not have and the process dies with SIGSEGV (rd_kafka_cgrp_op <- rd_kafka_handle_OffsetFetch
        <- rd_kafka_ListConsumerGroupOffsetsResponse_parse; librdkafka issue 5040). A real broker answers so
        whenever the group's coordinator is loading or moving; a consumer handles it by finding the coordinator."""
        o = self.options
        reader = Consumer({"bootstrap.servers": o.bootstrap_servers, **o.client_config,
                           "group.id": o.coordinators_group, "enable.auto.commit": False,
                           "client.id": f"{format_host_port(*self._advertised)}-directory"})
        partitions = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        interval = o.directory_refresh_ms / 1000
        try:
            while True:
                try:
                    committed: list[TopicPartition] | None = reader.committed(partitions, timeout=max(interval, 5.0))
                except Exception as e:
                    log.warning("reading the coordinators' directory failed: %s", e)
                    committed = None
                if committed is not None:
                    self._directory = self._parse_directory(committed)
                if self._stopping.wait(interval):
                    return
        finally:
            reader.close()

    @staticmethod
    def _parse_directory(committed: list[TopicPartition]) -> dict[int, tuple[str, int]]:
        directory: dict[int, tuple[str, int]] = {}
        for tp in committed:
            if tp.offset >= 0 and tp.metadata:
                try:
                    directory[tp.partition] = parse_host_port(tp.metadata)
                except ValueError:
                    log.warning("directory entry for partition %d is not HOST:PORT: %r", tp.partition, tp.metadata)
        return directory
