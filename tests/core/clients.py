"""A model of a KIP-848 consumer, faithful to what the coordinator can observe of a real one.

The client owns what the last response it *received* gave it, minus what it has revoked; it reports its owned
partitions when they changed since the last request the coordinator answered, and sends every field (a full
request) after joining or after a request whose response it lost. On FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID
it loses everything (Kafka's onPartitionsLost) and rejoins with epoch 0 under the same member id. Revocation is
prompt or slow: a slow client keeps the revoked partitions (and does not take new ones) until it is done.
"""

from __future__ import annotations

from collections.abc import Mapping

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from tests.core.context import CoreContext

Owned = dict[str, frozenset[int]]

REJOIN_ERRORS = frozenset({Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID, Errors.GROUP_ID_NOT_FOUND})


def norm(partitions: Mapping[str, frozenset[int]]) -> Owned:
    return {t: frozenset(ps) for t, ps in partitions.items() if ps}


class ModelClient:
    def __init__(self, ctx: CoreContext, name: str, *, group_id: str = "grp",
                 topics: tuple[str, ...] | None = ("foo", "bar"), regex: str | None = None,
                 instance_id: str | None = None, rebalance_timeout_ms: int = 5000,
                 server_assignor: str | None = None) -> None:
        self.ctx = ctx
        self.name = name
        self.group_id = group_id
        self.topics = topics
        self.regex = regex
        self.instance_id = instance_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.server_assignor = server_assignor
        self.member_id = ""
        self.epoch = 0
        self.owned: Owned = {}
        self.alive = True
        self._full = True
        self._subscription_changed = False
        self._last_sent_owned: Owned | None = None
        self.pending: Owned | None = None  # received, not applied yet: a slow revocation is in progress
        self.errors: list[Errors] = []

    # --- what the client holds ---------------------------------------------------------------------------
    def owned_pairs(self) -> set[tuple[str, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}

    @property
    def joined(self) -> bool:
        return self.alive and self.epoch > 0

    # --- requests ----------------------------------------------------------------------------------------
    def build_request(self) -> ConsumerGroupHeartbeatRequest:
        if self.epoch == 0:
            assert not self.owned, "a client rejoins only after giving up everything"
            return ConsumerGroupHeartbeatRequest(
                self.group_id, self.member_id, 0, instance_id=self.instance_id,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
                subscribed_topic_names=self.topics if self.regex is None else None,
                subscribed_topic_regex=self.regex, server_assignor=self.server_assignor, topic_partitions={})
        full = self._full
        send_sub = full or self._subscription_changed
        owned = norm(self.owned)
        return ConsumerGroupHeartbeatRequest(
            self.group_id, self.member_id, self.epoch,
            instance_id=self.instance_id if full else None,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else None,
            subscribed_topic_names=self.topics if send_sub and self.regex is None else None,
            subscribed_topic_regex=self.regex if send_sub else None,
            server_assignor=self.server_assignor if full else None,
            topic_partitions=owned if full or owned != self._last_sent_owned else None,
        )

    def heartbeat(self, *, lose_response: bool = False, slow_revoke: bool = False) -> ConsumerGroupHeartbeatResponse:
        """Send a heartbeat. `lose_response`: the coordinator processes it but the reply never arrives (the
        client notices the failure and sends a full request next time)."""
        assert self.alive
        request = self.build_request()
        response = self.ctx.send(request)
        if lose_response:
            self._full = True
            return response
        self.on_response(request, response, slow_revoke)
        return response

    def on_response(self, request: ConsumerGroupHeartbeatRequest, response: ConsumerGroupHeartbeatResponse,
                    slow_revoke: bool) -> None:
        if response.error_code is not Errors.NONE:
            self.errors.append(response.error_code)
            if response.error_code in REJOIN_ERRORS:
                self.lose_everything()
            elif response.error_code is not Errors.UNRELEASED_INSTANCE_ID:
                raise AssertionError(f"{self.name}: unexpected {response.error_code.name}: {response.error_message}")
            return
        self.member_id = response.member_id
        self.epoch = response.member_epoch
        self._full = False
        if request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None:
            self._subscription_changed = False
        if request.topic_partitions is not None:
            self._last_sent_owned = norm(request.topic_partitions)
        if response.assignment is not None:
            self.receive(norm(response.assignment), slow_revoke)

    def receive(self, assignment: Owned, slow_revoke: bool) -> None:
        revoking = any(ps - assignment.get(t, frozenset()) for t, ps in self.owned.items())
        if revoking and slow_revoke:
            self.pending = assignment
        else:
            self.owned = assignment
            self.pending = None

    def finish_revocation(self) -> bool:
        """The slow revocation is done: the client now holds the latest assignment it received."""
        if self.pending is None:
            return False
        self.owned, self.pending = self.pending, None
        return True

    @property
    def needs_ack(self) -> bool:
        """The client holds something the coordinator has not heard about yet."""
        return self.joined and norm(self.owned) != self._last_sent_owned

    def lose_everything(self) -> None:
        self.owned = {}
        self.pending = None
        self.epoch = 0
        self._full = True
        self._last_sent_owned = None

    def subscribe(self, topics: tuple[str, ...] | None = None, regex: str | None = None) -> None:
        self.topics, self.regex = topics, regex
        self._subscription_changed = True

    # --- leaving -----------------------------------------------------------------------------------------
    def leave(self, *, static_temporary: bool = False) -> ConsumerGroupHeartbeatResponse:
        """Close: give everything up, tell the coordinator (-1, or -2 for a static member's temporary leave)."""
        epoch = -2 if static_temporary else -1
        self.owned, self.pending, self.alive = {}, None, False
        if not self.member_id:
            return ConsumerGroupHeartbeatResponse()
        return self.ctx.send(ConsumerGroupHeartbeatRequest(self.group_id, self.member_id, epoch,
                                                           instance_id=self.instance_id))

    def crash(self) -> None:
        """The process dies: it owns nothing any more and never heartbeats again."""
        self.owned, self.pending, self.alive = {}, None, False
