"""A small Kafka-protocol client for the differential suite: plain sockets, schema-driven.

Why schema-driven: the request and response layouts come from the very message schemas
(`common/message/*.json`) packed in the kafka-clients jar of the broker under test, so every API is encoded
at exactly the version that broker accepts, and nothing is transcribed by hand. The codec implements Kafka's
wire rules: request header v2 (v1 for non-flexible versions), response header v1 (ApiVersions: v0),
flexible versions with compact strings/arrays/bytes (unsigned varint length + 1) and tagged fields.

Messages are plain dicts keyed by the schema's field names in snake_case (`MemberEpoch` -> `member_epoch`);
a field absent from a request dict takes its schema default. UUIDs are `uuid.UUID`.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import uuid
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["API_KEYS", "KafkaConnection", "Schema", "schema", "snake"]

# The API keys and the versions this suite speaks (all accepted by Kafka 4.4).
API_KEYS: dict[str, tuple[int, int]] = {
    "ApiVersions": (18, 3),
    "Metadata": (3, 12),
    "FindCoordinator": (10, 6),
    "ConsumerGroupHeartbeat": (68, 1),
    "ConsumerGroupDescribe": (69, 1),
    "OffsetCommit": (8, 9),
    "OffsetFetch": (9, 9),
    "JoinGroup": (11, 9),
    "SyncGroup": (14, 5),
    "Heartbeat": (12, 4),
    "LeaveGroup": (13, 5),
    "DescribeGroups": (15, 6),
    "ListGroups": (16, 5),
    "IncrementalAlterConfigs": (44, 1),
    "DescribeConfigs": (32, 4),
}


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _versions(spec: str | None) -> tuple[int, int]:
    """'3+' -> (3, big); '2-7' -> (2, 7); 'none' or missing -> empty."""
    if not spec or spec == "none":
        return (1, 0)
    if spec.endswith("+"):
        return (int(spec[:-1]), 1 << 15)
    lo, _, hi = spec.partition("-")
    return (int(lo), int(hi or lo))


def _in(spec: str | None, version: int) -> bool:
    lo, hi = _versions(spec)
    return lo <= version <= hi


class Schema:
    """One message schema (request or response) loaded from Kafka's JSON."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.name: str = raw["name"]
        self.api_key: int = raw.get("apiKey", -1)
        self.flexible = raw.get("flexibleVersions", "none")
        self.valid = raw.get("validVersions", "none")
        self.fields: list[dict[str, Any]] = raw["fields"]
        self.structs = {s["name"]: s["fields"] for s in raw.get("commonStructs", [])}

    def is_flexible(self, version: int) -> bool:
        return _in(self.flexible, version)

    # --- encoding ---------------------------------------------------------------------------------------
    def encode(self, version: int, msg: dict[str, Any]) -> bytes:
        if not _in(self.valid, version):
            raise ValueError(f"{self.name} v{version} is not in {self.valid}")
        out = bytearray()
        self._encode_fields(out, self.fields, msg, version, self.is_flexible(version))
        return bytes(out)

    def _sub(self, field: dict[str, Any]) -> list[dict[str, Any]]:
        if "fields" in field:
            return list(field["fields"])
        return self.structs[field["type"].removeprefix("[]")]

    def _encode_fields(self, out: bytearray, fields: list[dict[str, Any]], msg: dict[str, Any], v: int,
                       flex: bool) -> None:
        tagged: list[tuple[int, bytes]] = []
        for f in fields:
            if not _in(f["versions"], v):
                continue
            key = snake(f["name"])
            value = msg.get(key, _default(f))
            if "tag" in f and _in(f.get("taggedVersions"), v):
                if value is None or value == _default(f):
                    continue
                buf = bytearray()
                self._encode_value(buf, f, value, v, flex)
                tagged.append((int(f["tag"]), bytes(buf)))
                continue
            self._encode_value(out, f, value, v, flex)
        if flex:
            _uvarint(out, len(tagged))
            for tag, data in sorted(tagged):
                _uvarint(out, tag)
                _uvarint(out, len(data))
                out += data

    def _encode_value(self, out: bytearray, f: dict[str, Any], value: Any, v: int, flex: bool) -> None:
        t: str = f["type"]
        nullable = _in(f.get("nullableVersions"), v)
        if t.startswith("[]"):
            if value is None:
                if not nullable:
                    raise ValueError(f"{f['name']} is not nullable in v{v}")
                _uvarint(out, 0) if flex else out.extend(struct.pack(">i", -1))
                return
            _uvarint(out, len(value) + 1) if flex else out.extend(struct.pack(">i", len(value)))
            elem = t[2:]
            for item in value:
                if elem in _PRIMITIVES or elem in ("string", "bytes", "uuid"):
                    self._encode_value(out, {"name": f["name"], "type": elem, "versions": "0+"}, item, v, flex)
                else:
                    self._encode_fields(out, self._sub(f), item, v, flex)
            return
        if t in _PRIMITIVES:
            out += struct.pack(_PRIMITIVES[t], value)
        elif t == "uuid":
            out += (value or uuid.UUID(int=0)).bytes
        elif t in ("string", "bytes"):
            if value is None:
                if not nullable:
                    raise ValueError(f"{f['name']} is not nullable in v{v}")
                if flex:
                    _uvarint(out, 0)
                else:
                    out += struct.pack(">h" if t == "string" else ">i", -1)
                return
            data = value.encode() if t == "string" else bytes(value)
            if flex:
                _uvarint(out, len(data) + 1)
            else:
                out += struct.pack(">h" if t == "string" else ">i", len(data))
            out += data
        else:  # a struct
            if value is None:
                if not nullable:
                    raise ValueError(f"{f['name']} is not nullable in v{v}")
                out.append(0xFF)
                return
            if nullable:
                out.append(1)
            self._encode_fields(out, self._sub(f), value, v, flex)

    # --- decoding ---------------------------------------------------------------------------------------
    def decode(self, version: int, data: bytes) -> dict[str, Any]:
        reader = _Reader(data)
        msg = self._decode_fields(reader, self.fields, version, self.is_flexible(version))
        return msg

    def _decode_fields(self, r: _Reader, fields: list[dict[str, Any]], v: int, flex: bool) -> dict[str, Any]:
        msg: dict[str, Any] = {}
        by_tag: dict[int, dict[str, Any]] = {}
        for f in fields:
            if not _in(f["versions"], v):
                continue
            if "tag" in f and _in(f.get("taggedVersions"), v):
                by_tag[int(f["tag"])] = f
                msg[snake(f["name"])] = _default(f)
                continue
            msg[snake(f["name"])] = self._decode_value(r, f, v, flex)
        if flex:
            for _ in range(r.uvarint()):
                tag, size = r.uvarint(), r.uvarint()
                end = r.pos + size
                if tag in by_tag:
                    msg[snake(by_tag[tag]["name"])] = self._decode_value(r, by_tag[tag], v, flex)
                r.pos = end
        return msg

    def _decode_value(self, r: _Reader, f: dict[str, Any], v: int, flex: bool) -> Any:
        t: str = f["type"]
        if t.startswith("[]"):
            n = r.uvarint() - 1 if flex else r.unpack(">i")
            if n < 0:
                return None
            elem = t[2:]
            if elem in _PRIMITIVES or elem in ("string", "bytes", "uuid"):
                sub = {"name": f["name"], "type": elem, "versions": "0+"}
                return [self._decode_value(r, sub, v, flex) for _ in range(n)]
            return [self._decode_fields(r, self._sub(f), v, flex) for _ in range(n)]
        if t in _PRIMITIVES:
            return r.unpack(_PRIMITIVES[t])
        if t == "uuid":
            return uuid.UUID(bytes=r.take(16))
        if t in ("string", "bytes"):
            n = r.uvarint() - 1 if flex else r.unpack(">h" if t == "string" else ">i")
            if n < 0:
                return None
            raw = r.take(n)
            return raw.decode() if t == "string" else raw
        if _in(f.get("nullableVersions"), v) and r.unpack(">b") < 0:
            return None
        return self._decode_fields(r, self._sub(f), v, flex)


