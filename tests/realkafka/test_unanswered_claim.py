"""A lease renewal that goes unanswered does not hold up the next one.

An instance of the Kafka-backed mode renews its lease with an OffsetCommit in the coordinators' group ("claims"),
from the thread that also serves that group's rebalance callbacks. The fault suite (`groupcoord faults --mode
kafka`, after instance pauses and broker kills) found owners whose lease lapsed for 26-174 s while Kafka still
assigned them their partitions: the claim was a synchronous commit, so the thread waited for its answer and
served no rebalance meanwhile, and nothing renewed the lease until the commit timed out. Claims are now
asynchronous, one in flight at a time, a new one sent when the one in flight has waited longer than a session.

Here the fault is injected on demand: the instance reaches the broker through a proxy that swallows its
OffsetCommit requests (and forwards everything else: its heartbeats, joins, producers and loaders), the request
never answered, as when the group coordinator moves away mid-request. Its consumer's request timeout is long
(`socket.timeout.ms` 120 s), so that a thread waiting for the answer waits far past every bound below. (librdkafka
itself does not complete a cooperative rebalance while a commit of the member is outstanding, so a rebalance is
not what this test waits for: the renewals are.)
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from groupcoord.child_processes import free_ports
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.kafka_state_options import KafkaStateOptions
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.sharding import PartitionState
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.kafka_broker import KafkaBroker, PortInUse

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

STATE_TOPIC = "groupcoord-state"
PARTITIONS = 4
SESSION_MS = 3000
OFFSET_COMMIT = 8  # Kafka's API key
# What a lapse or a renewal may take here: a session or two (a claim in flight longer than a session is given up
# for a new one), with room for a loaded machine; well under the 120 s a thread waiting on the unanswered commit
# would wait.
BOUND_S = 15 * SESSION_MS / 1000


class RequestSwallowingProxy:
    """Forwards Kafka connections; while `swallowing`, drops every client request of the API keys given (reading
    the request frames: a 4-byte size, then the API key), so the client waits for answers that never come."""

    def __init__(self, api_keys: set[int]) -> None:
        self.api_keys = api_keys
        self.swallowing = False
        self.swallowed = 0
        self.upstream = ("127.0.0.1", 0)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True, name="swallowing-proxy").start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def reset(self) -> None:
        """Close every open connection: the client fails what it still waits for and connects again."""
        socks, self._socks = self._socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
                s.close()

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self.reset()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=2)
            except OSError:
                client.close()
                continue
            self._socks += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        pending = b""
        try:
            while not self._stop.is_set():
                readable, _, _ = select.select([client, upstream], [], [], 0.2)
                for src in readable:
                    data = src.recv(65536)
                    if not data:
                        return
                    if src is upstream:
                        client.sendall(data)
                        continue
                    pending += data
                    while len(pending) >= 6 and len(pending) >= 4 + int.from_bytes(pending[:4], "big"):
                        end = 4 + int.from_bytes(pending[:4], "big")
                        frame, pending = pending[:end], pending[end:]
                        if self.swallowing and int.from_bytes(frame[4:6], "big") in self.api_keys:
                            self.swallowed += 1
                        else:
                            upstream.sendall(frame)
        except (OSError, ValueError):  # ValueError: `reset` closed a socket under select (file descriptor -1)
            return
        finally:
            client.close()
            upstream.close()


@pytest.fixture
def cut_broker() -> Iterator[tuple[KafkaBroker, RequestSwallowingProxy]]:
    """A single-node broker with a listener that advertises the proxy, so every connection of a client that
    bootstraps on the proxy goes through it."""
    proxy = RequestSwallowingProxy({OFFSET_COMMIT})
    try:
        for attempt in range(3):
            (bound,) = free_ports(1)
            try:
                broker = KafkaBroker(1, extra_listeners={"CUT": [(bound, proxy.port)]})
                break
            except PortInUse:  # taken before the broker bound it (another suite on the machine): another port
                if attempt == 2:
                    raise
        proxy.upstream = ("127.0.0.1", bound)
        with broker:
            broker.create_topic(STATE_TOPIC, PARTITIONS, config={"cleanup.policy": "compact"})
            yield broker, proxy
    finally:
        proxy.close()


def start_instance(bootstrap: str, **consumer_config: object) -> ServerThread:
    state = KafkaStateOptions(bootstrap, topic=STATE_TOPIC, partitions=PARTITIONS, session_timeout_ms=SESSION_MS,
                              heartbeat_interval_ms=300, directory_refresh_ms=200, create_topic=False,
                              consumer_config=consumer_config)
    return ServerThread(ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping({}),
                                      metadata_source=StaticMetadataSource({"orders": 4}), metadata_poll_s=0.2,
                                      kafka_state=state)).start()


def owned(instance: ServerThread) -> set[int]:
    ownership = instance.server.ownership
    assert ownership is not None
    return {p for p, s in ownership.owned().items() if s is PartitionState.OWNED}


def serving(instance: ServerThread) -> set[int]:
    """The partitions it serves now: owned, and its lease holds."""
    ownership = instance.server.ownership
    assert ownership is not None
    return owned(instance) if ownership.lease_remaining_s() > 0 else set()


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        time.sleep(0.05)


def test_an_instance_whose_lease_renewal_goes_unanswered_renews_its_lease_once_kafka_answers_again(
        cut_broker: tuple[KafkaBroker, RequestSwallowingProxy]) -> None:
    _, proxy = cut_broker
    instance = start_instance(proxy.address, **{"socket.timeout.ms": 120_000})
    try:
        wait_for(lambda: serving(instance) == set(range(PARTITIONS)), "the instance serves every partition",
                 timeout_s=90)
        proxy.swallowing = True  # its renewals go unanswered; its heartbeats still keep it in the group
        wait_for(lambda: not serving(instance), "its lease lapses: it stops serving", timeout_s=BOUND_S)
        assert owned(instance) == set(range(PARTITIONS)), "Kafka still assigns it every partition"

        proxy.swallowing = False
        wait_for(lambda: serving(instance) == set(range(PARTITIONS)),
                 "once Kafka answers again, a new renewal restores its lease (not the unanswered one's timeout)",
                 timeout_s=BOUND_S)
    finally:
        proxy.swallowing = False
        proxy.reset()  # a clean leave would otherwise wait for the swallowed commits to time out
        instance.stop()
