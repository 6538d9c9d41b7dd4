"""Where each group is served in the Kafka-backed suite, and whether it answers: routing and probing.

Why: with several instances, a group lives on whichever instance owns its state partition, and that moves.
Only the consumer client follows FindCoordinator itself; the share, streams and classic members of the suite
know one address. So each member's proxy stands for the client's coordinator lookup: this router asks
FindCoordinator every `interval_s` (every live instance, directly) and points the proxies of a group's members
at the instance that answers for it (`TcpProxy.retarget` resets their connections; they reconnect there).

The same loop probes each group with an OffsetFetch at the instance FindCoordinator names, as any client
would, and records each change of answer as a ``probe`` event: ``ok <address>`` (the group answered, from
that instance) or ``error <code>`` (a routing error, 14/15/16, or no answer). `availability.py` turns those
events into unavailability windows per fault. Only changes are recorded, so the history stays small.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

import grpc

from groupcoord.clients.lease import CHANNEL_OPTIONS
from groupcoord.faults.history import Event, Kind
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

ROUTING_ERRORS = frozenset({14, 15, 16})  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


class GroupRouter:
    """`groups`: member kind -> group id. `instances()`: the addresses of the live instances now.
    `on_move(kind, address)`: the group of that kind is now answered for by `address`."""

    def __init__(self, groups: dict[str, str], instances: Callable[[], list[str]],
                 on_move: Callable[[str, str], None], record: Callable[[Event], None],
                 interval_s: float = 0.1) -> None:
        self.groups = groups
        self._instances = instances
        self._on_move = on_move
        self._record = record
        self._interval_s = interval_s
        self._owner: dict[str, str] = {}
        self._probe: dict[str, str] = {}
        self._stubs: dict[str, tuple[grpc.Channel, pb_grpc.GroupCoordinatorStub]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="faults-router", daemon=True)

    def start(self) -> GroupRouter:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for channel, _ in self._stubs.values():
            channel.close()

    def owner(self, kind: str) -> str | None:
        """The instance that answered for the group at the last probe (None: it did not answer)."""
        probe = self._probe.get(kind, "")
        return probe.split(" ", 1)[1] if probe.startswith("ok ") else None

    def owners(self) -> dict[str, str | None]:
        return {kind: self.owner(kind) for kind in self.groups}

    def all_served(self) -> bool:
        return all(self.owner(kind) is not None for kind in self.groups)

    def _stub(self, address: str) -> pb_grpc.GroupCoordinatorStub:
        if address not in self._stubs:
            channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)  # an instance restarts on its port
            self._stubs[address] = (channel, pb_grpc.GroupCoordinatorStub(channel))
        return self._stubs[address][1]

    def _find(self, group_id: str, live: list[str]) -> str | None:
        """The owner: an instance that names itself wins; else what most instances name."""
        named: Counter[str] = Counter()
        for address in live:
            try:
                resp = self._stub(address).FindCoordinator(pb.FindCoordinatorRequest(keys=[group_id]), timeout=1)
            except grpc.RpcError:
                continue
            for c in resp.coordinators:
                if c.error_code == 0 and c.port:
                    found = f"{c.host}:{c.port}"
                    if found == address:
                        return found
                    named[found] += 1
        return named.most_common(1)[0][0] if named else None

    def _answer(self, group_id: str, address: str) -> str:
        try:
            resp = self._stub(address).OffsetFetch(pb.OffsetFetchRequest(group_id=group_id, member_epoch=-1),
                                                   timeout=2)
        except grpc.RpcError as e:
            return f"error {e.code().name}"
        return f"error {resp.error_code}" if resp.error_code in ROUTING_ERRORS else f"ok {address}"

    def _run(self) -> None:
        while not self._stop.is_set():
            live = self._instances()
            for kind, group_id in self.groups.items():
                found = self._find(group_id, live)
                if found is not None and found != self._owner.get(kind):
                    self._owner[kind] = found
                    self._on_move(kind, found)
                probe = self._answer(group_id, found) if found is not None else "error none"
                if probe != self._probe.get(kind):
                    self._probe[kind] = probe
                    self._record(Event(time.monotonic(), Kind.PROBE, kind, role="probe", detail=probe))
            self._stop.wait(self._interval_s)
