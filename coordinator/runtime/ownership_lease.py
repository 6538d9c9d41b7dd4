"""The lease of an instance of the Kafka-backed mode: until when it may serve its state partitions.

Kafka moves a partition away from an instance whose session in the coordinators' group lapsed without asking it,
so an instance cut off from that group's coordinator must stop serving first (the theory of operation is in
`sharding`). It renews its lease with claims: an OffsetCommit, in the coordinators' group, of every partition it
is assigned, whose metadata is its advertised address (which the directory reads) and which carries the group's
generation, so Kafka refuses it from an ex-member and, for a classic group in Stable or PreparingRebalance, counts
it as a heartbeat. A claim answered without error and sent at T confirms ownership until T + the lease
(`KafkaStateOptions.lease_ms`: the session minus a margin for the clock-rate difference with the broker).

Claims are asynchronous: a synchronous commit held the polling thread, which also serves the rebalance callbacks,
for tens of seconds after instance pauses and broker kills (the fault suite saw an owner Kafka still assigned a
partition to answer NOT_COORDINATOR for 36-80 s, its lease unrenewed, until another rebalance). One claim is in
flight at a time, unless it has waited longer than a session (its request may be lost).

Each claim commits its own serial as the offset (the consumer never reads; the directory reads only the metadata),
so that its result renews the lease from its own send time: a claim left unanswered (its request lost while the
coordinator moved) is answered by a timeout long after the claims sent after it, and pairing results with claims
in send order gave each answered claim the send time of the one before it, a session old, so the lease stayed
lapsed until the lost one timed out (tests/realkafka/test_unanswered_claim.py). A success makes the claims sent
before it moot: they are forgotten, and their results, when they come, ignored. A result naming no claim's serial
(not seen) is taken for the oldest claim in flight, as before: the reading that renews the lease least.

Claims keep librdkafka's request timeout (`socket.timeout.ms`, 60 s). Its log line "Timed out HeartbeatRequest in
flight ... possibly held back by preceeding OffsetCommitRequest" suggested that an unanswered claim held the group's
heartbeats behind it for that long; in the fault suite's 30-minute run every such line came one heartbeat timeout
after the group coordinator was killed or cut off (so nothing on that connection was answered, claim or heartbeat),
and the share-group stall blamed on it had another cause, with this lease intact (runtime.py: a failed append).

Everything here runs on the polling thread of `PartitionOwnership`, but `remaining_s`, read by the router.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from groupcoord.coordinator.runtime.kafka_state_options import KafkaStateOptions

log = logging.getLogger("groupcoord.sharding")

RETRY_S = 0.2  # after a failed claim (a rebalance in progress, an ex-member): again shortly


class Lease:
    def __init__(self, options: KafkaStateOptions) -> None:
        self.options = options
        self.confirmed_at = float("-inf")  # monotonic send time of the last membership confirmation
        self._lapse_reported = False  # a failed renewal after the lease lapsed was logged
        # Claims in flight, oldest first: serial (the offset each claim commits) -> (send time, partitions).
        self._claims: dict[int, tuple[float, list[int]]] = {}
        self._serial = 0
        self._next_renew = 0.0

    def remaining_s(self) -> float:
        return self.confirmed_at + self.options.lease_ms / 1000 - time.monotonic()

    def due(self, now: float, assigned: bool, unclaimed: bool) -> bool:
        """Whether to claim now: partitions not yet in the directory at once, else every heartbeat interval; never
        beside a claim in flight, unless that one has waited longer than a session."""
        if not (assigned or unclaimed) or not (unclaimed or now >= self._next_renew):
            return False
        newest = next(reversed(self._claims.values()), None)
        return newest is None or now - newest[0] > self.options.session_timeout_ms / 1000

    def claim(self, consumer: Consumer, partitions: list[int], owner: str) -> None:
        """Send a claim of `partitions` for `owner` (the advertised `host:port`); its result comes to `on_commit`."""
        sent = time.monotonic()
        self._next_renew = sent + self.options.heartbeat_ms / 1000
        self._serial += 1
        serial = self._serial
        self._claims[serial] = (sent, partitions)
        try:
            consumer.commit(offsets=[TopicPartition(self.options.topic, p, serial, metadata=owner)
                                     for p in partitions], asynchronous=True)
        except KafkaException as e:
            del self._claims[serial]
            self._failed(partitions, e)

    def on_commit(self, error: KafkaError | None, tps: list[TopicPartition]) -> list[int]:
        """A claim's result, found by its serial: the partitions it confirmed (none when it failed or was moot)."""
        serial = tps[0].offset if tps else -1
        claim = self._claims.pop(serial, None)
        if claim is None:
            if 0 < serial <= self._serial or not self._claims:
                return []  # a claim made moot by a later success
            # Not one of ours (librdkafka reported another offset): the oldest in flight, the reading that renews least.
            log.info("a claim's result names offset %d, which no claim committed: taken for the oldest in flight",
                     serial)
            serial = next(iter(self._claims))
            claim = self._claims.pop(serial)
        sent, partitions = claim
        if error is not None:
            self._failed(partitions, error)
            return []
        for older in [s for s in self._claims if s < serial]:
            del self._claims[older]
        now = time.monotonic()
        if self._lapse_reported or (now - sent) * 1000 > self.options.lease_ms:
            log.warning("lease renewed %.1f s after it lapsed; the commit took %.1f s (partitions %s)",
                        max(0.0, -self.remaining_s()), now - sent, partitions)
            self._lapse_reported = False
        self.confirmed_at = max(self.confirmed_at, sent)
        return partitions

    def _failed(self, partitions: list[int], error: object) -> None:
        lapsed = self.remaining_s() <= 0
        (log.warning if lapsed and not self._lapse_reported else log.debug)(
            "recording ownership of partitions %s in the directory failed (%s); retrying%s", partitions, error,
            "; the lease has lapsed: NOT_COORDINATOR" if lapsed else "")
        self._lapse_reported = self._lapse_reported or lapsed
        self._next_renew = time.monotonic() + RETRY_S
