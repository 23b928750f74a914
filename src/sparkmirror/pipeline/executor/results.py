"""What a task reports for each source partition it wrote: defined once, here.

A task reports one :class:`PartitionResult` per source partition and interval, as a row of plain
values (:meth:`PartitionResult.as_row`) in its report to the driver, which reads it back
(:meth:`PartitionResult.from_row`). Both come from the dataclass's fields, so they cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

#: (upstream start, downstream start, count) of one offset-map segment.
SegmentTuple = tuple[int, int, int]


@dataclass(frozen=True)
class PartitionResult:
    """What one task wrote of one source partition."""

    topic: str
    partition: int
    #: Records of the range handed to the sink (written, dead-lettered or refused).
    records: int
    #: Key and value bytes of those records.
    bytes: int
    first_offset: int
    last_offset: int
    first_target_offset: int
    last_target_offset: int
    dead_lettered: int
    max_timestamp_ms: int
    #: Oldest record timestamp of the range (-1: no record).
    min_timestamp_ms: int
    #: Wall clock (ms) when the task handed the partition's first record to the producer, and
    #: when all its records were final (acknowledged; exactly-once: committed).
    read_at_ms: int
    acked_at_ms: int
    #: Sums over the records of (read_at_ms - timestamp) and (acked_at_ms - timestamp): MM2's
    #: record age and replication latency, averaged by the driver's metrics.
    age_sum_ms: int
    latency_sum_ms: int
    #: A terminal refusal (errors.tolerance=none): the driver stops the flow without committing.
    error: str | None
    #: Offset-map segments of what was acknowledged.
    segments: tuple[SegmentTuple, ...]

    def as_row(self) -> dict[str, object]:
        row: dict[str, object] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        row["segments"] = [{"u": u, "d": d, "n": n} for u, d, n in self.segments]
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> PartitionResult:
        """From a report's row (segments as ``{"u", "d", "n"}`` mappings)."""
        values = {f.name: row[f.name] for f in dataclasses.fields(cls)}
        raw = row["segments"] or []
        assert isinstance(raw, list)
        values["segments"] = tuple((int(s["u"]), int(s["d"]), int(s["n"])) for s in raw)
        return cls(**values)  # type: ignore[arg-type]
