"""Encoding of the core's records for the log and snapshots (groupcoord.wire.records.v1 protobuf).

The core speaks frozen dataclasses; this module maps each to a `LogRecord` (key fields + one value) and back.
Record types without a dedicated message (e.g. the classic group's) travel as `GenericRecord`: the dataclass
name plus its fields as JSON, typed back from the dataclass annotations on decode. Register such a type with
`register_generic(cls)`.

One operation's records travel together (`encode_operation`), so replay applies all of them or none:
    u8 OPERATION_FORMAT (2) | u32 record count | (u32 length | encoded record) * count   (little endian)
A payload whose first byte is not 2 is the format before operations (one `LogRecord`, whose first byte is
the protobuf tag 0x08 of its `version` field): it still loads, as an operation of one record. Byte 2 can
never start a `LogRecord` (it would be field 0, which protobuf forbids), so the two cannot be confused.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import struct
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from groupcoord.coordinator.core import records as r
from groupcoord.coordinator.core.classic.records import CLASSIC_RECORD_TYPES
from groupcoord.coordinator.core.config import GROUP_CONFIG_DEFS, render_value
from groupcoord.coordinator.core.config import _coerce as coerce_config_value
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from groupcoord.coordinator.core.mixed.group import MIXED_RECORD_TYPES
from groupcoord.coordinator.core.share.records import SHARE_RECORD_TYPES
from groupcoord.coordinator.core.streams.handlers import RECORD_TYPES as STREAMS_RECORD_TYPES
from groupcoord.wire.records.v1 import records_pb2 as pb

VERSION = 1
OPERATION_FORMAT = 2
_OP_HEADER = struct.Struct("<BI")
_LEN = struct.Struct("<I")


class RecordDecodeError(ValueError):
    """A payload that is not a record this version understands."""


class RecordTooLargeError(ValueError):
    """An operation whose encoding exceeds what the log (and so its loader) accepts; nothing was written.
    Kafka's log refuses such a batch with MESSAGE_TOO_LARGE (10); its coordinator then answers the request
    with INVALID_COMMIT_OFFSET_SIZE (28) for an offset commit and UNKNOWN_SERVER_ERROR for group operations."""

    def __init__(self, size: int, limit: int, group_ids: frozenset[str]) -> None:
        super().__init__(f"the operation's records take {size} bytes, over the log's limit of {limit} bytes")
        self.size = size
        self.limit = limit
        self.group_ids = group_ids

    def answer(self, op_name: str) -> CoordinatorError:
        """What the operation's requests are answered (Kafka's codes, above)."""
        code = Errors.INVALID_COMMIT_OFFSET_SIZE if op_name.startswith("OffsetCommit") else Errors.UNKNOWN_SERVER_ERROR
        return CoordinatorError(code, f"not written: {self}")


class PartitionFenced(RuntimeError):
    """The state partition's transactional writer was fenced (another instance called `init_transactions` with
    its `transactional.id`) or its transaction failed: the operation was not written and is not acknowledged.
    The runtime answers its callers NOT_COORDINATOR (16); the instance drops the partition's groups."""

    def __init__(self, partition: int, reason: str) -> None:
        super().__init__(f"state partition {partition}: {reason}")
        self.partition = partition
        self.reason = reason


def encode_operation(records: list[Any], encode_record: Callable[[Any], bytes] | None = None) -> bytes:
    """All records of one operation as one payload (see the module docstring)."""
    encode_record = encode_record or encode
    parts = [_OP_HEADER.pack(OPERATION_FORMAT, len(records))]
    for record in records:
        data = encode_record(record)
        parts.append(_LEN.pack(len(data)))
        parts.append(data)
    return b"".join(parts)


def decode_operation(payload: bytes, decode_record: Callable[[bytes], Any] | None = None) -> list[Any]:
    """The records of one operation payload, or of one record in the format before operations."""
    decode_record = decode_record or decode
    if not payload:
        raise RecordDecodeError("empty payload")
    if payload[0] != OPERATION_FORMAT:
        return [decode_record(payload)]
    if len(payload) < _OP_HEADER.size:
        raise RecordDecodeError("operation header is cut short")
    _, count = _OP_HEADER.unpack_from(payload, 0)
    if count == 1 and len(payload) >= _OP_HEADER.size + _LEN.size and \
            _LEN.unpack_from(payload, _OP_HEADER.size)[0] == len(payload) - _OP_HEADER.size - _LEN.size:
        return [decode_record(payload[_OP_HEADER.size + _LEN.size:])]  # the common case: one record
    pos, out = _OP_HEADER.size, []
    for _ in range(count):
        if pos + _LEN.size > len(payload):
            raise RecordDecodeError("operation is cut short")
        (length,) = _LEN.unpack_from(payload, pos)
        pos += _LEN.size
        if pos + length > len(payload):
            raise RecordDecodeError("operation is cut short")
        out.append(decode_record(payload[pos:pos + length]))
        pos += length
    if pos != len(payload):
        raise RecordDecodeError(f"{len(payload) - pos} bytes after the operation's {count} records")
    return out


