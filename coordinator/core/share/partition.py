"""One share-partition's delivery state (KIP-932's SharePartition), as offset ranges.

Theory of operation
-------------------
Records stay in Kafka; the coordinator hands out *offsets*. Everything below the share-partition start
offset (SPSO) is done (acknowledged or archived). `batches` cover [start_offset, next_offset) exactly, in
order, without gaps: each is a range of offsets with one state, one delivery count and, when ACQUIRED, the
member holding its lock and the lock's deadline. Offsets at or after `next_offset` (the share-partition end
offset) were never delivered: AVAILABLE with delivery count 0, not stored.

- acquire: AVAILABLE ranges inside the window first (redelivery), then new offsets from `next_offset`, up to
  the log end offset, `max_records`, and the in-flight bound (`share.partition.max.record.locks`: the window
  next_offset - start_offset never grows past it). Acquiring bumps the delivery count and locks the range.
- acknowledge by the lock holder: ACCEPT -> ACKNOWLEDGED, RELEASE -> AVAILABLE, REJECT -> ARCHIVED;
  RENEW (KIP-1222) keeps the range ACQUIRED with a new lock deadline, so a slow processor keeps its records.
- a lock that expires (or a member that leaves) makes its ranges AVAILABLE again.
- a range that becomes AVAILABLE with delivery count >= the delivery count limit is ARCHIVED instead.
- the start offset then advances past leading ACKNOWLEDGED/ARCHIVED ranges, which are forgotten.

Memory is proportional to the number of distinct ranges, never to the number of offsets: adjacent ranges
with the same state, count, holder and deadline are merged. Values are immutable; every operation returns a
new `SharePartition`, so a record can carry it whole and replay sets it back.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, replace


class RecordState(enum.IntEnum):
    """Kafka's RecordState ids (persisted)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """Kafka's AcknowledgeType ids (ShareAcknowledge)."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # KIP-1222: extend the acquisition lock by the record lock duration


