"""Topic subscriptions by regular expression, with RE2 semantics (as Kafka's RE2/J): linear time in the
topic name, whatever the pattern, so no pattern a client sends can hold a thread for long.

Validation runs on the request path (compiling is bounded by `MAX_PROGRAM_BYTES`); matching every topic runs
off it, in the runtime's background executor, through `resolve_topic_regexes` (KIP-848: the coordinator
resolves a group's regexes asynchronously and persists the result as records of the group).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import re2

from coordinator.core.errors import CoordinatorError, Errors

MAX_PROGRAM_BYTES = 8 << 20  # RE2's own budget for one compiled pattern: larger programs fail to compile
_MAX_ERROR_CHARS = 120  # the RE2 error quotes the pattern; never echo unbounded input


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = MAX_PROGRAM_BYTES
    options.never_capture = True
    return options


_OPTIONS = _options()


@functools.lru_cache(maxsize=1024)
def compile_topic_regex(pattern: str) -> Any:
    """The compiled pattern, or CoordinatorError(INVALID_REGULAR_EXPRESSION) naming the problem briefly."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        reason = e.args[0] if e.args else "cannot compile"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        reason = str(reason)
        if len(reason) > _MAX_ERROR_CHARS:
            reason = reason[:_MAX_ERROR_CHARS] + "..."
        raise CoordinatorError(Errors.INVALID_REGULAR_EXPRESSION,
                               f"subscribed_topic_regex is not a valid RE2 regular expression: {reason}") from None


def is_internal_topic(name: str) -> bool:
    return name.startswith("__")


def resolve_topic_regexes(regexes: Iterable[str], topic_names: Iterable[str]) -> Mapping[str, frozenset[str]]:
    """For each regex, the topic names it fully matches; internal topics (`__...`) never match. A pattern that
    no longer compiles (it was validated when subscribed) resolves to nothing."""
    names = [n for n in topic_names if not is_internal_topic(n)]
    out: dict[str, frozenset[str]] = {}
    for regex in regexes:
        try:
            compiled = compile_topic_regex(regex)
        except CoordinatorError:
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
