"""The coordinator runtime: one event queue feeding the sans-I/O shard, timers, executor, record sink.

Kafka's CoordinatorRuntime in miniature. Every operation (a request, a fired timer, an offloaded assignor result, a
metadata change) is queued and run on the event loop one at a time, so the shard needs no locks. Its handler
changes nothing; the runtime applies what it returned (`shard.apply`, under a journal that puts the touched groups
back if the apply raises or the append is refused). An operation's records go to the record sink; its response is
released only once the sink says they are durable. Timers and background tasks the shard asks for are armed and
submitted here.

A reply that wrote nothing waits for the newest append not yet durable (Kafka's deferred read: no client sees
state a crash could take back). An append that fails is put back (its groups rebuilt from the committed image)
and then forgotten: a reply computed after that saw only what the log holds. Kept as "the newest", it refused
every later read with "not written" for as long as nothing else was appended (an instance of the Kafka-backed
mode serving only a share group, whose steady heartbeats write nothing: minutes; `_unfinished_append`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from groupcoord.coordinator.core.consumer.topic_regex import RegexResolution, RegexResolutionCompletion
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion, AssignorRun
from groupcoord.coordinator.core.results import CancelTimer, Result, ScheduleTimer
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.core.snapshot import timers_after_load
from groupcoord.coordinator.core.streams.group import StreamsAssignorCompletion, StreamsAssignorRun
from groupcoord.coordinator.core.streams.messages import CreateInternalTopics
from groupcoord.coordinator.runtime.committed_image import CommittedImage, record_group_ids
from groupcoord.coordinator.runtime.executor import BackgroundExecutor
from groupcoord.coordinator.runtime.metrics import CoordinatorMetrics
from groupcoord.coordinator.runtime.ports import InMemorySink, MetadataSource, RecordSink, poll_metadata, wall_clock_ms
from groupcoord.coordinator.runtime.record_codec import PartitionFenced, RecordTooLargeError
from groupcoord.coordinator.runtime.timers import LoopTimers

log = logging.getLogger("groupcoord.runtime")


@dataclass(slots=True)
class _Op:
    name: str
    fn: Callable[[int], Result[Any]]
    enqueued: float
    future: asyncio.Future[Any] | None
    token: int = 0
    group_ids: tuple[str, ...] = ()  # the groups it names (the request's): put back too if it fails
    # Run at once by `submit` (nothing was queued): a request whose future is made only if its reply must wait;
    # a reply released at once is left in `response` (`answered`) for `submit` to return.
    inline: bool = False
    response: Any = None
    answered: bool = False


class CoordinatorRuntime:
    def __init__(self, shard: GroupCoordinatorShard, metrics: CoordinatorMetrics, executor: BackgroundExecutor,
                 sink: RecordSink | None = None, metadata_source: MetadataSource | None = None,
                 metadata_poll_s: float = 1.0, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.shard = shard
        self.metrics = metrics
        self.executor = executor
        self.sink: RecordSink = sink or InMemorySink()
        self.metadata_source = metadata_source
        self.metadata_poll_s = metadata_poll_s
        self.clock = clock
        self.timers = LoopTimers(clock, self._on_timer_due)
        self._queue: asyncio.Queue[_Op] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self.failed: Exception | None = None
        self.on_failure: list[Callable[[Exception], None]] = []
        self.snapshot_every = 0  # records between snapshots (0: never); set when the sink is a FileLog
        self._snapshot_task: asyncio.Future[None] | None = None
        self._tokens = itertools.count(1)
        self._parked: dict[int, asyncio.Future[Any]] = {}
        self._parked_groups: dict[int, str] = {}
        # The state as of the durable log, to put failed operations' groups back (committed_image.py).
        self.image = CommittedImage(lambda: GroupCoordinatorShard(
            shard.config, shard.member_id_factory, shard.metadata))
        self._last_append: asyncio.Future[None] | None = None  # the newest append not known durable
        self.loaded = False
        self.advertised: tuple[str, int] = ("127.0.0.1", 0)
        # Several instances: answers (NOT_COORDINATOR | COORDINATOR_LOAD_IN_PROGRESS, message) for a group this
        # instance does not serve (now); None = serve it. Unset: this instance serves every group.
        self.router: Callable[[str], tuple[Errors, str] | None] | None = None
        # Called on the event loop after each operation that wrote records: (operation name, records, now).
        self.observers: list[Callable[[str, list[Any], int], None]] = []
        # Creates streams groups' missing internal topics (topic_creation.py); None: they are not created.
        self.topic_creator: Any = None

    # --- lifecycle -----------------------------------------------------------------------------------------
    async def start(self, load: Callable[[Callable[[Any], None]], Any] | None = None) -> Any:
        """Start processing. With `load` (e.g. `FileLog.load`), replay persisted records into the shard first,
        on a worker thread; until then every request is answered COORDINATOR_LOAD_IN_PROGRESS."""
        self._loop = self.timers.loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        report = None
        if load is not None:
            shard, image = self.shard, self.image

            def both(record: Any) -> None:
                shard.replay(record)
                image.replay(record)

            report = await asyncio.to_thread(load, both)
        self._apply(timers_after_load(self.shard, self.clock()))
        self._tasks.append(asyncio.create_task(self._process(), name="groupcoord-events"))
        if self.metadata_source is not None:
            def update(image: MetadataImage) -> Awaitable[Any]:
                return self.submit("metadata-update", lambda now: self.shard.on_metadata_update(image, now))

            self._tasks.append(asyncio.create_task(poll_metadata(
                self.metadata_source, lambda: self.shard.metadata, update, self.metadata_poll_s),
                name="groupcoord-metadata"))
        self.loaded = True
        return report

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks.clear()
        self.timers.stop()
        if self._snapshot_task is not None:
            await self._snapshot_task
        await asyncio.to_thread(self.executor.shutdown)

    # --- operations ------------------------------------------------------------------------------------------
    async def submit(self, name: str, fn: Callable[[int], Result[Any]], group_ids: tuple[str, ...] = ()) -> Any:
        """Queue an operation and wait for its response, released once its records and those of every operation
        before it are durable. `group_ids`: the groups it names, put back with the rest if it fails."""
        assert self._loop is not None and self._queue is not None, "runtime not started"
        enqueued = time.perf_counter()
        try:
            if self._queue.empty():
                # Nothing is waiting, so running it now keeps the order and saves the hop through the queue (the
                # event loop runs one operation at a time either way). A reply that need not wait (no record of
                # its own or before it pending) comes back without a future: no wait, no wake-up.
                op = _Op(name, fn, enqueued, None, 0, group_ids, inline=True)
                self._execute(op)  # an exception (a bug) reaches the caller, which answers with an error
                if op.answered:
                    return op.response
                assert op.future is not None
                future = op.future
            else:
                future = self._loop.create_future()
                self._queue.put_nowait(_Op(name, fn, enqueued, future, 0, group_ids))
            return await future
        finally:
            self.metrics.request_latency.observe(time.perf_counter() - enqueued, name)

    def run_steady(self, name: str, fn: Callable[[int], tuple[Any, Any, int] | None]) -> Any | None:
        """Run a steady operation at once, if it may skip the queue: `fn(now)` writes no record and changes no
        state (the consumer's steady heartbeat), returning `(response, timer key, deadline)`, the timer re-armed
        and its deadline noted here (`shard.note_deadline`); or None. It runs only where `submit` would have run
        it inline and released its reply at once: started, log healthy, nothing queued, no earlier append still
        pending (a reply waits for those). Returns the response, or None: the caller submits the full operation."""
        queue = self._queue
        if queue is None or not queue.empty() or self.failed is not None:
            return None
        if self._unfinished_append() is not None:
            return None
        started = time.perf_counter()
        out = fn(self.clock())
        if out is None:
            return None
        response, key, deadline = out
        self.shard.note_deadline(key, deadline)
        self.timers.arm(key, deadline)
        elapsed = time.perf_counter() - started
        metrics = self.metrics
        metrics.event_idle.add_busy(elapsed)
        metrics.request_latency.observe(elapsed, name)
        return response

    async def submit_parkable(self, name: str, fn: Callable[[int, int], Result[Any]], group_id: str = "") -> Any:
        """Like `submit`, for operations that may park (return `parked=True`): `fn(now, token)`; the response
        arrives when a later operation lists `(token, response)` in its completions, or an error if `group_id`
        is put back meanwhile (its parked requests are gone with its memory)."""
        assert self._loop is not None and self._queue is not None, "runtime not started"
        future: asyncio.Future[Any] = self._loop.create_future()
        token = next(self._tokens)
        enqueued = time.perf_counter()
        group_ids = (group_id,) if group_id else ()
        self._queue.put_nowait(_Op(name, lambda now: fn(now, token), enqueued, future, token, group_ids))
        try:
            return await future
        finally:
            self._parked.pop(token, None)
            self._parked_groups.pop(token, None)
            self.metrics.request_latency.observe(time.perf_counter() - enqueued, name)

    def _enqueue(self, name: str, fn: Callable[[int], Result[Any]], group_ids: tuple[str, ...] = ()) -> None:
        assert self._queue is not None
        self._queue.put_nowait(_Op(name, fn, time.perf_counter(), None, 0, group_ids))

    def enqueue_threadsafe(self, name: str, fn: Callable[[int], Result[Any]], group_ids: tuple[str, ...] = ()) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._enqueue, name, fn, group_ids)

    async def _process(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            op = await queue.get()
            try:
                self._execute(op)
            except Exception as e:  # a bug: answer this request with an error, keep serving the rest
                log.exception("operation %s failed", op.name)
                if op.future is not None and not op.future.done():
                    op.future.set_exception(e)

    def _execute(self, op: _Op) -> Awaitable[None] | None:
        """Run one operation atomically, as Kafka's runtime does: the handler (pure) returns its records, which
        are applied (`shard.apply`) and appended, and its timers and tasks armed, only if it returned normally;
        if it raised, nothing was applied; if the apply raised half-way or the log refused the records, the
        groups it touched are put back to their committed state and nothing of it stays. Replies (its own and
        those of parked requests it completes) are released once its records and every earlier operation's are
        durable. Returns the append's awaitable (None when nothing is pending). Raises what `fn` or the apply
        raised."""
        if self.failed is not None:  # fail-stop: a failed log takes nothing more, not even a timer's records
            if op.future is not None or op.inline:
                future = self._future_of(op)
                if not future.done():
                    future.set_exception(CoordinatorError(
                        Errors.COORDINATOR_NOT_AVAILABLE, "The coordinator's record log failed; it must be restarted."))
            return None
        metrics = self.metrics
        started = time.perf_counter()
        metrics.event_queue_time.record((started - op.enqueued) * 1000)
        now = self.clock()
        shard = self.shard
        applied: list[Any] = []
        shard.applied = applied
        shard.touched.clear()  # the groups this operation changes without a record (read only by `_put_back`)
        try:
            result = op.fn(now)
        except BaseException:  # the handler is pure: it changed nothing, so there is nothing to put back
            shard.applied = None
            raise
        try:
            shard.apply(result)  # the only place an operation changes state, journaled
        except BaseException:
            shard.applied = None
            self._put_back(op, applied, now)
            raise
        shard.applied = None
        if result.from_log:
            self.image.discard(record_group_ids(applied))
            for record in applied:
                self.image.replay(record)
        pending: asyncio.Future[None] | None = None
        refused: RecordTooLargeError | None = None
        if result.records and not result.from_log:
            try:
                appended = self.sink.append(result.records)
            except RecordTooLargeError as e:  # nothing was written; every reply of this operation gets the error
                refused = e
                log.error("operation %s refused: %s (groups %s)", op.name, e, ", ".join(sorted(e.group_ids))[:200])
                self._put_back(op, result.records, now)
            else:
                seq = self.image.appended(result.records)
                if appended is None:
                    self.image.durable(seq)
                else:
                    pending = asyncio.ensure_future(appended)
                    pending.add_done_callback(functools.partial(self._on_durable, seq))
                    self._last_append = pending
        if refused is None:
            self._apply(result)
            if result.records:
                self._notify(op.name, result.records, now)
        self._reply(op, result, refused, pending)
        elapsed = time.perf_counter() - started
        metrics.event_processing_time.record(elapsed * 1000)
        metrics.event_idle.add_busy(elapsed)
        if self.snapshot_every and getattr(self.sink, "records_since_snapshot", 0) >= self.snapshot_every \
                and self._snapshot_task is None:
            self._start_snapshot()
        return pending

    def _future_of(self, op: _Op) -> asyncio.Future[Any]:
        """The future of a request's reply; an inline operation's is made only now that its reply must wait."""
        if op.future is None:
            assert self._loop is not None
            op.future = self._loop.create_future()
        return op.future

    def _reply(self, op: _Op, result: Result[Any], refused: RecordTooLargeError | None,
               pending: asyncio.Future[None] | None) -> None:
        own = op.future is not None or op.inline  # a request waits for this operation's reply
        if own and result.parked and refused is None:  # a refused operation's request is answered now, never parked
            self._parked[op.token] = self._future_of(op)
            if op.group_ids:
                self._parked_groups[op.token] = op.group_ids[0]
            own = False
        if not own and not result.completions:
            return
        # Kafka's deferred read: a reply that wrote nothing still waits for the writes before it, so no client
        # sees state that a crash could take back. A partition's load or drop is no client's read: it answers
        # what it replayed or forgot, whatever became of earlier appends.
        durable = pending
        if durable is None and not result.from_log:
            durable = self._unfinished_append()
        replies: list[tuple[asyncio.Future[Any], Any]] = []
        if own:
            if op.future is None and refused is None and durable is None:  # inline, released now: no future
                op.response, op.answered = result.response, True
            else:
                replies.append((self._future_of(op), result.response))
        for token, response in result.completions:
            parked = self._parked.pop(token, None)
            self._parked_groups.pop(token, None)
            if parked is not None:
                replies.append((parked, response))
        for future, response in replies:
            if refused is not None:
                if not future.done():
                    future.set_exception(refused.answer(op.name))
            elif durable is None:
                if not future.done():
                    future.set_result(response)
            else:
                durable.add_done_callback(functools.partial(self._respond_durable, future, response))

    def _put_back(self, op: _Op, records: list[Any], now: int) -> None:
        """Rebuild the groups a failed operation touched (those its records name, those it changed without a record,
        those it names) from the committed image plus the earlier operations still pending on them: it changed
        nothing. Parked requests of those groups are answered with an error."""
        group_ids = record_group_ids(records) | self.shard.touched | set(op.group_ids)
        group_ids.discard("")
        if not group_ids:
            return
        log.warning("operation %s applied nothing; groups %s put back to their committed state", op.name,
                    ", ".join(sorted(group_ids))[:200])
        self._restore(group_ids, now, keep_pending=True)

    def _restore(self, group_ids: set[str], now: int, keep_pending: bool) -> None:
        """Put groups back from the image. If that fails too (a bug in replay), memory cannot be trusted: stop."""
        try:
            self._apply(self.image.put_back(self.shard, group_ids, now, keep_pending))
        except Exception as e:
            log.exception("putting groups back failed")
            self._fail(e)
        self._release_parked(group_ids)

    def _release_parked(self, group_ids: set[str]) -> None:
        for token, gid in list(self._parked_groups.items()):
            if gid in group_ids:
                del self._parked_groups[token]
                future = self._parked.pop(token, None)
                if future is not None and not future.done():
                    future.set_exception(CoordinatorError(
                        Errors.COORDINATOR_NOT_AVAILABLE, "The group was reloaded while this request waited; retry."))

    def _unfinished_append(self) -> asyncio.Future[None] | None:
        """The newest append not yet known durable (pending, or failed and its groups not yet put back), which a
        reply must wait for; None, and forgotten, once it is durable. `_on_durable` forgets a failed one once it
        has put its groups back (the module docstring says why)."""
        last = self._last_append
        if last is not None and last.done() and last.exception() is None:
            self._last_append = last = None
        return last

    def _on_durable(self, seq: int, pending: asyncio.Future[None]) -> None:
        """An append completed: its records join the committed image; if it failed, memory goes back to what
        the log holds (the groups of every operation that can no longer become durable)."""
        if pending.cancelled():  # only at shutdown
            return
        error = pending.exception()
        if error is None:
            self.image.durable(seq)
            return
        if isinstance(error, PartitionFenced):  # that partition's later appends fail too; others may not
            groups = self.image.discard(self.image.groups_of(seq))
        else:
            groups = self.image.discard()
            if isinstance(error, Exception):
                self._fail(error)
        if groups:
            log.error("an append failed (%s): groups %s put back to what the log holds", error,
                      ", ".join(sorted(groups))[:200])
            self._restore(groups, self.clock(), keep_pending=False)
        if self._last_append is pending and self.failed is None:  # put back: later replies need not wait for it
            self._last_append = None

    def _notify(self, name: str, records: list[Any], now: int) -> None:
        """Observers (the web view's rebalance timeline) see each operation's records once they are applied; one
        that fails is logged and never fails the operation."""
        for observe in self.observers:
            try:
                observe(name, records, now)
            except Exception:
                log.exception("observer %r failed on %s", observe, name)

    def _start_snapshot(self) -> None:
        """Rotate the log and write a snapshot of the committed image on a thread (start-up then replays one
        snapshot plus a short log instead of the whole history), without waiting on the event loop."""
        sink: Any = self.sink
        generation, rotated = sink.rotate_async()

        async def write() -> None:
            try:
                await self.image.write_snapshot(sink, generation, rotated)
            finally:
                self._snapshot_task = None

        self._snapshot_task = asyncio.ensure_future(write())

    def _respond_durable(self, future: asyncio.Future[Any], response: Any, pending: asyncio.Future[None]) -> None:
        """Release a reply whose records are durable, or fail it when they could not be (`_on_durable` has put
        memory back and, unless only a partition was lost, stopped the instance)."""
        if pending.cancelled():  # only at shutdown
            future.cancel()
            return
        error = pending.exception()
        if isinstance(error, PartitionFenced):  # not written: this instance lost the partition (it drops its groups)
            if not future.done():
                future.set_exception(CoordinatorError(
                    Errors.NOT_COORDINATOR, f"not written: {error.reason[:120]}; ask FindCoordinator."))
            return
        if error is not None:
            if not future.done():
                future.set_exception(error)
            return
        if not future.done():
            future.set_result(response)

    def _fail(self, error: Exception) -> None:
        """A record could not be made durable: memory is now ahead of the log. Fail stop: refuse every request
        (COORDINATOR_NOT_AVAILABLE, health NOT_SERVING) so the instance is restarted and reloads from its log."""
        if self.failed is None:
            log.critical("the record log failed (%s): refusing all requests until restarted", error)
            self.failed = error
            for listener in self.on_failure:
                listener(error)

    def _apply(self, result: Result[Any]) -> None:
        moved_earlier = False
        timers = self.timers
        for t in result.timers:
            if isinstance(t, ScheduleTimer):
                moved_earlier |= timers.schedule(t.key, t.deadline_ms)
            elif isinstance(t, CancelTimer):
                timers.cancel(t.key)
        if moved_earlier or (timers.handle is None and timers.next_deadline() is not None):
            timers.wake_up()
        if not result.tasks:
            return
        for task in result.tasks:
            if isinstance(task, AssignorRun):
                self.executor.submit(task, self._on_assignor_done)
            elif isinstance(task, RegexResolution):
                self.executor.submit_regex(task, self._on_regex_resolved)
            elif isinstance(task, StreamsAssignorRun):
                self.executor.submit_call(task.run, self._on_assignor_done)
            elif isinstance(task, CreateInternalTopics) and self.topic_creator is not None:
                self.topic_creator.create(task.topics, task.error_ttl_ms)

    def _on_assignor_done(self, completion: AssignorCompletion | StreamsAssignorCompletion) -> None:
        """Every modern type's offloaded run comes back the same way; the shard hands it to the group's type."""
        self.enqueue_threadsafe("assignor-complete", lambda now: self.shard.on_assignment_complete(completion, now),
                                (completion.group_id,))

    def _on_regex_resolved(self, completion: RegexResolutionCompletion) -> None:
        self.enqueue_threadsafe("regex-resolved", lambda now: self.shard.on_regex_resolution_complete(completion, now),
                                (completion.group_id,))

    def _on_timer_due(self, key: Any) -> None:
        group = key[1:2] if isinstance(key, tuple) else ()  # a group's timer names it second
        self._enqueue("timer", lambda now: self.shard.on_timer(key, now), group)
