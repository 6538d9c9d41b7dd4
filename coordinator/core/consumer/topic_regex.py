"""Topic subscriptions by regular expression, with RE2 semantics (as Kafka's RE2/J): linear time in the
topic name, whatever the pattern, so no pattern a client sends can hold a thread for long.

Validation runs on the request path (compiling is bounded by `MAX_PROGRAM_BYTES`, and results are cached);
matching every topic runs off it, in the runtime's background executor, through `resolve_topic_regexes`
(KIP-848: the coordinator resolves a group's regexes asynchronously and persists the result as records of
the group).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import re2

from groupcoord.coordinator.core.errors import CoordinatorError, Errors

# RE2's budget for one compiled pattern. At RE2's default (8 MB) a pattern like `\pL{500}` takes ~100 ms to be
# rejected; at this size compiling costs a few ms at most, and topic names (<= 249 characters) need far less:
# 2,000 alternatives of topic names still compile.
MAX_PROGRAM_BYTES = 256 << 10
_MAX_ERROR_CHARS = 120  # the RE2 error quotes the pattern; never echo unbounded input
_CACHE_SIZE = 1024


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = MAX_PROGRAM_BYTES
    options.never_capture = True
    return options


_OPTIONS = _options()
_invalid: dict[str, str] = {}  # pattern -> why RE2 rejected it (a client repeating one costs one compile)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compile(pattern: str) -> Any:
    return re2.compile(pattern, _OPTIONS)


def compile_topic_regex(pattern: str) -> Any:
    """The compiled pattern, or CoordinatorError(INVALID_REGULAR_EXPRESSION) naming the problem briefly."""
    reason = _invalid.get(pattern)
    if reason is None:
        try:
            return _compile(pattern)
        except re2.error as e:
            raw = e.args[0] if e.args else "cannot compile"
            reason = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
            if len(reason) > _MAX_ERROR_CHARS:
                reason = reason[:_MAX_ERROR_CHARS] + "..."
            if len(_invalid) >= _CACHE_SIZE:
                del _invalid[next(iter(_invalid))]
            _invalid[pattern] = reason
    raise CoordinatorError(Errors.INVALID_REGULAR_EXPRESSION,
                           f"subscribed_topic_regex is not a valid RE2 regular expression: {reason}")


def is_internal_topic(name: str) -> bool:
    return name.startswith("__")


def resolve_topic_regexes(regexes: Iterable[str], topic_names: Iterable[str]) -> Mapping[str, frozenset[str]]:
    """For each regex, the topic names it fully matches; internal topics (`__...`) never match. A pattern that
    does not compile (it was validated when subscribed) resolves to nothing. Thread-safe."""
    names = [n for n in topic_names if not is_internal_topic(n)]
    out: dict[str, frozenset[str]] = {}
    for regex in regexes:
        try:
            compiled = _compile(regex)  # not compile_topic_regex: this runs on worker threads
        except re2.error:
            out[regex] = frozenset()
            continue
        out[regex] = frozenset(n for n in names if compiled.fullmatch(n) is not None)
    return out


@dataclass(frozen=True, slots=True)
class RegexResolution:
    """A task for the runtime: resolve `regexes` against `topic_names` off the event loop, then hand the result
    back to the shard (`on_regex_resolution_complete`)."""

    group_id: str
    run_id: int
    regexes: tuple[str, ...]
    topic_names: tuple[str, ...]

    def run(self) -> RegexResolutionCompletion:
        return RegexResolutionCompletion(self.group_id, self.run_id,
                                         resolve_topic_regexes(self.regexes, self.topic_names))


@dataclass(frozen=True, slots=True)
class RegexResolutionCompletion:
    group_id: str
    run_id: int
    resolved: Mapping[str, frozenset[str]]
