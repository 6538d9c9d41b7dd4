"""A batch's output is published only after its offsets are committed: the sink stages, the source publishes.

Why here and not in the sink: Spark runs the sink (``foreachBatch``) before the batch's offsets can be
committed, and the commit happens in the source's reader (at the next `latestOffset`, the first moment the
batch is known complete). The reader commits with the member epoch; the coordinator refuses the commit of a
driver that was fenced (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, STALE_MEMBER_EPOCH), whose partitions another
driver may already be re-reading. So the reader is where "publish" or "discard" can be decided:

- the sink writes each batch as Parquet files into ``staging.dir`` (under a name starting with ``.`` first,
  then renamed: a file without a leading dot is complete). Every file holds ``topic`` and ``partition``
  columns; only the batch now being settled has files there (Spark runs a batch's sink before it plans the
  next batch);
- the reader commits the batch's end offsets, then `StagingArea.settle` renames every staged file into
  ``publish.dir`` (same filesystem: one atomic rename per file, then an fsync of the directory) if every
  partition with records was accepted, deletes them if none was, and otherwise publishes only the rows of
  the accepted partitions.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

__all__ = ["StagingArea", "fsync_dir"]

log = logging.getLogger("groupcoord.spark_source")

TopicPartition = tuple[str, int]


def fsync_dir(path: Path) -> None:
    """Make renames into `path` durable (POSIX: a rename is on disk once its directory is fsynced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class StagingArea:
    """``staging`` -> ``publish``; counts what it published and discarded (reported in the status file)."""

    staging: Path
    publish: Path
    published_files: int = 0
    discarded_files: int = 0
    filtered_files: int = 0

    def __post_init__(self) -> None:
        self.staging.mkdir(parents=True, exist_ok=True)
        self.publish.mkdir(parents=True, exist_ok=True)

    def staged(self) -> list[Path]:
        return sorted(p for p in self.staging.iterdir() if p.is_file() and not p.name.startswith("."))

    def settle(self, accepted: Collection[TopicPartition], refused: Collection[TopicPartition]) -> None:
        """Publish the staged output of `accepted` partitions (committed), discard that of `refused` ones."""
        files = self.staged()
        if not files:
            return
        if not refused:
            for f in files:
                os.replace(f, self.publish / f.name)
            fsync_dir(self.publish)
            self.published_files += len(files)
            return
        if not accepted:
            self.discard(files, reason=f"the commit of {len(refused)} partition(s) was refused")
            return
        keep = set(accepted)
        for f in files:
            _write_filtered(f, self.publish / f.name, keep)
            f.unlink()
        fsync_dir(self.publish)
        self.filtered_files += len(files)
        log.warning("published only the rows of %d committed partition(s) of %s; %d refused partition(s) dropped",
                    len(keep), ", ".join(f.name for f in files), len(refused))

    def discard(self, files: list[Path] | None = None, reason: str = "") -> None:
        files = self.staged() if files is None else files
        for f in files:
            with contextlib.suppress(FileNotFoundError):
                f.unlink()
        if files:
            self.discarded_files += len(files)
            log.warning("discarded the staged output %s: %s", ", ".join(f.name for f in files), reason)


def _write_filtered(src: Path, dst: Path, keep: set[TopicPartition]) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(src)
    pairs = zip(table.column("topic").to_pylist(), table.column("partition").to_pylist(), strict=True)
    mask = pa.array([(t, p) in keep for t, p in pairs], pa.bool_())
    tmp = dst.with_name("." + dst.name + ".tmp")
    pq.write_table(pc.filter(table, mask) if len(table) else table, tmp)
    os.replace(tmp, dst)
