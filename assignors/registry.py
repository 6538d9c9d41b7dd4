"""Assignors registered by name, as Kafka's `group.consumer.assignors` refers to them."""

from __future__ import annotations

import threading

from groupcoord.assignors.api import ServerAssignor

_SERVER_ASSIGNORS: dict[str, ServerAssignor] = {}


def register_server_assignor(assignor: ServerAssignor) -> None:
    _SERVER_ASSIGNORS[assignor.name] = assignor


def get_server_assignor(name: str) -> ServerAssignor:
    """The assignor called `name`; KeyError if none is registered under it."""
    _load_builtins()
    return _SERVER_ASSIGNORS[name]


# Assignors that are registered (so an offloaded run finds them by name) but may not serve consumer groups: the
# share groups' `simple` assignor gives a partition to several members.
SHARE_ONLY_ASSIGNORS = frozenset({"simple"})


def server_assignor_names() -> list[str]:
    """The assignors `group.consumer.assignors` may name (share-only ones excluded)."""
    _load_builtins()
    return sorted(set(_SERVER_ASSIGNORS) - SHARE_ONLY_ASSIGNORS)


_loaded = False
_load_lock = threading.Lock()


def _load_builtins() -> None:
    """Import the built-in assignors once; `_loaded` is set only after the import finished, under a lock, so two
    first callers on different threads never see a half-filled registry."""
    global _loaded
    if _loaded:
        return
    with _load_lock:
        if not _loaded:
            from groupcoord.assignors import builtin  # noqa: F401  (registers the built-in assignors on import)

            _loaded = True
