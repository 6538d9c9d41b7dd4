"""The gRPC servicer's plumbing, shared by its RPC groups (`admin_service.py`, `service.py`): protobuf helpers
and limits checks, and `_run`, which queues one operation on the runtime and turns its refusals and failures
into the RPC's in-band Kafka error.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from groupcoord.coordinator.core import limits
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.metadata import MetadataImage
from groupcoord.coordinator.runtime.runtime import CoordinatorRuntime
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc

log = logging.getLogger("groupcoord.service")

T = TypeVar("T")
# SyncGroupRequest has no field for the seed's "the leader transmits an error": a leader that could not compute
# the assignment sends its (Kafka) error code in this gRPC request metadata key; see `SyncGroup`.
LEADER_ERROR_METADATA_KEY = "groupcoord-assignment-error"


def topic_partitions_to_pb(tps: Mapping[str, Iterable[int]], image: MetadataImage) -> list[pb.TopicPartitions]:
    out = []
    for topic_id in sorted(tps):
        t = image.by_id.get(topic_id)
        out.append(pb.TopicPartitions(topic_id=topic_id, partitions=sorted(tps[topic_id]),
                                      topic_name=t.name if t else ""))
    return out


def _owned_from_pb(msg: pb.ConsumerGroupHeartbeatRequest) -> dict[str, frozenset[int]] | None:
    if not msg.HasField("topic_partitions"):
        return None
    owned: dict[str, frozenset[int]] = {}
    for tp in msg.topic_partitions.topics:
        seen = owned.get(tp.topic_id)
        owned[tp.topic_id] = frozenset(tp.partitions) if seen is None else seen.union(tp.partitions)
    return owned


def _leader_error(context: grpc.aio.ServicerContext) -> Errors:
    for key, value in context.invocation_metadata() or ():
        if key == LEADER_ERROR_METADATA_KEY:
            try:
                code = int(value)
            except ValueError:
                message = f"{LEADER_ERROR_METADATA_KEY} must be a Kafka error code, not {limits.shorten(value)}."
                raise CoordinatorError(Errors.INVALID_REQUEST, message) from None
            if code == 0:
                return Errors.NONE
            return Errors(code) if code in Errors._value2member_map_ else Errors.UNKNOWN_SERVER_ERROR
    return Errors.NONE


def _check_ids(group_id: str, *values: str | None) -> None:
    """The group id (INVALID_GROUP_ID when too long) and the member/instance ids of a request."""
    limits.check_group_id(group_id)
    for v in values:
        limits.check_length("member or instance id", v)


def _owned_count(msg: pb.ConsumerGroupHeartbeatRequest, cap: int = limits.OWNED_MAX_PARTITIONS) -> None:
    """Counted on the protobuf before any translation: translating a huge list is itself the cost. `cap` is
    at least the partitions the metadata knows (`_owned_cap`): a member may own what it was assigned."""
    if msg.HasField("topic_partitions"):
        topics = msg.topic_partitions.topics
        limits.check_count("owned topics", len(topics), cap)  # regexes may match many
        limits.check_count("owned topic-partitions", sum(len(tp.partitions) for tp in topics), cap)
        limits.check_lengths("owned topic id", (tp.topic_id for tp in topics), limits.TOPIC_NAME_MAX_CHARS)
    if msg.HasField("subscribed_topic_names"):
        limits.check_count("subscribed topic names", len(msg.subscribed_topic_names.values),
                           limits.SUBSCRIPTION_MAX_TOPICS)


def add_partition_errors(topics: Any, errors: Iterable[Any]) -> None:
    """Per-partition results (`topic`, `partition`, `error_code`, `error_message`) into a response's repeated
    topic field `topics`, one entry per topic in first-seen order, as Kafka's offset responses group them."""
    by_topic: dict[str, Any] = {}
    for pe in errors:
        topic = by_topic.get(pe.topic)
        if topic is None:
            topic = by_topic[pe.topic] = topics.add(name=pe.topic)
        topic.partitions.add(partition_index=pe.partition, error_code=int(pe.error_code),
                             error_message=pe.error_message)


@dataclass(frozen=True, slots=True)
class _Refused:
    """What `_run` hands back when a chunk of an admin request is refused as a whole (loading, not owner)."""

    code: Errors
    message: str


