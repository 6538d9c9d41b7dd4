"""Single-writer leader election on the classic group protocol: the seed's use case 3.

Processes that can all do a job, of which exactly one must do it at a time (a producer writing a log, a
scheduler), join one group with protocol type "leader". The coordinator's elected leader of each generation
is the *writer*; in SyncGroup it tells every member who that is (its identity, e.g. the address to send
writes to). When the writer dies, its session times out, the group rebalances, and one of the survivors
becomes the writer: within a session timeout of its last heartbeat, plus one rebalance.

Safety. A writer stops being one the moment a rebalance begins (it may well be re-elected), and whenever its
lease runs out: the coordinator removes a member one session timeout after its last heartbeat, so a writer
that could not heartbeat for the session timeout minus a margin (`clients/lease.py`; partitioned, paused)
must assume it was replaced: `is_writer()` turns False on the monotonic clock at once, and the protocol
thread calls `on_demoted` and rejoins. A fatal error demotes first, then calls `on_fatal_error`. The generation is
a fencing token: a resource written to can reject a writer whose `epoch` is older than one it has seen.

    election = LeaderElection("127.0.0.1:50051", "ingest-writer", identity="10.0.0.7:9000",
                              on_elected=lambda epoch: ..., on_demoted=lambda: ...).start()
    if election.is_writer(): ...
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable

import grpc

from groupcoord.clients.classic_member import ClassicMemberError, ClassicMembership, JoinedMember
from groupcoord.clients.credentials import Credentials

log = logging.getLogger("groupcoord.leader")

PROTOCOL_TYPE = "leader"
PROTOCOL_NAME = "single-writer"
VERSION = 0

_HEADER = struct.Struct(">hh")  # version, identity length


def encode_identity(identity: str) -> bytes:
    """Member metadata and member state alike: `version int16, identity string (int16 length + UTF-8)`."""
    data = identity.encode("utf-8")
    return _HEADER.pack(VERSION, len(data)) + data


def decode_identity(data: bytes) -> str:
    """Reads any version >= 0 (later versions may only append fields)."""
    if len(data) < _HEADER.size:
        raise ValueError(f"leader protocol payload of {len(data)} bytes is truncated")
    version, n = _HEADER.unpack_from(data)
    if version < 0 or n < 0 or len(data) < _HEADER.size + n:
        raise ValueError(f"invalid leader protocol payload (version {version}, length {n})")
    return data[_HEADER.size:_HEADER.size + n].decode("utf-8")


class LeaderElection(ClassicMembership):
    protocol_type = PROTOCOL_TYPE

    def __init__(self, target: str, group_id: str, identity: str, *,
                 on_elected: Callable[[int], None] | None = None, on_demoted: Callable[[], None] | None = None,
                 instance_id: str | None = None, session_timeout_ms: int = 10_000,
                 rebalance_timeout_ms: int = 30_000, heartbeat_interval_ms: int = 3_000,
                 channel: grpc.Channel | None = None, rpc_timeout_s: float = 10.0,
                 on_fatal_error: Callable[[ClassicMemberError], None] | None = None,
                 credentials: Credentials | None = None) -> None:
        super().__init__(target, group_id, instance_id=instance_id, session_timeout_ms=session_timeout_ms,
                         rebalance_timeout_ms=rebalance_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
                         channel=channel, rpc_timeout_s=rpc_timeout_s, on_fatal_error=on_fatal_error,
                         credentials=credentials)
        self.identity = identity
        self._on_elected = on_elected
        self._on_demoted = on_demoted
        self._writer: str | None = None  # the current generation's writer identity (None while rebalancing)
        self._writing = False

    # --- public API ------------------------------------------------------------------------------------------------
    def is_writer(self) -> bool:
        """True while this process may write: elected for the current generation, lease still valid."""
        with self._lock:
            return self._writing and self.lease_valid()

    def writer(self) -> str | None:
        """The identity of the current generation's writer, as far as this member knows."""
        with self._lock:
            return self._writer if self.lease_valid() else None

    @property
    def epoch(self) -> int:
        """The fencing token: the generation in which this member was elected (-1: not elected)."""
        with self._lock:
            return self.generation if self._writing else -1

    # --- hooks -----------------------------------------------------------------------------------------------------
    def _protocols(self) -> list[tuple[str, bytes]]:
        return [(PROTOCOL_NAME, encode_identity(self.identity))]

    def _prepare_join(self) -> None:
        self._step_down()

    def _assign(self, protocol_name: str, members: list[JoinedMember]) -> dict[str, bytes]:
        state = encode_identity(self.identity)  # everyone learns who writes: the leader, i.e. this member
        return {m.member_id: state for m in members}

    def _on_synced(self, protocol_name: str, state: bytes) -> bool:
        writer = decode_identity(state) if state else None
        with self._lock:
            self._writer = writer
            elected = self.leader_id == self.member_id and not self._stopping.is_set()
            self._writing = elected
            epoch = self.generation
        if elected:
            log.info("%s is the writer of group %s (epoch %d)", self.identity, self.group_id, epoch)
            if self._on_elected is not None:
                _safe(self._on_elected, epoch)
        return False

    def _on_lost(self) -> None:
        self._step_down()

    def _on_close(self) -> None:
        self._step_down()

    def _step_down(self) -> None:
        with self._lock:
            was = self._writing
            self._writing = False
            self._writer = None
        if was and self._on_demoted is not None:
            _safe(self._on_demoted)


def _safe(fn: Callable[..., None], *args: int) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("leader election callback %s failed", getattr(fn, "__name__", fn))
