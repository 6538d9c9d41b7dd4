"""The heartbeat skeleton every modern group type runs, as Kafka's consumerGroupHeartbeat, shareGroupHeartbeat and
streamsGroupHeartbeat do: validate the request once at the edge, then leave, or join/heartbeat (find or create
the group, fence the member, write what changed, compute the target, reconcile, arm the timers). A refusal
(`CoordinatorError`) is answered with the type's error response and writes nothing; `after` runs only when the
heartbeat was answered (it may write: the group became empty, retention.py). Each type declares its steps once
(functions of its context: the shard, or the streams groups); what they do is its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from groupcoord.coordinator.core.errors import CoordinatorError
from groupcoord.coordinator.core.results import Result

C = TypeVar("C")
Req = TypeVar("Req")
Resp = TypeVar("Resp")


def _nothing(ctx: object, request: object, now: int, result: object) -> None:
    return None


@dataclass(frozen=True, slots=True)
class HeartbeatSteps(Generic[C, Req, Resp]):
    validate: Callable[[C, Req], None]
    leaving: Callable[[Req], bool]
    leave: Callable[[C, Req, int], Result[Resp]]
    join: Callable[[C, Req, int], Result[Resp]]
    refused: Callable[[C, Req, CoordinatorError], Resp]
    after: Callable[[C, Req, int, Result[Resp]], None] = _nothing

    def run(self, ctx: C, request: Req, now: int) -> Result[Resp]:
        try:
            self.validate(ctx, request)
            result = self.leave(ctx, request, now) if self.leaving(request) else self.join(ctx, request, now)
        except CoordinatorError as e:
            return Result(self.refused(ctx, request, e))
        self.after(ctx, request, now, result)
        return result