def _echo(value: str) -> str:
    """An id echoed in a response field: as sent when within the limits, else only its first characters."""
    return value if len(value) <= limits.ID_MAX_CHARS else value[:limits.ECHO_MAX_CHARS]


class ServiceBase(pb_grpc.GroupCoordinatorServicer):
    def __init__(self, runtime: CoordinatorRuntime) -> None:
        self.runtime = runtime
        self._owned_cap_for: tuple[object, int] = (None, limits.OWNED_MAX_PARTITIONS)
        self.shard = runtime.shard
        self._max_bytes: int = runtime.shard.config["message.max.bytes"]

    def principal_of(self, context: Any) -> str | None:
        """The authenticated caller, passed to the core with member requests; None: no authentication."""
        return None

    async def _run(self, name: str, fn: Callable[[int], Any], on_error: Callable[[Errors, str], T],
                   group_ids: Iterable[str] = ()) -> Any:
        """Queue `fn` on the runtime and return its response, or `on_error(code, message)` when it cannot run
        here (loading, a failed log, another instance's group) or failed."""
        return await self._submit(name, lambda: self.runtime.submit(name, fn), on_error, group_ids)

    async def _run_parkable(self, name: str, fn: Callable[[int, int], Any], on_error: Callable[[Errors, str], T],
                            group_id: str) -> Any:
        """`_run` for JoinGroup/SyncGroup, which may park at the coordinator until other members arrive."""
        return await self._submit(name, lambda: self.runtime.submit_parkable(name, fn), on_error, (group_id,))

    async def _submit(self, name: str, submit: Callable[[], Awaitable[Any]], on_error: Callable[[Errors, str], T],
                      group_ids: Iterable[str]) -> Any:
        if not self.runtime.loaded:
            return on_error(Errors.COORDINATOR_LOAD_IN_PROGRESS, "The coordinator is loading its state; retry.")
        if self.runtime.failed is not None:
            return on_error(Errors.COORDINATOR_NOT_AVAILABLE,
                            f"The coordinator's record log failed ({self.runtime.failed}); it must be restarted.")
        router = self.runtime.router
        if router is not None:
            for group_id in group_ids:
                refusal = router(group_id)
                if refusal is not None:
                    return on_error(*refusal)
        try:
            return await submit()
        except CoordinatorError as e:
            return on_error(e.code, e.message)
        except Exception as e:
            log.exception("%s failed", name)
            message = f"internal error: {type(e).__name__}: {limits.shorten(str(e))}"
            return on_error(Errors.UNKNOWN_SERVER_ERROR, message)

    async def _run_chunked(self, name: str, ids: list[str], fn: Callable[[list[str], int], Any],
                           invalid: Callable[[str, Errors, str], T], convert: Callable[[Any], list[T]],
                           target: Any) -> None:
        """An admin request over many group ids, as one queued operation per `ADMIN_CHUNK_GROUP_IDS` ids with a
        yield to the loop between chunks, so that no single request holds the event loop for long (Kafka gives
        no snapshot across groups either). Over `ADMIN_MAX_GROUP_IDS` ids, the whole request is refused; an id
        over the length limit gets INVALID_GROUP_ID on its own. Results go into the response's repeated field
        `target` chunk by chunk (no final copy of them all), in the order of `ids`."""
        if len(ids) > limits.ADMIN_MAX_GROUP_IDS:
            message = f"{len(ids)} group ids in one request; at most {limits.ADMIN_MAX_GROUP_IDS} are accepted."
            target.extend(invalid(_echo(g), Errors.INVALID_REQUEST, message) for g in ids)
            return
        step = limits.ADMIN_CHUNK_GROUP_IDS
        for start in range(0, len(ids), step):
            if start:
                await asyncio.sleep(0)
            chunk = ids[start:start + step]
            valid = [g for g in chunk if len(g) <= limits.ID_MAX_CHARS]
            results: list[T] = []
            if valid:
                resp = await self._run(name, functools.partial(fn, valid), _Refused, valid)
                results = ([invalid(g, resp.code, resp.message) for g in valid] if isinstance(resp, _Refused)
                           else convert(resp))
            it = iter(results)
            target.extend(next(it) if len(g) <= limits.ID_MAX_CHARS else invalid(
                _echo(g), Errors.INVALID_GROUP_ID,
                f"group_id of {len(g)} characters is longer than {limits.ID_MAX_CHARS}.") for g in chunk)
