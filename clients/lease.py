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

# Kafka's default group.consumer.session.timeout.ms: used until the coordinator has said its own.
DEFAULT_SESSION_TIMEOUT_MS = 45_000
# Heartbeat RPC deadline floor: short enough that a silent network never holds the heartbeat thread past its
# lease, long enough for a loaded coordinator to answer.
MIN_HEARTBEAT_DEADLINE_S = 0.5

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
