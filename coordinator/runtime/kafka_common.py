"""What the Kafka metadata and lag sources share: their admin client and their failure-streak logging.

Both poll Kafka in the background and must survive outages quietly: one warning when a streak of failures
starts, one info line when it ends, debug lines in between; librdkafka's own per-attempt lines go to a child
logger (`<module>.librdkafka`) operators can silence.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka.admin import AdminClient


def admin_client(bootstrap_servers: str, client_id: str, module: str,
                 client_config: Mapping[str, Any] | None = None) -> AdminClient:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        "client.id": client_id,
        "logger": logging.getLogger(f"{module}.librdkafka"),
    }
    config.update(client_config or {})
    return AdminClient(config)


def check_intervals(refresh_interval_s: float, request_timeout_s: float) -> None:
    if refresh_interval_s <= 0:
        raise ValueError(f"refresh_interval_s must be > 0, got {refresh_interval_s}")
    if request_timeout_s <= 0:
        raise ValueError(f"request_timeout_s must be > 0, got {request_timeout_s}")


class FailureStreak:
    """Counts consecutive refresh failures and logs once per streak; remembers the last success."""

    def __init__(self, what: str, log: logging.Logger, clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.log = log
        self.clock = clock
        self.count = 0
        self.since: float | None = None
        self.last_ok: float | None = None  # clock() of the last success

    def success(self) -> None:
        now = self.clock()
        if self.count:
            since = self.since if self.since is not None else now
            self.log.info("%s recovered after %d failed attempt(s) over %.1f s", self.what, self.count, now - since)
        self.count = 0
        self.since = None
        self.last_ok = now

    def failure(self, first_message: str, reason: object) -> None:
        """`first_message` is logged as a warning when the streak starts (e.g. what is kept meanwhile)."""
        self.count += 1
        if self.count == 1:
            self.since = self.clock()
            self.log.warning("%s failed, %s: %s", self.what, first_message, reason)
        else:
            self.log.debug("%s failed again (%d in a row): %s", self.what, self.count, reason)