@dataclass(frozen=True, slots=True)
class Batch:
    first: int
    last: int  # inclusive
    state: RecordState
    delivery_count: int
    member_id: str = ""  # the lock holder while ACQUIRED
    lock_deadline_ms: int = 0

    @property
    def count(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class SharePartition:
    start_offset: int
    next_offset: int
    batches: tuple[Batch, ...] = ()

    @property
    def in_flight(self) -> int:
        return self.next_offset - self.start_offset

    def acquired_count(self) -> int:
        return sum(b.count for b in self.batches if b.state is RecordState.ACQUIRED)

    def available_count(self) -> int:
        return sum(b.count for b in self.batches if b.state is RecordState.AVAILABLE)

    def next_lock_deadline(self) -> int | None:
        deadlines = [b.lock_deadline_ms for b in self.batches if b.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    # --- acquire ----------------------------------------------------------------------------------------
    def acquire(self, member_id: str, max_records: int, log_end_offset: int, deadline_ms: int,
                max_in_flight: int) -> tuple[SharePartition, list[AcquiredRange]]:
        out: list[Batch] = []
        acquired: list[AcquiredRange] = []
        left = max_records
        for b in self.batches:
            if left <= 0 or b.state is not RecordState.AVAILABLE:
                out.append(b)
                continue
            take = min(left, b.count)
            got = replace(b, last=b.first + take - 1, state=RecordState.ACQUIRED,
                          delivery_count=b.delivery_count + 1, member_id=member_id, lock_deadline_ms=deadline_ms)
            out.append(got)
            acquired.append(AcquiredRange(got.first, got.last, got.delivery_count))
            if take < b.count:
                out.append(replace(b, first=b.first + take))
            left -= take
        next_offset = self.next_offset
        limit = min(log_end_offset, self.start_offset + max_in_flight)
        if left > 0 and next_offset < limit:
            last = min(limit, next_offset + left) - 1
            out.append(Batch(next_offset, last, RecordState.ACQUIRED, 1, member_id, deadline_ms))
            acquired.append(AcquiredRange(next_offset, last, 1))
            next_offset = last + 1
        if not acquired:
            return self, []
        return SharePartition(self.start_offset, next_offset, _merge(out)), _merge_ranges(acquired)

    # --- acknowledge ------------------------------------------------------------------------------------
    def holds(self, member_id: str, first: int, last: int) -> bool:
        """True when every offset of [first, last] is ACQUIRED by `member_id`."""
        if first < self.start_offset or last >= self.next_offset or first > last:
            return False
        covered = 0
        for b in self.batches:
            if b.last < first or b.first > last:
                continue
            if b.state is not RecordState.ACQUIRED or b.member_id != member_id:
                return False
            covered += min(b.last, last) - max(b.first, first) + 1
        return covered == last - first + 1

    def acknowledge(self, first: int, last: int, ack: AcknowledgeType, delivery_limit: int,
                    renewed_deadline_ms: int = 0) -> SharePartition:
        """Apply an acknowledgement to [first, last] (checked with `holds` first); RENEW sets the lock deadline
        to `renewed_deadline_ms`."""
        def change(b: Batch) -> Batch:
            if ack is AcknowledgeType.RENEW:
                return replace(b, lock_deadline_ms=renewed_deadline_ms)
            if ack is AcknowledgeType.ACCEPT:
                return _settled(b, RecordState.ACKNOWLEDGED)
            if ack is AcknowledgeType.REJECT:
                return _settled(b, RecordState.ARCHIVED)
            return _released(b, delivery_limit)

        return self._map_range(first, last, change)._advanced()

    # --- lock expiry and release ------------------------------------------------------------------------
    def expire_locks(self, now: int, delivery_limit: int) -> SharePartition:
        return self._map(lambda b: _released(b, delivery_limit)
                         if b.state is RecordState.ACQUIRED and b.lock_deadline_ms <= now else b)

    def release_member(self, member_id: str, delivery_limit: int) -> SharePartition:
        return self._map(lambda b: _released(b, delivery_limit)
                         if b.state is RecordState.ACQUIRED and b.member_id == member_id else b)

    def skip_to(self, log_start_offset: int) -> SharePartition:
        """Records below the log start offset are gone from Kafka (retention): the start offset follows."""
        if log_start_offset <= self.start_offset:
            return self
        kept = tuple(replace(b, first=max(b.first, log_start_offset)) for b in self.batches
                     if b.last >= log_start_offset)
        return SharePartition(log_start_offset, max(self.next_offset, log_start_offset), kept)._advanced()

    # --- helpers ----------------------------------------------------------------------------------------
    def _map(self, fn: object) -> SharePartition:
        new = tuple(fn(b) for b in self.batches)  # type: ignore[operator]
        if new == self.batches:
            return self
        return replace(self, batches=_merge(new))._advanced()

    def _map_range(self, first: int, last: int, fn: object) -> SharePartition:
        out: list[Batch] = []
        for b in self.batches:
            if b.last < first or b.first > last:
                out.append(b)
                continue
            if b.first < first:
                out.append(replace(b, last=first - 1))
            out.append(fn(replace(b, first=max(b.first, first), last=min(b.last, last))))  # type: ignore[operator]
            if b.last > last:
                out.append(replace(b, first=last + 1))
        return replace(self, batches=_merge(out))

    def _advanced(self) -> SharePartition:
        """Move the start offset past the leading ranges that are done."""
        i = 0
        start = self.start_offset
        while i < len(self.batches) and self.batches[i].state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
            start = self.batches[i].last + 1
            i += 1
        if i == 0:
            return self
        return SharePartition(start, self.next_offset, self.batches[i:])


def _settled(b: Batch, state: RecordState) -> Batch:
    return Batch(b.first, b.last, state, b.delivery_count)


def _released(b: Batch, delivery_limit: int) -> Batch:
    state = RecordState.ARCHIVED if b.delivery_count >= delivery_limit else RecordState.AVAILABLE
    return Batch(b.first, b.last, state, b.delivery_count)


def _merge(batches: Iterable[Batch]) -> tuple[Batch, ...]:
    out: list[Batch] = []
    for b in batches:
        if out:
            p = out[-1]
            if (p.last + 1 == b.first and p.state is b.state and p.delivery_count == b.delivery_count
                    and p.member_id == b.member_id and p.lock_deadline_ms == b.lock_deadline_ms):
                out[-1] = replace(p, last=b.last)
                continue
        out.append(b)
    return tuple(out)


def _merge_ranges(ranges: list[AcquiredRange]) -> list[AcquiredRange]:
    out: list[AcquiredRange] = []
    for r in sorted(ranges, key=lambda x: x.first):
        if out and out[-1].last + 1 == r.first and out[-1].delivery_count == r.delivery_count:
            out[-1] = AcquiredRange(out[-1].first, r.last, r.delivery_count)
        else:
            out.append(r)
    return out