def _sets_to_pb(parts: Mapping[str, frozenset[int]], out: Any) -> None:
    for topic_id in sorted(parts):
        ps = parts[topic_id]
        if ps:
            out.add(topic_id=topic_id, partitions=sorted(ps))


def _sets_from_pb(items: Any) -> dict[str, frozenset[int]]:
    return {i.topic_id: frozenset(i.partitions) for i in items}


def _epochs_to_pb(parts: Mapping[str, Mapping[int, int]], out: Any) -> None:
    for topic_id in sorted(parts):
        ps = parts[topic_id]
        if ps:
            keys = sorted(ps)
            out.add(topic_id=topic_id, partitions=keys, epochs=[ps[k] for k in keys])


def _epochs_from_pb(items: Any) -> dict[str, dict[int, int]]:
    return {i.topic_id: dict(zip(i.partitions, i.epochs, strict=True)) for i in items}


def _opt(msg: Any, name: str) -> Any:
    return getattr(msg, name) if msg.HasField(name) else None


_TOMBSTONES: dict[type, str] = {
    r.ConsumerGroupMetadataTombstone: "group_metadata",
    r.ConsumerGroupMemberMetadataTombstone: "member_metadata",
    r.ConsumerGroupTargetAssignmentMemberTombstone: "target_member",
    r.ConsumerGroupCurrentMemberAssignmentTombstone: "current_assignment",
    r.OffsetCommitTombstone: "offset_commit",
}
_TOMBSTONE_BY_KIND = {v: k for k, v in _TOMBSTONES.items()}

_GENERIC: dict[str, type] = {}


def register_generic(cls: type) -> None:
    """Let records of dataclass `cls` be persisted as GenericRecord."""
    _GENERIC[cls.__name__] = cls


# so every reader of the log (the server, `groupcoord log`) knows them
for _record_type in (*CLASSIC_RECORD_TYPES, *MIXED_RECORD_TYPES, *STREAMS_RECORD_TYPES):
    register_generic(_record_type)
for _record_type in SHARE_RECORD_TYPES:  # share groups (KIP-932)
    register_generic(_record_type)
for _record in (r.ConsumerGroupRegularExpression, r.ConsumerGroupRegularExpressionTombstone, r.GroupEmptySince,
                r.GroupEmptySinceTombstone):
    register_generic(_record)


def encode(record: Any) -> bytes:
    out = pb.LogRecord(version=VERSION, group_id=getattr(record, "group_id", ""))
    t = type(record)
    if t is r.ConsumerGroupMetadata:
        out.group_metadata.epoch = record.epoch
        out.group_metadata.metadata_hash = record.metadata_hash
    elif t is r.ConsumerGroupMemberMetadata:
        out.member_id = record.member_id
        m = out.member_metadata
        m.member_id = record.member_id
        for name in ("instance_id", "rack_id", "subscribed_topic_regex", "server_assignor", "principal"):
            value = getattr(record, name)
            if value is not None:
                setattr(m, name, value)
        m.client_id, m.client_host = record.client_id, record.client_host
        m.subscribed_topic_names.extend(record.subscribed_topic_names)
        m.rebalance_timeout_ms = record.rebalance_timeout_ms
    elif t is r.ConsumerGroupTargetAssignmentMember:
        out.member_id = record.member_id
        out.target_member.member_id = record.member_id
        _sets_to_pb(record.partitions, out.target_member.partitions)
    elif t is r.ConsumerGroupTargetAssignmentMetadata:
        out.target_metadata.assignment_epoch = record.assignment_epoch
        out.target_metadata.timestamp_ms = record.timestamp_ms
    elif t is r.ConsumerGroupCurrentMemberAssignment:
        out.member_id = record.member_id
        c = out.current_assignment
        c.member_id, c.member_epoch = record.member_id, record.member_epoch
        c.previous_member_epoch, c.state = record.previous_member_epoch, record.state
        _epochs_to_pb(record.assigned_partitions, c.assigned_partitions)
        _sets_to_pb(record.partitions_pending_revocation, c.partitions_pending_revocation)
    elif t is r.OffsetCommit:
        out.topic, out.partition = record.topic, record.partition
        o = out.offset_commit
        o.topic, o.partition, o.committed_offset = record.topic, record.partition, record.committed_offset
        o.leader_epoch, o.metadata, o.commit_timestamp_ms = record.leader_epoch, record.metadata, \
            record.commit_timestamp_ms
    elif t is r.GroupConfig:
        out.group_config.SetInParent()
        for name, value in record.configs.items():
            out.group_config.configs[name] = render_value(value)
    elif t in _TOMBSTONES:
        out.tombstone.kind = _TOMBSTONES[t]
        out.member_id = getattr(record, "member_id", "")
        out.topic = getattr(record, "topic", "")
        out.partition = getattr(record, "partition", 0)
    elif t.__name__ in _GENERIC:
        out.generic.type = t.__name__
        out.generic.json = json.dumps(_to_json(record), separators=(",", ":"), sort_keys=True).encode()
    else:
        raise TypeError(f"no encoding for record type {t.__name__}")
    return out.SerializeToString()


