"""A handler mutates nothing (issue 26): the shard's whole state, in a comparable form, before and after a call.

`state_of(shard)` walks everything the shard holds (groups of every type with every attribute, offsets,
configs, timer deadlines, empty-since marks), skipping only what is not group state: the shard's services
(config, id factory, lag provider, metadata image, stats), a group's reference back to what holds it (a
streams group's `owner`) and memoised caches (attributes named `*cache*`, which a read may fill). Drivers
compare it across a handler call: any difference is a mutation outside
`GroupCoordinatorShard.apply`. The root may be any object holding groups: the streams tests' driver passes a
`StreamsGroups` used without a shard (its settings, metrics and run ids are services too).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from groupcoord.coordinator.core.shard import GroupCoordinatorShard

_SERVICES = frozenset({"config", "member_id_factory", "lag_provider", "stats", "metadata", "_replayers",
                       "_timer_handlers", "_assignment_handlers", "_run_ids", "applied", "touched",
                       "consumer_configs", "share_configs", "streams",
                       "configs", "run_ids", "_image_of"})  # a StreamsGroups' own (tests/core/streams_context.py)
_BACK_REFERENCES = frozenset({"owner"})
_LEAVES = (str, int, float, bool, bytes, type(None), enum.Enum)


def _attrs(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(obj, name):
                out[name] = getattr(obj, name)
    out.update(getattr(obj, "__dict__", {}))
    return out


def _canon(obj: Any, root: Any, seen: set[int]) -> Any:
    if isinstance(obj, _LEAVES):
        return obj
    if obj is root or callable(obj) and not dataclasses.is_dataclass(obj) and not hasattr(obj, "__dict__"):
        return "<service>"
    if id(obj) in seen:
        return "<cycle>"
    seen = seen | {id(obj)}
    if isinstance(obj, dict):
        return ("dict", sorted((repr(_canon(k, root, seen)), _canon(v, root, seen)) for k, v in obj.items()))
    if isinstance(obj, (set, frozenset)):
        return ("set", sorted(repr(_canon(v, root, seen)) for v in obj))
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [_canon(v, root, seen) for v in obj])
    attrs = _attrs(obj)
    if not attrs:
        return (type(obj).__name__, repr(obj))
    return (type(obj).__name__, sorted((k, _canon(v, root, seen)) for k, v in attrs.items()
                                       if k not in _BACK_REFERENCES
                                       and "cache" not in k and (not callable(v) or dataclasses.is_dataclass(v))))


def state_of(root: Any) -> Any:
    """Everything `root` (the shard, or a StreamsGroups) holds for its groups, comparable with ==."""
    return sorted((k, _canon(v, root, set())) for k, v in vars(root).items() if k not in _SERVICES)


def applied(shard: GroupCoordinatorShard, result: Any) -> Any:
    """`result` once applied to `shard`, as the runtime applies it after the handler (for tests that call a shard
    operation directly)."""
    shard.apply(result)
    return result
