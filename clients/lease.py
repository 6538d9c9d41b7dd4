"""The client-side lease: how long a member may act on what the coordinator gave it without hearing back.

Why: the coordinator removes a member one session timeout after the last heartbeat it *processed*, and may
then give the member's partitions to someone else. A member cannot see that happen when it is cut off, so it
counts for itself: from when its last successful heartbeat was *sent* (the coordinator processed it later,
so its session timer started later), on the monotonic clock, for the session timeout minus a margin.

The margin is `max(10% of the session timeout, one heartbeat interval)`, at most half the session: it covers
the time `on_lost` needs to stop the application's in-flight work and the wake-up jitter of a loaded
machine, and it scales with the session. With Kafka's defaults (45 s session, 5 s heartbeats in KIP-848,
3 s classic) the lease is 40 s and 40.5 s; with 2 s sessions and 100 ms heartbeats it is 1.8 s. Heartbeats
succeed every interval, so a healthy member's lease never runs out between them.

Channel options: gRPC's default reconnect backoff grows from 1 s to 120 s, so a member could take many
seconds to notice that its coordinator is back. Members open their channels with a short, bounded backoff
and also replace a channel after a transport failure, so they reconnect on their next attempt.
"""

from __future__ import annotations

import random
import time
from abc import ABC, abstractmethod

# Kafka's default group.consumer.session.timeout.ms: used until the coordinator has said its own.
DEFAULT_SESSION_TIMEOUT_MS = 45_000
# Heartbeat RPC deadline floor: short enough that a silent network never holds the heartbeat thread past its
# lease, long enough for a loaded coordinator to answer.
MIN_HEARTBEAT_DEADLINE_S = 0.5
# Backoff after failures: jittered, doubling from 50 ms; rejoins after an error back off to at most 2 s.
BACKOFF_BASE_S = 0.05
BACKOFF_MAX_S = 2.0
# A coordinator that refuses calls (RESOURCE_EXHAUSTED: groupcoord.max.concurrent.requests reached) is
# overloaded, not gone: retry on the same channel, doubling from Kafka's retry.backoff.ms (100 ms) to 2 s,
# jittered so that members refused together do not come back together (KIP-580).
OVERLOAD_BACKOFF_BASE_S = 0.1

CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
]


def lease_margin_ms(session_timeout_ms: int, heartbeat_interval_ms: int) -> int:
    """max(10% of the session, one heartbeat interval), capped at half the session."""
    return min(max(session_timeout_ms // 10, heartbeat_interval_ms), session_timeout_ms // 2)


def lease_duration_s(session_timeout_ms: int, heartbeat_interval_ms: int) -> float:
    """How long after a successful heartbeat was sent the member may still act on its partitions."""
    session = session_timeout_ms if session_timeout_ms > 0 else DEFAULT_SESSION_TIMEOUT_MS
    return (session - lease_margin_ms(session, heartbeat_interval_ms)) / 1000


def jittered_backoff_s(failures: int, base_s: float, cap_s: float) -> float:
    """Exponential backoff for the `failures`-th consecutive failure (1-based), jittered to [d/2, d]."""
    d = min(cap_s, base_s * 2 ** max(failures - 1, 0))
    return random.uniform(d / 2, d)


class LeaseTimers(ABC):
    """The timing rules GroupMember and the classic members share: retry soon, never sleep or wait on an RPC
    past the lease (so the thread is awake to call `on_lost` when it runs out)."""

    heartbeat_interval_ms: int
    _rpc_timeout_s: float
    _failures: int  # consecutive failures

    @abstractmethod
    def lease_expires_at(self) -> float | None:
        """The `time.monotonic()` at which what the member holds counts as lost; None while it holds nothing."""

    def _until_lease_end(self, delay: float) -> float:
        """`delay`, cut short so the thread is awake when the lease runs out."""
        expires = self.lease_expires_at()
        return delay if expires is None else max(0.0, min(delay, expires - time.monotonic()))

    def _retry_delay(self) -> float:
        """Unreachable coordinator or 14/15/16: retry within one heartbeat interval (at most 1 s)."""
        cap = min(max(self.heartbeat_interval_ms / 1000, BACKOFF_BASE_S), 1.0)
        return jittered_backoff_s(self._failures, BACKOFF_BASE_S, cap)

    def _overload_delay(self) -> float:
        """RESOURCE_EXHAUSTED: back off exponentially, past the heartbeat interval if need be (cut at the lease's
        end by the caller), rather than retry into the coordinator's backlog."""
        return jittered_backoff_s(self._failures, OVERLOAD_BACKOFF_BASE_S, BACKOFF_MAX_S)

    def _heartbeat_deadline(self) -> float:
        """Per-RPC deadline: about a heartbeat interval, and never past the lease."""
        deadline = min(self._rpc_timeout_s, max(self.heartbeat_interval_ms / 1000, MIN_HEARTBEAT_DEADLINE_S))
        expires = self.lease_expires_at()
        if expires is not None:
            deadline = min(deadline, max(expires - time.monotonic(), 0.05))
        return deadline
