"""Access control lists in Kafka's model, kept in a TOML file and reloaded when it changes.

Each entry is an `[[acl]]` table with Kafka's field names::

    [[acl]]
    principal = "User:alice"          # or "User:*": every authenticated principal
    operation = "READ"                # READ, DESCRIBE, DELETE, ALTER_CONFIGS, DESCRIBE_CONFIGS, ALL
    resource_type = "GROUP"
    pattern_type = "LITERAL"          # or "PREFIXED"; a LITERAL "*" names every group
    resource_name = "orders"
    permission = "ALLOW"              # or "DENY"

Kafka's rules (AclAuthorizer / StandardAuthorizer): nothing is allowed unless an ALLOW matches; a matching
DENY wins over any ALLOW; ALLOW ALL allows everything and DENY ALL denies everything; ALLOW READ or DELETE
implies ALLOW DESCRIBE and ALLOW ALTER_CONFIGS implies ALLOW DESCRIBE_CONFIGS (a DENY implies nothing).
"""

from __future__ import annotations

import logging
import os
import threading
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("groupcoord.acl")

OPERATIONS = ("READ", "DESCRIBE", "DELETE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS", "ALL")
# operation -> the operations whose ALLOW implies it (Kafka's AclOperation; WRITE and ALTER have no GROUP use)
_IMPLIED_BY = {"DESCRIBE": ("READ", "DELETE"), "DESCRIBE_CONFIGS": ("ALTER_CONFIGS",)}
_FIELDS = ("principal", "operation", "resource_type", "pattern_type", "resource_name", "permission")


class AclError(ValueError):
    """A file or entry that is not a valid ACL list; the message names the entry and the field."""


@dataclass(frozen=True, slots=True)
class Acl:
    principal: str
    operation: str
    resource_type: str
    pattern_type: str
    resource_name: str
    permission: str

    def matches_resource(self, group_id: str) -> bool:
        if self.pattern_type == "PREFIXED":
            return group_id.startswith(self.resource_name)
        return self.resource_name in ("*", group_id)

    def matches_principal(self, principal: str) -> bool:
        return self.principal in (principal, "User:*")

    def __str__(self) -> str:
        return (f"{self.permission} {self.principal} {self.operation} on {self.resource_type} "
                f"{self.pattern_type} {self.resource_name!r}")


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    acl: Acl | None  # the entry that decided (a DENY, or the first matching ALLOW); None: no entry matched


def parse_acls(text: str) -> list[Acl]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise AclError(f"not valid TOML: {e}") from None
    entries = data.get("acl", [])
    if not isinstance(entries, list):
        raise AclError("`acl` must be an array of tables ([[acl]])")
    extra = set(data) - {"acl"}
    if extra:
        raise AclError(f"unknown top-level key(s) {sorted(extra)}; only [[acl]] tables are read")
    return [_parse_entry(i, e) for i, e in enumerate(entries, 1)]


def _parse_entry(index: int, entry: object) -> Acl:
    where = f"[[acl]] #{index}"
    if not isinstance(entry, dict):
        raise AclError(f"{where}: not a table")
    unknown = set(entry) - set(_FIELDS)
    if unknown:
        raise AclError(f"{where}: unknown field(s) {sorted(unknown)}")
    fields = {"resource_type": "GROUP", "pattern_type": "LITERAL", "permission": "ALLOW", **entry}
    for name in _FIELDS:
        if not isinstance(fields.get(name), str) or not fields[name]:
            raise AclError(f"{where}: `{name}` must be a non-empty string")
    acl = Acl(fields["principal"], fields["operation"].upper(), fields["resource_type"].upper(),
              fields["pattern_type"].upper(), fields["resource_name"], fields["permission"].upper())
    if not acl.principal.startswith("User:"):
        raise AclError(f"{where}: principal {acl.principal!r} must look like User:NAME (or User:*)")
    if acl.operation not in OPERATIONS:
        raise AclError(f"{where}: operation {acl.operation!r} is not one of {', '.join(OPERATIONS)}")
    if acl.resource_type != "GROUP":
        raise AclError(f"{where}: resource_type {acl.resource_type!r}: groupcoord only has GROUP resources")
    if acl.pattern_type not in ("LITERAL", "PREFIXED"):
        raise AclError(f"{where}: pattern_type {acl.pattern_type!r} is not LITERAL or PREFIXED")
    if acl.permission not in ("ALLOW", "DENY"):
        raise AclError(f"{where}: permission {acl.permission!r} is not ALLOW or DENY")
    return acl


def load_acls(path: Path) -> list[Acl]:
    try:
        text = path.read_text()
    except OSError as e:
        raise AclError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise AclError(f"{path} is not UTF-8 text") from None
    return parse_acls(text)


class Authorizer:
    """Answers "may `principal` do `operation` on group `group_id`?" against the current ACL list."""

    def __init__(self, acls: Sequence[Acl] = ()) -> None:
        self.acls: tuple[Acl, ...] = tuple(acls)

    def decide(self, principal: str, operation: str, group_id: str, implied: bool = True) -> Decision:
        """`implied=False` counts only ALLOWs naming the operation itself (or ALL), not READ's DESCRIBE."""
        allow: Acl | None = None
        granting = (operation, "ALL") + (_IMPLIED_BY.get(operation, ()) if implied else ())
        for acl in self.acls:
            if not (acl.matches_principal(principal) and acl.matches_resource(group_id)):
                continue
            if acl.permission == "DENY" and acl.operation in (operation, "ALL"):
                return Decision(False, acl)
            if allow is None and acl.permission == "ALLOW" and acl.operation in granting:
                allow = acl
        return Decision(allow is not None, allow)

    def allowed(self, principal: str, operation: str, group_id: str, implied: bool = True) -> bool:
        return self.decide(principal, operation, group_id, implied).allowed


class AclFileWatcher:
    """Keeps `authorizer` in step with an ACL file: polls its mtime and size every `interval_s` and reads it
    once they stayed the same for one interval, so that a file caught half-written by an editor (an empty
    file is a valid list that denies everything) is not applied. A file that does not parse keeps the
    previous ACLs and logs one line (once per change of the file)."""

    def __init__(self, path: Path, authorizer: Authorizer, interval_s: float = 1.0,
                 on_reload: Callable[[int], None] | None = None) -> None:
        self.path, self.authorizer, self.interval_s = path, authorizer, interval_s
        self.on_reload = on_reload
        self._stamp = self._stat()
        self._pending: tuple[int, int] | None = None
        authorizer.acls = tuple(load_acls(path))  # at start a bad file is fatal: raise
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="groupcoord-acl-reload", daemon=True)

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def poll(self) -> None:
        stamp = self._stat()
        if stamp == self._stamp:
            self._pending = None
            return
        if stamp != self._pending:  # changed since the last look: wait for it to stay still one interval
            self._pending = stamp
            return
        self._stamp, self._pending = stamp, None
        try:
            acls = load_acls(self.path)
        except AclError as e:
            log.warning("ACL file %s not reloaded, the previous %d ACLs stay in force: %s", self.path,
                        len(self.authorizer.acls), e)
            return
        self.authorizer.acls = tuple(acls)
        log.info("ACL file %s reloaded: %d ACLs", self.path, len(acls))
        if self.on_reload is not None:
            self.on_reload(len(acls))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll()
