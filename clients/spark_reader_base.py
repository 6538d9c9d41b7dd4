"""What the consumer-group and share-group Spark readers share: a reader whose driver-side state starts late.

Spark pickles a planning copy of a reader to the executors for `read`, so `__init__` only stores options and
the member, its Kafka clients and threads start on the first offset call, in the driver's reader process.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Generic, Protocol, TypeVar

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.types import StructType


class ReaderState(Protocol):
    issued: dict[str, Any] | None  # the last end offset returned to Spark

    def latest_offset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]: ...

    def close(self) -> None: ...


OptionsT = TypeVar("OptionsT")
StateT = TypeVar("StateT", bound=ReaderState)


class LazyStateReader(DataSourceStreamReader, Generic[OptionsT, StateT]):
    """The reader's Spark calls that do not depend on the group type; `_new_state` makes the driver state."""

    def __init__(self, options: OptionsT, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._state: StateT | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "schema": self.schema, "_state": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @abstractmethod
    def _new_state(self) -> StateT:
        """The driver-side state of one query run (joins the group)."""

    def _reader_state(self) -> StateT:
        if self._state is None:
            self._state = self._new_state()
        return self._state

    def _planned_state(self, end: dict[str, Any], refusal: str) -> StateT:
        """The state, after checking Spark asks for the batch this reader planned (not one replayed from a
        checkpoint of an earlier run, whose partitions or locks may be with another driver now)."""
        state = self._reader_state()
        if end and end != state.issued:
            raise RuntimeError(refusal)
        return state

    # Spark's calls, all on the reader process's main thread.
    def initialOffset(self) -> dict[str, Any]:
        self._reader_state()  # join the group now: the first latestOffset may already find work
        return {}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        return self._reader_state().latest_offset(start, limit)

    def commit(self, end: dict[str, Any]) -> None:
        """Not used: Spark calls it one batch late; batches are acknowledged in `latestOffset` instead."""

    def stop(self) -> None:
        if self._state is not None:
            self._state.close()
            self._state = None
