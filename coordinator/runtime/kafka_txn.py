"""One transactional producer per owned state partition: what fences a zombie coordinator.

The producer's `transactional.id` is stable per partition (`groupcoord-<state topic>-<partition>`), so an
instance that gains the partition calls `init_transactions` with the same id as the previous owner: the broker
bumps the producer epoch, aborts the previous owner's open transaction, and refuses its later commits
(PRODUCER_FENCED). Replay reads `read_committed`, so nothing a fenced instance wrote after that is seen.

Group commit. Operations are queued; a writer thread idle until then waits `linger` after the first one (not
when operations queued up during the previous commit), then writes every queued message in one transaction
and completes each operation's future only after `commit_transaction` returned. A failed transaction (fenced,
or any other error) fails its operations and every later one with `PartitionFenced`, and the writer stops: the
caller drops the partition's groups (memory may be ahead of the log) and, unless the failure was fatal, gains
the partition again with a fresh writer and a fresh replay.

Abandoning. A hand-off must not wait for a transaction that may never commit (a broker that does not answer: the
commit gives up only after `transaction_timeout_s`). `abandon` fails every operation not committed at once and
leaves the writer thread to finish its commit in the background (it closes the producer when it ends). A future
failed so stays failed: should that transaction commit after all, its operations are durable but were never
acknowledged, which is safe (the next owner replays them, as any write whose reply was lost); more likely the next
owner's `init_transactions` aborts it first.

Each message carries a header `groupcoord-writer: <instance id>/<acquisition>` so a reader can tell which
owner (and which of its tenures) wrote it: tests check that no fenced tenure's record follows a newer one.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from groupcoord.coordinator.runtime.record_codec import PartitionFenced

log = logging.getLogger("groupcoord.kafka_txn")

WRITER_HEADER = "groupcoord-writer"
MAX_BATCH_MESSAGES = 2_000  # per transaction: bounds one commit's latency under a burst


def transactional_id(topic: str, partition: int) -> str:
    """Stable across instances and restarts: the broker fences by it."""
    return f"groupcoord-{topic}-{partition}"


def _settle(future: Future[None], error: BaseException | None) -> bool:
    """Complete `future` unless it already is: one an abandoning hand-off failed stays failed, even if its
    transaction commits after all (and one acknowledged stays acknowledged). False when it was already done."""
    try:
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
    except InvalidStateError:
        return False
    return True


class PartitionWriter:
    """Writes one state partition in transactions (see the module docstring). `submit` is thread-safe."""

    def __init__(self, topic: str, partition: int, producer_config: Mapping[str, Any], *, writer_tag: str,
                 linger_s: float, on_failed: Callable[[PartitionWriter, PartitionFenced, bool], None],
                 transaction_timeout_s: float = 30.0) -> None:
        self.topic = topic
        self.partition = partition
        self.writer_tag = writer_tag
        self._headers: list[tuple[str, str | bytes | None]] = [(WRITER_HEADER, writer_tag.encode())]
        self._config = {**producer_config, "transactional.id": transactional_id(topic, partition)}
        self._linger_s = linger_s
        self._on_failed = on_failed
        self._timeout_s = transaction_timeout_s
        self._producer: Producer | None = None
        self._queue: list[tuple[list[tuple[bytes, bytes | None]], Future[None]]] = []
        self._cond = threading.Condition()
        self._closing = False
        self._abandoned = False  # then whichever of `abandon` and the thread ending comes last closes the producer
        self._ended = False
        self._failure: PartitionFenced | None = None
        self._thread: threading.Thread | None = None
        self._inflight: list[Future[None]] = []  # the transaction being committed

    def start(self, timeout_s: float) -> None:
        """Create the producer and `init_transactions`: from here on the previous owner is fenced. Blocking."""
        producer = Producer(self._config)
        try:
            producer.init_transactions(timeout_s)
        except BaseException:
            producer.purge()
            producer.flush(0)
            raise
        self._producer = producer
        self._thread = threading.Thread(target=self._run, name=f"groupcoord-txn-{self.partition}", daemon=True)
        self._thread.start()

    @property
    def failed(self) -> PartitionFenced | None:
        return self._failure

    def submit(self, messages: list[tuple[bytes, bytes | None]]) -> Future[None]:
        future: Future[None] = Future()
        with self._cond:
            if self._failure is not None or self._closing:
                future.set_exception(self._failure or PartitionFenced(self.partition, "its writer is closed"))
                return future
            self._queue.append((messages, future))
            self._cond.notify()
        return future

    def pending(self) -> list[Future[None]]:
        with self._cond:
            return self._inflight + [f for _, f in self._queue]

    def close(self, timeout_s: float = 30.0) -> int:
        """Commit what is queued, then close the producer. What has not committed within `timeout_s` is
        abandoned (`abandon`); returns how many operations that failed. Blocking, at most `timeout_s`."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                return self.abandon(f"its writer was closed before its transaction committed ({timeout_s:.1f} s)")
        self._close_producer()
        return 0

    def abandon(self, reason: str) -> int:
        """Fail every operation not committed, now, and stop writing, without waiting for the transaction in
        flight (see the module docstring); returns how many operations failed. Does not block."""
        failure = PartitionFenced(self.partition, reason)
        with self._cond:
            self._closing = True
            self._abandoned = True
            self._failure = self._failure or failure
            left = self._inflight + [f for _, f in self._queue]
            self._queue, self._inflight = [], []
            self._cond.notify()
            running = self._thread is not None and not self._ended
        failed = sum(_settle(future, failure) for future in left)
        if not running:  # else the thread closes the producer when its commit returns
            self._close_producer()
        return failed

    def _close_producer(self) -> None:
        with self._cond:
            producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.purge()
                producer.flush(0)
            except KafkaException as e:  # a fenced producer reports its fatal error once more
                log.debug("closing the writer of state partition %d: %s", self.partition, e)
            with warnings.catch_warnings():  # closing a producer whose transaction failed warns that abort failed
                warnings.simplefilter("ignore", RuntimeWarning)
                producer.close()

    # --- the writer thread -----------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._write()
        finally:
            with self._cond:
                self._ended = True
                abandoned = self._abandoned
            if abandoned:
                self._close_producer()

    def _write(self) -> None:
        while True:
            idle = False
            with self._cond:
                while not self._queue and not self._closing:
                    idle = True
                    self._cond.wait()
                if not self._queue:
                    return
            if idle and self._linger_s > 0 and not self._closing:
                # Let concurrent operations join this transaction. Not after a commit that found work queued:
                # those operations already waited for a whole transaction.
                time.sleep(self._linger_s)
            with self._cond:
                batch, count = [], 0
                while self._queue and count < MAX_BATCH_MESSAGES:
                    item = self._queue.pop(0)
                    batch.append(item)
                    count += len(item[0])
                self._inflight = [f for _, f in batch]
            try:
                self._commit(batch)
            except KafkaException as e:
                self._fail(batch, e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None, str(e))
                return
            except Exception as e:  # e.g. a timeout
                self._fail(batch, None, f"{type(e).__name__}: {e}")
                return
            with self._cond:
                self._inflight = []
            for _, future in batch:
                _settle(future, None)

    def _commit(self, batch: list[tuple[list[tuple[bytes, bytes | None]], Future[None]]]) -> None:
        producer = self._producer
        assert producer is not None
        producer.begin_transaction()
        for messages, _ in batch:
            for key, value in messages:
                while True:
                    try:
                        producer.produce(self.topic, value=value, key=key, partition=self.partition,
                                         headers=self._headers)
                        break
                    except BufferError:  # the local queue is full: let it drain
                        producer.poll(0.01)
        producer.commit_transaction(self._timeout_s)

    def _fail(self, batch: list[tuple[list[tuple[bytes, bytes | None]], Future[None]]], error: KafkaError | None,
              text: str) -> None:
        fatal = error is not None and (error.fatal() or error.code() in (
            KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH))
        reason = ("fenced: another instance now owns it" if fatal else "its transaction failed") + f" ({text[:200]})"
        failure = PartitionFenced(self.partition, reason)
        producer = self._producer
        if producer is not None and error is not None and error.txn_requires_abort():
            try:
                producer.abort_transaction(self._timeout_s)
            except Exception as e:  # nothing more to lose: the writer stops either way
                log.warning("aborting the transaction of state partition %d failed: %s", self.partition, e)
        with self._cond:
            self._failure = failure
            rest, self._queue = self._queue, []
            self._inflight = []
            abandoned = self._abandoned
        failed = sum(_settle(future, failure) for _, future in batch + rest)
        if abandoned:  # its operations failed when it was abandoned
            log.info("state partition %d: the transaction of a writer handed off ended: %s", self.partition, reason)
        else:
            log.warning("state partition %d: %d operation(s) not acknowledged: %s", self.partition, failed, reason)
        self._on_failed(self, failure, fatal)
