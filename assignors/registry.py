"""Assignors registered by name, as Kafka's `group.consumer.assignors` refers to them."""

from __future__ import annotations

from assignors.api import ServerAssignor

_SERVER_ASSIGNORS: dict[str, ServerAssignor] = {}


def register_server_assignor(assignor: ServerAssignor) -> None:
    _SERVER_ASSIGNORS[assignor.name] = assignor


def get_server_assignor(name: str) -> ServerAssignor:
    """The assignor called `name`; KeyError if none is registered under it."""
    _load_builtins()
    return _SERVER_ASSIGNORS[name]


def server_assignor_names() -> list[str]:
    _load_builtins()
    return sorted(_SERVER_ASSIGNORS)


_loaded = False


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from assignors import builtin  # noqa: F401  (registers the built-in assignors on import)