def decode(payload: bytes) -> Any:
    msg = pb.LogRecord()
    try:
        msg.ParseFromString(payload)
    except Exception as e:  # protobuf raises DecodeError (a subclass of Exception) on garbage
        raise RecordDecodeError(f"not a LogRecord: {e}") from None
    if msg.version != VERSION:
        raise RecordDecodeError(f"record version {msg.version} is not supported (this build reads {VERSION})")
    gid = msg.group_id
    kind = msg.WhichOneof("value")
    if kind == "group_metadata":
        return r.ConsumerGroupMetadata(gid, msg.group_metadata.epoch, msg.group_metadata.metadata_hash)
    if kind == "member_metadata":
        m = msg.member_metadata
        return r.ConsumerGroupMemberMetadata(
            gid, m.member_id, _opt(m, "instance_id"), _opt(m, "rack_id"), m.client_id, m.client_host,
            tuple(m.subscribed_topic_names), _opt(m, "subscribed_topic_regex"), _opt(m, "server_assignor"),
            m.rebalance_timeout_ms, _opt(m, "principal"))
    if kind == "target_member":
        return r.ConsumerGroupTargetAssignmentMember(gid, msg.target_member.member_id,
                                                     _sets_from_pb(msg.target_member.partitions))
    if kind == "target_metadata":
        return r.ConsumerGroupTargetAssignmentMetadata(gid, msg.target_metadata.assignment_epoch,
                                                       msg.target_metadata.timestamp_ms)
    if kind == "current_assignment":
        c = msg.current_assignment
        return r.ConsumerGroupCurrentMemberAssignment(
            gid, c.member_id, c.member_epoch, c.previous_member_epoch, c.state,
            _epochs_from_pb(c.assigned_partitions), _sets_from_pb(c.partitions_pending_revocation))
    if kind == "offset_commit":
        o = msg.offset_commit
        return r.OffsetCommit(gid, o.topic, o.partition, o.committed_offset, o.leader_epoch, o.metadata,
                              o.commit_timestamp_ms)
    if kind == "group_config":
        configs: dict[str, Any] = {}
        for name, text in msg.group_config.configs.items():
            d = GROUP_CONFIG_DEFS.get(name)
            configs[name] = coerce_config_value(d.type, text) if d is not None else text
        return r.GroupConfig(gid, configs)
    if kind == "tombstone":
        cls = _TOMBSTONE_BY_KIND.get(msg.tombstone.kind)
        if cls is None:
            raise RecordDecodeError(f"unknown tombstone kind {msg.tombstone.kind!r}")
        if cls is r.ConsumerGroupMetadataTombstone:
            return cls(gid)
        if cls is r.OffsetCommitTombstone:
            return cls(gid, msg.topic, msg.partition)
        return cls(gid, msg.member_id)
    if kind == "generic":
        cls = _GENERIC.get(msg.generic.type)
        if cls is None:
            raise RecordDecodeError(f"unknown record type {msg.generic.type!r}")
        return _from_json(cls, json.loads(msg.generic.json))
    raise RecordDecodeError("record has no value")


# --- generic JSON for dataclass records ------------------------------------------------------------------
def _to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, bytes):
        return {"$b": base64.b64encode(value).decode()}
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, Mapping):
        return [[_to_json(k), _to_json(v)] for k, v in value.items()]
    if isinstance(value, frozenset | set):
        return sorted((_to_json(v) for v in value), key=repr)
    if isinstance(value, list | tuple):
        return [_to_json(v) for v in value]
    if hasattr(value, "value") and isinstance(value.value, str | int):  # enums
        return value.value
    raise TypeError(f"cannot encode {type(value).__name__} in a generic record")


def _from_json(tp: Any, data: Any) -> Any:
    if data is None:
        return None
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = typing.get_type_hints(tp)
        return tp(**{f.name: _from_json(hints[f.name], data[f.name]) for f in dataclasses.fields(tp)
                     if f.name in data})
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        for option in args:
            if option is type(None):
                continue
            try:
                return _from_json(option, data)
            except (TypeError, ValueError, KeyError):
                continue
        raise ValueError(f"no union member of {tp} fits {data!r}")
    if tp is bytes:
        return base64.b64decode(data["$b"])
    if tp in (str, int, float, bool) or tp is Any:
        return data
    if isinstance(tp, type) and hasattr(tp, "__members__"):  # enums
        return tp(data)
    if origin in (dict, Mapping):
        kt, vt = args if args else (Any, Any)
        return {_from_json(kt, k): _from_json(vt, v) for k, v in data}
    if origin in (frozenset, set):
        (et,) = args or (Any,)
        return frozenset(_from_json(et, v) for v in data)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from_json(args[0], v) for v in data)
        return tuple(_from_json(a, v) for a, v in zip(args, data, strict=True))
    if origin is list:
        (et,) = args or (Any,)
        return [_from_json(et, v) for v in data]
    raise TypeError(f"cannot decode {tp!r} in a generic record")

