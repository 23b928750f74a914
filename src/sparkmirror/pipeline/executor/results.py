"""What a task reports for each source partition it wrote: defined once, here.

A task returns one :class:`PartitionResult` per source partition: the direct reader's tasks
return the objects themselves, the Arrow writer returns them as Arrow rows of
:data:`RESULT_SCHEMA` (Spark's ``mapInArrow`` needs a schema). Both forms come from the
dataclass's fields, so they cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

#: (upstream start, downstream start, count) of one offset-map segment.
SegmentTuple = tuple[int, int, int]


def _spark(ddl: str) -> dict[str, str]:
    return {"spark": ddl}


@dataclass(frozen=True)
class PartitionResult:
    """What one task wrote of one source partition."""

    topic: str = field(metadata=_spark("string"))
    partition: int = field(metadata=_spark("int"))
    #: Records of the range handed to the sink (written, dead-lettered or refused).
    records: int = field(metadata=_spark("long"))
    #: Key and value bytes of those records.
    bytes: int = field(metadata=_spark("long"))
    first_offset: int = field(metadata=_spark("long"))
    last_offset: int = field(metadata=_spark("long"))
    first_target_offset: int = field(metadata=_spark("long"))
    last_target_offset: int = field(metadata=_spark("long"))
    dead_lettered: int = field(metadata=_spark("long"))
    max_timestamp_ms: int = field(metadata=_spark("long"))
    #: Oldest record timestamp of the range (-1: no record).
    min_timestamp_ms: int = field(metadata=_spark("long"))
    #: Wall clock (ms) when the task handed the partition's first record to the producer, and
    #: when all its records were final (acknowledged; exactly-once: committed).
    read_at_ms: int = field(metadata=_spark("long"))
    acked_at_ms: int = field(metadata=_spark("long"))
    #: Sums over the records of (read_at_ms - timestamp) and (acked_at_ms - timestamp): MM2's
    #: record age and replication latency, averaged by the driver's metrics.
    age_sum_ms: int = field(metadata=_spark("long"))
    latency_sum_ms: int = field(metadata=_spark("long"))
    #: A terminal refusal (errors.tolerance=none): the driver stops the flow without committing.
    error: str | None = field(metadata=_spark("string"))
    #: Offset-map segments of what was acknowledged.
    segments: tuple[SegmentTuple, ...] = field(metadata=_spark("array<struct<u:bigint,d:bigint,n:bigint>>"))
    #: The Python worker that wrote it (exactly-once producers are per worker).
    writer: str = field(metadata=_spark("string"))

    def as_row(self) -> dict[str, object]:
        row: dict[str, object] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        row["segments"] = [{"u": u, "d": d, "n": n} for u, d, n in self.segments]
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> PartitionResult:
        """From an Arrow/Spark row (segments as ``{"u", "d", "n"}`` mappings)."""
        values = {f.name: row[f.name] for f in dataclasses.fields(cls)}
        raw = row["segments"] or []
        assert isinstance(raw, list)
        values["segments"] = tuple((int(s["u"]), int(s["d"]), int(s["n"])) for s in raw)
        return cls(**values)  # type: ignore[arg-type]


#: The Spark schema of the Arrow writer's result rows.
RESULT_SCHEMA = ", ".join(f"{f.name} {f.metadata['spark']}" for f in dataclasses.fields(PartitionResult))


def arrow_schema() -> pa.Schema:
    """:data:`RESULT_SCHEMA` as an Arrow schema."""
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "int": pa.int32(),
        "long": pa.int64(),
        "array<struct<u:bigint,d:bigint,n:bigint>>": pa.list_(
            pa.struct([("u", pa.int64()), ("d", pa.int64()), ("n", pa.int64())])
        ),
    }
    return pa.schema([(f.name, types[f.metadata["spark"]]) for f in dataclasses.fields(PartitionResult)])


def arrow_batches(results: Iterable[PartitionResult]) -> Iterator[pa.RecordBatch]:
    """The results as the Arrow rows ``mapInArrow`` returns."""
    import pyarrow as pa

    rows = [r.as_row() for r in results]
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema())


def _low(values: Iterable[int], none: int) -> int:
    """The smallest of ``values`` that is not ``none`` (the "no record" value), else ``none``."""
    return min((v for v in values if v != none), default=none)


def merge_rounds(results: Iterable[PartitionResult]) -> list[PartitionResult]:
    """One result per source partition from the results of a batch copied in rounds, in round order.

    A later round's pieces follow the earlier ones in each partition: counts and sums add up, the
    first offsets come from the earliest piece with records, the last from the latest. A segment
    of a later round that extends an earlier one (same upstream start: the round was given the
    earlier round's last segment as its tail) replaces it.
    """
    parts: dict[tuple[str, int], list[PartitionResult]] = {}
    for r in results:
        parts.setdefault((r.topic, r.partition), []).append(r)
    out = []
    for (topic, partition), rs in parts.items():
        if len(rs) == 1:
            out.append(rs[0])
            continue
        segments: dict[int, SegmentTuple] = {}
        for r in rs:
            for seg in r.segments:
                segments.pop(seg[0], None)  # re-inserted last: dicts keep insertion order
                segments[seg[0]] = seg
        out.append(
            PartitionResult(
                topic=topic,
                partition=partition,
                records=sum(r.records for r in rs),
                bytes=sum(r.bytes for r in rs),
                first_offset=_low((r.first_offset for r in rs), -1),
                last_offset=max(r.last_offset for r in rs),
                first_target_offset=_low((r.first_target_offset for r in rs), -1),
                last_target_offset=max(r.last_target_offset for r in rs),
                dead_lettered=sum(r.dead_lettered for r in rs),
                max_timestamp_ms=max(r.max_timestamp_ms for r in rs),
                min_timestamp_ms=_low((r.min_timestamp_ms for r in rs), -1),
                read_at_ms=_low((r.read_at_ms for r in rs), 0),
                acked_at_ms=max(r.acked_at_ms for r in rs),
                age_sum_ms=sum(r.age_sum_ms for r in rs),
                latency_sum_ms=sum(r.latency_sum_ms for r in rs),
                error=next((r.error for r in rs if r.error), None),
                segments=tuple(sorted(segments.values())),
                writer=rs[-1].writer,
            )
        )
    return out