_PRIMITIVES = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "bool": ">?", "float64": ">d",
               "uint16": ">H"}


def _default(f: dict[str, Any]) -> Any:
    t: str = f["type"]
    d = f.get("default")
    if d == "null":
        return None
    if t in ("int8", "int16", "int32", "int64", "uint16"):
        return int(d) if d is not None else 0
    if t == "bool":
        return d in (True, "true")
    if t == "float64":
        return float(d or 0)
    if t == "string":
        return d or ""
    if t == "bytes":
        return b""
    if t == "uuid":
        return uuid.UUID(int=0)
    if t.startswith("[]"):
        return []
    return {}


def _uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("response cut short")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> Any:
        (value,) = struct.unpack(fmt, self.take(struct.calcsize(fmt)))
        return value

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7


@cache
def _jar_schemas(jar: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    with zipfile.ZipFile(jar) as z:
        for name in z.namelist():
            if name.startswith("common/message/") and name.endswith(".json"):
                text = re.sub(r"^\s*//.*$", "", z.read(name).decode(), flags=re.M)
                out[Path(name).stem] = json.loads(text)
    return out


def schema(jar: Path, name: str) -> Schema:
    """`name` is e.g. 'JoinGroupRequest'."""
    return Schema(_jar_schemas(str(jar))[name])


class KafkaConnection:
    """One TCP connection to a broker. `call` sends a request and waits for its response; Kafka answers
    the requests of one connection in order, so a parked JoinGroup blocks its connection (use one per
    member)."""

    def __init__(self, host: str, port: int, jar: Path, client_id: str = "differential",
                 timeout_s: float = 30.0) -> None:
        self._jar = jar
        self._client_id = client_id
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._correlation = 0
        self._lock = threading.Lock()

    def close(self) -> None:
        self._sock.close()

    def call(self, api: str, msg: dict[str, Any] | None = None, version: int | None = None) -> dict[str, Any]:
        key, default_version = API_KEYS[api]
        v = default_version if version is None else version
        req, resp = schema(self._jar, api + "Request"), schema(self._jar, api + "Response")
        with self._lock:
            self._correlation += 1
            cid = self._correlation
            header = struct.pack(">hhi", key, v, cid)
            client = self._client_id.encode()
            header += struct.pack(">h", len(client)) + client
            if req.is_flexible(v):
                header += b"\x00"  # request header v2: no tagged fields
            body = header + req.encode(v, msg or {})
            self._sock.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", self._recv(4))[0]
            data = self._recv(size)
        reader = _Reader(data)
        if reader.unpack(">i") != cid:
            raise ValueError("correlation id mismatch")
        if resp.is_flexible(v) and api != "ApiVersions":  # ApiVersions answers with header v0
            for _ in range(reader.uvarint()):
                reader.uvarint()
                reader.take(reader.uvarint())
        return resp.decode(v, data[reader.pos:])

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)
