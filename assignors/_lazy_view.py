"""One member's topic -> partitions mapping kept in a compact form and built on first read.

The uniform builders and the owner-array assignment each keep members as arrays or runs; callers (the core,
records, tests) read them as mappings. The cache and the read-only Mapping protocol are the same for all.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Mapping


class LazyAssignmentView(Mapping[str, frozenset[int]]):
    """Subclasses say how to build the mapping (`_build`) and whether it is empty (`__bool__`, cheaply)."""

    __slots__ = ("_dict",)

    def __init__(self) -> None:
        self._dict: dict[str, frozenset[int]] | None = None

    @abstractmethod
    def _build(self) -> dict[str, frozenset[int]]: ...

    @abstractmethod
    def __bool__(self) -> bool: ...

    def _mapping(self) -> dict[str, frozenset[int]]:
        d = self._dict
        if d is None:
            d = self._dict = self._build()
        return d

    def __getitem__(self, topic: str) -> frozenset[int]:
        return self._mapping()[topic]

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping()) if self else 0

    def __contains__(self, topic: object) -> bool:
        return topic in self._mapping()
