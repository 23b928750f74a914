"""What a task reports for each source partition it wrote: defined once, here.

A task reports one :class:`PartitionResult` per source partition and interval, as a row of plain
values (:meth:`PartitionResult.as_row`) in its report to the driver, which reads it back
(:meth:`PartitionResult.from_row`). Both come from the dataclass's fields, so they cannot drift apart.
A row is a list in the fields' order, not a mapping: at 1,000 partitions a task sends one row per
partition every commit interval, and naming every field in each row made the report's JSON three
times as long and its encoding an eighth of the task's busy Python time (docs/performance.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
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
    #: Sums over the records of (read_at_ms - timestamp) and (when the record was final - timestamp):
    #: MM2's record age and replication latency, averaged by the driver's metrics. At least once a
    #: record is final at its own acknowledgement; exactly once, or dead-lettered, at the interval's end.
    age_sum_ms: int
    latency_sum_ms: int
    #: A terminal refusal (errors.tolerance=none): the driver stops the flow without committing.
    error: str | None
    #: Offset-map segments of what was acknowledged.
    segments: tuple[SegmentTuple, ...]

    def as_row(self) -> list[object]:
        """The fields' values in their order (segments as ``[upstream, downstream, count]`` lists)."""
        return [getattr(self, name) for name in _FIELDS]

    @classmethod
    def from_row(cls, row: Sequence[object]) -> PartitionResult:
        """From a report's row (:meth:`as_row`, through JSON)."""
        if not isinstance(row, list | tuple) or len(row) != len(_FIELDS):
            what = f"{len(row)} values" if isinstance(row, list | tuple) else f"a {type(row).__name__}"
            raise ValueError(f"a result row has {what}, not {len(_FIELDS)} values")
        values = dict(zip(_FIELDS, row, strict=True))
        raw = values["segments"] or []
        assert isinstance(raw, list | tuple)
        values["segments"] = tuple((int(u), int(d), int(n)) for u, d, n in raw)
        return cls(**values)


#: PartitionResult's fields in their order: a row's layout.
_FIELDS = tuple(f.name for f in dataclasses.fields(PartitionResult))
