"""What the Kafka metadata and lag sources share: their admin client, their background refresh and its
failure-streak logging.

Both poll Kafka in the background and must survive outages quietly: one warning when a streak of failures
starts, one info line when it ends, debug lines in between; librdkafka's own per-attempt lines go to a child
logger (`<module>.librdkafka`) operators can silence.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from abc import ABC, abstractmethod
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


class BackgroundRefresh(ABC):
    """A source refreshed every `refresh_interval_s` on a daemon thread (`start`/`stop`; the first refresh at
    once), or on demand (`refresh_now`), one refresh at a time. A subclass's `_refresh` fetches and keeps what it
    got, returning whether that was everything; whatever it raises is a failed refresh, logged once per streak
    (`_failures`), and the source keeps what it had."""

    def __init__(self, what: str, thread_name: str, log: logging.Logger, refresh_interval_s: float,
                 request_timeout_s: float, clock: Callable[[], float]) -> None:
        if refresh_interval_s <= 0:
            raise ValueError(f"refresh_interval_s must be > 0, got {refresh_interval_s}")
        if request_timeout_s <= 0:
            raise ValueError(f"request_timeout_s must be > 0, got {request_timeout_s}")
        self.refresh_interval_s = refresh_interval_s
        self.request_timeout_s = request_timeout_s
        self._clock = clock
        self._failures = FailureStreak(what, log, clock)
        # Reentrant, so that what a refresh calls (a metadata source's callbacks) may itself call refresh_now().
        self._refresh_lock = threading.RLock()
        self._thread_name = thread_name
        self._stopping = False
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @abstractmethod
    def _refresh(self) -> bool:
        """Fetch and keep what was got; True if that was everything."""

    @abstractmethod
    def _kept_on_failure(self) -> str:
        """What a failed refresh leaves the source with, for the failure's log line ("keeping ...")."""

    def refresh_now(self) -> bool:
        """Refresh on the calling thread; True if everything was fetched. Never raises for a Kafka failure."""
        with self._refresh_lock:
            try:
                return self._refresh()
            except Exception as exc:  # keep what the last refresh got, whatever went wrong
                self._failures.failure(self._kept_on_failure(), exc)
                return False

    def age_seconds(self) -> float:
        """Seconds since the last complete refresh; infinity before one."""
        last = self._failures.last_ok
        return math.inf if last is None else max(0.0, self._clock() - last)

    def start(self) -> None:
        """Start the background refresh; the first refresh runs at once."""
        if self._thread is not None:
            return
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop the background refresh. A refresh in flight finishes first (bounded by its requests' timeouts),
        so by default this waits up to twice the request timeout and a margin."""
        self._stopping = True
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(2 * self.request_timeout_s + 6 if timeout_s is None else timeout_s)

    def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()
            self.refresh_now()
            self._wake.wait(self.refresh_interval_s)
