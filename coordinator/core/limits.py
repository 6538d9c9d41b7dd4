"""The documented limits on every id, name and list a request may carry, checked at the edge.

Kafka bounds what a client can send with `message.max.bytes` and `socket.request.max.bytes`, and topic names
with 249 characters (`Topic.MAX_NAME_LENGTH`). groupcoord speaks gRPC, where a request is a tree of strings
and lists: without per-field limits one request can carry a 3 MB group id into the state and the log, or a
100k-entry admin request can hold the event loop for seconds. Every limit here is checked before the
request reaches the shard, so an oversized request is answered with Kafka's error code and writes nothing.

Error messages name the field and the limit and quote at most `ECHO_MAX_CHARS` characters of the value
(`shorten`), never the unbounded input. The README's "Limits" section lists each limit and its error code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from groupcoord.coordinator.core.errors import CoordinatorError, Errors

# --- lengths (characters) -------------------------------------------------------------------------------
ID_MAX_CHARS = 255  # group/member/instance ids, rack, client id/host, protocol type/name, assignor, configs
TOPIC_NAME_MAX_CHARS = 249  # Kafka's Topic.MAX_NAME_LENGTH; also topic ids in owned-partition lists
REASON_MAX_CHARS = 255  # JoinGroup/LeaveGroup reasons: truncated, as Kafka's clients do (KIP-800)
REGEX_MAX_CHARS = 1024  # subscribed_topic_regex
ECHO_MAX_CHARS = 64  # the most of any input an error message quotes

# --- counts per request ----------------------------------------------------------------------------------
SUBSCRIPTION_MAX_TOPICS = 2_000  # topic names in one subscription
OWNED_MAX_PARTITIONS = 50_000  # topic-partitions in one heartbeat's owned list
ADMIN_MAX_GROUP_IDS = 1_000  # DescribeGroups, DeleteGroups, DescribeGroupConfigs, FindCoordinator
ADMIN_CHUNK_GROUP_IDS = 25  # ids handled per queued operation: other groups' requests run in between
LIST_FILTERS_MAX = 16  # ListGroups states_filter / types_filter entries
ALTER_MAX_CONFIGS = 64  # configs in one AlterGroupConfigs
OFFSETS_MAX_PARTITIONS = 2_000  # partitions in one OffsetCommit or OffsetFetch
CLASSIC_MAX_PROTOCOLS = 64  # protocols in one JoinGroup
LEAVE_MAX_MEMBERS = 1_000  # members in one LeaveGroup
HEARTBEAT_BATCH_MAX = 1_000  # heartbeats in one ConsumerGroupHeartbeatBatchStream message
HEARTBEAT_BATCH_SLICE = 8  # heartbeats of one batch handled per event-loop pass (other requests run between)
SYNC_MAX_ASSIGNMENTS = 10_000  # member assignments in one SyncGroup (their bytes: message.max.bytes)


def shorten(value: object, limit: int = ECHO_MAX_CHARS) -> str:
    """`value` for an error message: its repr, cut to `limit` characters with an ellipsis and the full size."""
    if isinstance(value, str | bytes) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} {'characters' if isinstance(value, str) else 'bytes'})"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


def check_length(field: str, value: str | None, limit: int = ID_MAX_CHARS,
                 code: Errors = Errors.INVALID_REQUEST) -> None:
    if value is not None and len(value) > limit:
        raise CoordinatorError(code, f"{field} {shorten(value)} is longer than {limit} characters.")


def check_lengths(field: str, values: Iterable[str], limit: int = ID_MAX_CHARS,
                  code: Errors = Errors.INVALID_REQUEST) -> None:
    for v in values:
        check_length(field, v, limit, code)


def check_group_id(group_id: str) -> None:
    """Kafka answers a bad group id with INVALID_GROUP_ID (24); so does an oversized one here."""
    check_length("group_id", group_id, ID_MAX_CHARS, Errors.INVALID_GROUP_ID)


def check_count(what: str, count: int, limit: int, code: Errors = Errors.INVALID_REQUEST) -> None:
    if count > limit:
        raise CoordinatorError(code, f"{count} {what} in one request; at most {limit} are accepted.")


def truncate_reason(reason: str) -> str:
    """Kafka's clients cut a leave/join reason to 255 characters (KIP-800); the coordinator does the same."""
    return reason if len(reason) <= REASON_MAX_CHARS else reason[:REASON_MAX_CHARS]


def check_heartbeat(member_id: str, instance_id: str | None, rack_id: str | None, regex: str | None,
                    server_assignor: str | None, topic_names: Sequence[str] | None) -> None:
    """A ConsumerGroupHeartbeat's strings (the group id is checked first, by `check_group_id`)."""
    check_length("member_id", member_id)
    check_length("instance_id", instance_id)
    check_length("rack_id", rack_id)
    check_length("server_assignor", server_assignor)
    check_length("subscribed_topic_regex", regex, REGEX_MAX_CHARS, Errors.INVALID_REGULAR_EXPRESSION)
    if topic_names is not None:
        check_count("subscribed topic names", len(topic_names), SUBSCRIPTION_MAX_TOPICS)
        check_lengths("topic name", topic_names, TOPIC_NAME_MAX_CHARS)


def check_classic_protocols(protocol_type: str, protocols: Sequence[tuple[str, bytes]], max_bytes: int) -> None:
    """JoinGroup: protocol type and names are names; one member's metadata must fit in `message.max.bytes`."""
    check_length("protocol_type", protocol_type)
    check_count("protocols", len(protocols), CLASSIC_MAX_PROTOCOLS)
    check_lengths("protocol name", (name for name, _ in protocols))
    size = sum(len(m) for _, m in protocols)
    if size > max_bytes:
        raise CoordinatorError(Errors.INVALID_REQUEST,
                               f"protocol metadata of {size} bytes exceeds message.max.bytes={max_bytes}.")


def check_classic_group_metadata(members: Mapping[str, Any] | None, member_id: str,
                                 protocols: Sequence[tuple[str, bytes]], max_bytes: int) -> None:
    """The whole group's protocol metadata must fit in `message.max.bytes`: Kafka writes it in one group
    record, and the leader's JoinGroup response carries it all. Checked inside the group's queued operation
    so that it sees the members as they are. `members`: member id -> object with `protocols`."""
    if not members:
        return
    own = sum(len(m) for _, m in protocols)
    others = sum(sum(len(m) for _, m in member.protocols)
                 for mid, member in members.items() if mid != member_id)
    if own + others > max_bytes:
        raise CoordinatorError(
            Errors.INVALID_REQUEST,
            f"the group's protocol metadata would reach {own + others} bytes, over message.max.bytes={max_bytes}; "
            "send smaller metadata or use fewer members.")


def check_sync_assignments(assignments: Mapping[str, bytes], max_bytes: int) -> None:
    check_lengths("assignment member_id", assignments)
    size = sum(len(a) for a in assignments.values())
    if size > max_bytes:
        raise CoordinatorError(Errors.INVALID_REQUEST,
                               f"assignments of {size} bytes exceed message.max.bytes={max_bytes}.")


def check_config_updates(updates: Mapping[str, str | None]) -> None:
    """AlterGroupConfigs: Kafka answers a bad config with INVALID_CONFIG (40)."""
    check_count("configs", len(updates), ALTER_MAX_CONFIGS)
    for name, value in updates.items():
        check_length("config name", name, ID_MAX_CHARS, Errors.INVALID_CONFIG)
        check_length(f"config {shorten(name)} value", value, ID_MAX_CHARS, Errors.INVALID_CONFIG)
