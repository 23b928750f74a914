"""The exact offset map: which downstream offset holds each mirrored upstream record, and
translation of consumer positions between the source and the target in both directions.

The writer knows, for every record it writes, its upstream offset u and downstream offset d.
It reports them as **segments**, maximal runs where both advance by one
(:func:`segments_from_offsets`); the map keeps every segment per source partition, so storage
grows with the number of segments (about one per partition per micro-batch), not records.
Translation is O(log n) in the number of segments of the partition (bisect over sorted lists;
a map changed by anything but an append in write order is re-sorted once, lazily).

This module must never import pyspark or a Kafka client, and never guess: where it cannot
translate it says so (``Method.NO_HISTORY``, :class:`NotLoadedError`).

What the writer guarantees (the precondition, W)
    W1. Each downstream offset holds at most one record: segments of a partition have disjoint
        downstream ranges, and a segment written later sits at higher downstream offsets.
    W2. A write run (a task attempt that completed) starts at an upstream offset no higher than
        everything mirrored before it (a replay starts earlier, a normal batch right at the end)
        and writes every record from there on, in order, up to at least the previous end.
        Hence the records with a copy below any downstream offset form a prefix of the
        upstream log (gaps excepted), and the copy written last of a record is followed by
        copies of all records after it.
    Attempts that fail report no segments; their stray copies are harmless duplicates.

Invariants of translation, for a fixed map (what the tests pin down)
    A. No loss: ``translate(g)`` is never past the last copy of any mirrored upstream record
       at offset >= g, so a consumer moved there reads every such record at least once.
    B. Zero re-reads in a segment: if g is the offset of a mirrored record, ``translate(g)``
       is the downstream offset of its copy written last (the segment holding g with the
       largest ``downstream_start``). Nothing before it is needed, nothing after it is lost.
    C. Gaps (compaction, transaction markers, aborted records): if g is not mirrored but
       records below it are, ``translate(g)`` is one past the last copy of the last mirrored
       record below g; under W this is the largest ``downstream_end`` of the segments ending at
       or below g.
    D. Beyond: for g >= the end of what is mirrored, ``translate(g)`` is the largest
       ``downstream_end`` (where the next mirrored record will land) and ``missing`` says how
       many upstream offsets the target does not have yet. It is an upper bound on records:
       some of those offsets may be transaction markers. ``g`` exactly at the end is caught
       up: method EXACT, missing 0.
    E. Below history: for g below the earliest retained segment (pruned, or never mirrored),
       ``translate(g)`` is the smallest retained ``downstream_start`` (method BELOW_HISTORY, said
       in the explanation; the caller warns, once): nothing retained is skipped, but the target
       may lack older records.
    F. No history for the partition: method NO_HISTORY and ``downstream_offset`` None. No
       exception, so that a failover plan can list every partition.
    G. Reverse (failback), from a target position d: the upstream position such that every
       mirrored record without a copy below d is at or after it (no loss), and every record
       before it has one (zero re-reads) - under W: the larger of the upstream offset of the
       record at d and the largest ``upstream_end`` of the segments that end at or below d.
    H. Not loaded, no translation (the KAFKA-13659 rule): :class:`OffsetMap` refuses to
       translate until :meth:`OffsetMap.mark_loaded` says its topic was read to the end, so a
       half-read map never yields an old, too-low position.
    I. Same key, same segment: a segment with the ``upstream_start`` of one already held
       replaces it, as compaction of the offset-map topic would.
"""

from __future__ import annotations

import enum
import logging
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sparkmirror.core.exceptions import NotLoadedError, OffsetMapError
from sparkmirror.core.formats import OffsetSegment

__all__ = [
    "Method",
    "OffsetMap",
    "PartitionMap",
    "Segment",
    "Translation",
    "segments_from_offsets",
]

log = logging.getLogger(__name__)


class Method(enum.Enum):
    """How a translation was obtained."""

    #: The position is a mirrored record (or exactly the end of what is mirrored).
    EXACT = "exact"
    #: The position falls between mirrored records (compaction, markers, aborted records).
    GAP = "gap"
    #: The position is past what is mirrored; ``missing`` offsets are not on the target yet.
    BEYOND = "beyond"
    #: The position is below the earliest retained segment.
    BELOW_HISTORY = "below_history"
    #: Nothing is known about this partition.
    NO_HISTORY = "no_history"


@dataclass(frozen=True)
class Translation:
    """A pair of corresponding positions, one per side, and how it was found.

    :meth:`OffsetMap.translate` fills ``downstream_offset`` from the given upstream one;
    :meth:`OffsetMap.reverse_translate` fills ``upstream_offset`` from the given downstream
    one. The computed side is None only with ``Method.NO_HISTORY``.
    """

    upstream_offset: int | None
    downstream_offset: int | None
    method: Method
    #: Offsets the other side does not have yet (``Method.BEYOND`` only; else 0).
    missing: int
    #: One line for humans: which rule applied and with which segment.
    explanation: str


@dataclass(frozen=True)
class Segment:
    """``count`` records of ``topic[partition]`` at upstream offsets ``upstream_start`` …
    were written at downstream offsets ``downstream_start`` … one for one."""

    topic: str
    partition: int
    upstream_start: int
    downstream_start: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1:
            raise OffsetMapError(f"segment {self.topic}[{self.partition}]: count must be >= 1, got {self.count}")
        if self.upstream_start < 0 or self.downstream_start < 0 or self.partition < 0:
            raise OffsetMapError(
                f"segment {self.topic}[{self.partition}]: negative offset or partition "
                f"(upstream_start={self.upstream_start}, downstream_start={self.downstream_start})"
            )

    @property
    def upstream_end(self) -> int:
        """One past the last upstream offset of the segment."""
        return self.upstream_start + self.count

    @property
    def downstream_end(self) -> int:
        """One past the last downstream offset of the segment."""
        return self.downstream_start + self.count

    def __str__(self) -> str:
        return (
            f"{self.topic}[{self.partition}] u[{self.upstream_start},{self.upstream_end})"
            f"->d[{self.downstream_start},{self.downstream_end})"
        )

    def to_record(self, written_at_ms: int) -> OffsetSegment:
        """The durable record of this segment."""
        return OffsetSegment(
            self.topic, self.partition, self.upstream_start, self.downstream_start, self.count, written_at_ms
        )

    @classmethod
    def from_record(cls, record: OffsetSegment) -> Segment:
        """The segment a durable record describes."""
        return cls(record.topic, record.partition, record.upstream_start, record.downstream_start, record.count)


def segments_from_offsets(
    topic: str, partition: int, upstream: Sequence[int], downstream: Sequence[int]
) -> list[Segment]:
    """Split one task's written records into maximal runs where both offsets advance by one.

    ``upstream[i]`` was written at ``downstream[i]``; the lists are in write order.
    """
    if len(upstream) != len(downstream):
        raise OffsetMapError(
            f"{topic}[{partition}]: {len(upstream)} upstream offsets but {len(downstream)} downstream offsets"
        )
    segments: list[Segment] = []
    if not upstream:
        return segments
    start_u, start_d, count = upstream[0], downstream[0], 1
    for u, d in zip(upstream[1:], downstream[1:], strict=True):
        if u == start_u + count and d == start_d + count:
            count += 1
            continue
        segments.append(Segment(topic, partition, start_u, start_d, count))
        start_u, start_d, count = u, d, 1
    segments.append(Segment(topic, partition, start_u, start_d, count))
    return segments


class PartitionMap:
    """The segments of one source partition and translation over them.

    Two derived, sorted views answer queries by bisect: the *upstream view*, disjoint upstream
    intervals each mapped to the copy written last (segments painted in downstream order, a
    later one over an earlier), and the *downstream view*, segments sorted by
    ``downstream_start`` with a running maximum of ``upstream_end``. Adding a segment written
    after all others (the normal case) updates both in place; any other change (replacement,
    removal, out-of-order load) rebuilds them on the next query.
    """

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self._segments: dict[int, Segment] = {}
        self._dirty = False
        #: The segment with the highest downstream start, kept apart from the views (which an
        #: extension of that segment makes dirty): the writer asks for it every micro-batch.
        #: None means "not known", found again on demand.
        self._last: Segment | None = None
        self._reset_views()

    def _reset_views(self) -> None:
        # Upstream view: pieces [lo, hi) -> downstream lo maps to dlo.
        self._lo: list[int] = []
        self._hi: list[int] = []
        self._dlo: list[int] = []
        # Downstream view.
        self._by_d: list[Segment] = []
        self._d_starts: list[int] = []
        self._u_end_max: list[int] = []
        self._min_u_start = 0
        self._min_d_start = 0
        self._max_u_end = 0
        self._max_d_end = 0

    def __len__(self) -> int:
        return len(self._segments)

    def segments(self) -> list[Segment]:
        """All segments, by upstream start."""
        return [self._segments[k] for k in sorted(self._segments)]

    def last_written(self) -> Segment | None:
        """The segment with the highest downstream start (the one the writer extends); None if empty.

        Constant time while segments are added in write order, as the writer does: a micro-batch
        asks it of every partition, and sorting a long history each time grew with its length."""
        if self._last is None and self._segments:
            self._last = max(self._segments.values(), key=lambda s: (s.downstream_start, -s.upstream_start))
        return self._last

    def add(self, segment: Segment) -> Segment | None:
        """Hold ``segment``; one with the same ``upstream_start`` is replaced (returned)."""
        if (segment.topic, segment.partition) != (self.topic, self.partition):
            raise OffsetMapError(f"segment {segment} does not belong to {self.topic}[{self.partition}]")
        old = self._segments.get(segment.upstream_start)
        if old == segment:
            return None
        self._segments[segment.upstream_start] = segment
        last = self._last
        if last is not None:
            d, u = segment.downstream_start, segment.upstream_start
            if d > last.downstream_start or (d == last.downstream_start and u == last.upstream_start):
                self._last = segment  # written after the last one, or the last one extended
            elif d == last.downstream_start or old is last:
                self._last = None  # a tie, or the last one replaced by an earlier copy: found again on demand
        if (
            old is None
            and not self._dirty
            and (len(self._segments) == 1 or segment.downstream_start >= self._max_d_end)
        ):
            self._append(segment)
        elif (
            old is not None
            and not self._dirty
            and self._by_d
            and self._by_d[-1] is old
            and segment.downstream_start == old.downstream_start
            and segment.count >= old.count
        ):
            self._extend_last(segment)
        else:
            self._dirty = True
        return old

    def discard(self, upstream_start: int) -> Segment | None:
        """Drop the segment starting at ``upstream_start`` (a tombstone was read); returns it."""
        old = self._segments.pop(upstream_start, None)
        if old is not None:
            self._dirty = True
            if old is self._last:
                self._last = None
        return old

    def prune(self, downstream_log_start: int) -> list[Segment]:
        """Drop the segments entirely below ``downstream_log_start`` (the target partition's
        log start offset); returns them so the store can write their tombstones."""
        removed = [s for s in self._segments.values() if s.downstream_end <= downstream_log_start]
        for s in removed:
            del self._segments[s.upstream_start]
        if removed:
            self._dirty = True
            self._last = None
            log.info(
                "%s[%d] pruned %d segments below downstream log start %d",
                self.topic,
                self.partition,
                len(removed),
                downstream_log_start,
            )
        return sorted(removed, key=lambda s: s.upstream_start)

    # -- views ---------------------------------------------------------------------------------

    def _append(self, segment: Segment) -> None:
        """Fold in a segment written after every held one (W1: it has the highest downstream start)."""
        first = len(self._by_d) == 0
        self._paint(segment.upstream_start, segment.upstream_end, segment.downstream_start)
        self._by_d.append(segment)
        self._d_starts.append(segment.downstream_start)
        prev = self._u_end_max[-1] if self._u_end_max else 0
        self._u_end_max.append(max(prev, segment.upstream_end))
        if first:
            self._min_u_start, self._min_d_start = segment.upstream_start, segment.downstream_start
        else:
            self._min_u_start = min(self._min_u_start, segment.upstream_start)
            self._min_d_start = min(self._min_d_start, segment.downstream_start)
        self._max_u_end = max(self._max_u_end, segment.upstream_end)
        self._max_d_end = max(self._max_d_end, segment.downstream_end)

    def _extend_last(self, segment: Segment) -> None:
        """Fold in the last-written segment grown by a batch (the writer's normal case in
        at-least-once): painting it again over its shorter self is what a rebuild would do, at the
        cost of one piece instead of the partition's whole history."""
        self._paint(segment.upstream_start, segment.upstream_end, segment.downstream_start)
        self._by_d[-1] = segment
        prev = self._u_end_max[-2] if len(self._u_end_max) > 1 else 0
        self._u_end_max[-1] = max(prev, segment.upstream_end)
        self._max_u_end = max(self._max_u_end, segment.upstream_end)
        self._max_d_end = max(self._max_d_end, segment.downstream_end)

    def _paint(self, a: int, b: int, d: int) -> None:
        """Map upstream [a, b) to downstream d… over whatever the upstream view said there."""
        lo, hi, dlo = self._lo, self._hi, self._dlo
        i = bisect_right(hi, a)  # first piece ending after a
        j = bisect_left(lo, b)  # first piece starting at or after b
        new_lo, new_hi, new_d = [], [], []
        if i < j and lo[i] < a:
            new_lo.append(lo[i])
            new_hi.append(a)
            new_d.append(dlo[i])
        new_lo.append(a)
        new_hi.append(b)
        new_d.append(d)
        if i < j and hi[j - 1] > b:
            new_lo.append(b)
            new_hi.append(hi[j - 1])
            new_d.append(dlo[j - 1] + (b - lo[j - 1]))
        lo[i:j] = new_lo
        hi[i:j] = new_hi
        dlo[i:j] = new_d

    def _ensure_built(self) -> None:
        if not self._dirty:
            return
        self._reset_views()
        for segment in sorted(self._segments.values(), key=lambda s: (s.downstream_start, s.upstream_start)):
            self._append(segment)
        self._dirty = False

    # -- queries -------------------------------------------------------------------------------

    def upstream_end(self) -> int | None:
        """One past the highest mirrored upstream offset (None without segments): where the
        source's records not on the target yet begin."""
        if not self._segments:
            return None
        self._ensure_built()
        return self._max_u_end

    def translate(self, group_offset: int) -> Translation:
        """Downstream position for upstream position ``group_offset`` (invariants A–F)."""
        g = group_offset
        if g < 0:
            raise OffsetMapError(f"{self.topic}[{self.partition}]: cannot translate negative offset {g}")
        tp = f"{self.topic}[{self.partition}]"
        if not self._segments:
            return Translation(g, None, Method.NO_HISTORY, 0, f"{tp}: no offset-map segments for this partition")
        self._ensure_built()
        lo, hi, dlo = self._lo, self._hi, self._dlo
        i = bisect_right(lo, g) - 1
        if i >= 0 and g < hi[i]:
            d = dlo[i] + (g - lo[i])
            return Translation(
                g,
                d,
                Method.EXACT,
                0,
                f"{tp} upstream {g} is a mirrored record; its last-written copy is at downstream {d}",
            )
        if g >= self._max_u_end:
            d = self._max_d_end
            missing = g - self._max_u_end
            if missing == 0:
                return Translation(
                    g,
                    d,
                    Method.EXACT,
                    0,
                    f"{tp} upstream {g} is the end of what is mirrored (caught up): {d}",
                )
            return Translation(
                g,
                d,
                Method.BEYOND,
                missing,
                f"{tp} upstream {g} is {missing} offsets past the mirrored end {self._max_u_end}; "
                f"translated to the downstream end {d}",
            )
        if i < 0:
            d = self._min_d_start
            explanation = (
                f"{tp} upstream {g} is below the earliest retained segment (upstream {lo[0]}); translated to "
                f"the earliest retained downstream offset {d}: older records may be missing on the target"
            )
            log.debug("%s", explanation)  # said by the caller: once, in its report or warning
            return Translation(g, d, Method.BELOW_HISTORY, 0, explanation)
        d = dlo[i] + (hi[i] - lo[i])
        return Translation(
            g,
            d,
            Method.GAP,
            0,
            f"{tp} upstream {g} is between mirrored records (last below it: {hi[i] - 1}); "
            f"translated to one past its last copy: {d}",
        )

    def reverse_translate(self, downstream_offset: int) -> Translation:
        """Upstream position for downstream position ``downstream_offset`` (invariant G, failback)."""
        d = downstream_offset
        if d < 0:
            raise OffsetMapError(f"{self.topic}[{self.partition}]: cannot translate negative offset {d}")
        tp = f"{self.topic}[{self.partition}]"
        if not self._segments:
            return Translation(None, d, Method.NO_HISTORY, 0, f"{tp}: no offset-map segments for this partition")
        self._ensure_built()
        if d < self._min_d_start:
            u = self._min_u_start
            explanation = (
                f"{tp} downstream {d} is below the earliest retained segment "
                f"(downstream {self._min_d_start}); translated to the earliest retained upstream offset {u}"
            )
            log.debug("%s", explanation)  # said by the caller: once, in its report or warning
            return Translation(u, d, Method.BELOW_HISTORY, 0, explanation)
        j = bisect_right(self._d_starts, d) - 1
        segment = self._by_d[j]
        if d < segment.downstream_end:
            record = segment.upstream_start + (d - segment.downstream_start)
            # Records already read below d (an earlier, longer run) need not be read again.
            u = max(record, self._u_end_max[j - 1]) if j > 0 else record
            return Translation(
                u,
                d,
                Method.EXACT,
                0,
                f"{tp} downstream {d} is a copy of upstream {record}; resume upstream at {u}",
            )
        u = self._u_end_max[j]
        if d >= self._max_d_end:
            missing = d - self._max_d_end
            if missing == 0:
                return Translation(
                    u,
                    d,
                    Method.EXACT,
                    0,
                    f"{tp} downstream {d} is the end of what is mirrored (caught up): {u}",
                )
            return Translation(
                u,
                d,
                Method.BEYOND,
                missing,
                f"{tp} downstream {d} is {missing} offsets past the mirrored end {self._max_d_end} "
                f"(records not written by the mirror, or map not caught up); translated to upstream {u}",
            )
        return Translation(
            u,
            d,
            Method.GAP,
            0,
            f"{tp} downstream {d} is between mirrored records; every record below upstream {u} was read",
        )


class OffsetMap:
    """The segments of many source partitions, and translation with the KAFKA-13659 rule:
    no translation until the backing topic has been read to its end (:meth:`mark_loaded`)."""

    def __init__(self, *, loaded: bool = False) -> None:
        self._partitions: dict[tuple[str, int], PartitionMap] = {}
        self._loaded = loaded

    @property
    def loaded(self) -> bool:
        """True once the offset-map topic was read to its end."""
        return self._loaded

    def mark_loaded(self) -> None:
        """Say that the offset-map topic was read to its end; translation is allowed from now on."""
        self._loaded = True

    def __len__(self) -> int:
        return sum(len(p) for p in self._partitions.values())

    def partitions(self) -> list[tuple[str, int]]:
        """The (topic, partition) pairs that have segments, sorted."""
        return sorted(k for k, p in self._partitions.items() if len(p))

    def partition(self, topic: str, partition: int) -> PartitionMap | None:
        """The map of one partition, if any segment of it is held."""
        return self._partitions.get((topic, partition))

    def add(self, segment: Segment) -> Segment | None:
        """Hold ``segment``; one with the same (topic, partition, upstream_start) is replaced (returned)."""
        key = (segment.topic, segment.partition)
        pmap = self._partitions.get(key)
        if pmap is None:
            pmap = self._partitions[key] = PartitionMap(*key)
        return pmap.add(segment)

    def add_all(self, segments: Iterable[Segment]) -> None:
        """Hold every segment, in the order given (later ones replace earlier ones with the same key)."""
        for segment in segments:
            self.add(segment)

    def discard(self, topic: str, partition: int, upstream_start: int) -> Segment | None:
        """Drop one segment (a tombstone for its key was read); returns it if it was held."""
        pmap = self._partitions.get((topic, partition))
        return pmap.discard(upstream_start) if pmap is not None else None

    def prune(self, topic: str, partition: int, downstream_log_start: int) -> list[Segment]:
        """Drop the segments of ``topic[partition]`` entirely below the target's log start offset;
        returns the removed ones (by upstream start) so the store can write tombstones."""
        pmap = self._partitions.get((topic, partition))
        return pmap.prune(downstream_log_start) if pmap is not None else []

    def _require_loaded(self, topic: str, partition: int, what: str) -> None:
        if not self._loaded:
            raise NotLoadedError(
                f"{what} of {topic}[{partition}] refused: the offset map has not been read to its end yet "
                "(KAFKA-13659: a partly loaded map would translate to stale, too-low offsets)"
            )

    def upstream_end(self, topic: str, partition: int) -> int | None:
        """One past the highest mirrored upstream offset of ``topic[partition]`` (None without
        segments). Raises :class:`NotLoadedError` before :meth:`mark_loaded`."""
        self._require_loaded(topic, partition, "the mirrored end")
        pmap = self._partitions.get((topic, partition))
        return pmap.upstream_end() if pmap is not None else None

    def translate(self, topic: str, partition: int, group_offset: int) -> Translation:
        """Downstream position on the target for upstream position ``group_offset`` of the
        source ``topic[partition]``. Raises :class:`NotLoadedError` before :meth:`mark_loaded`."""
        self._require_loaded(topic, partition, "translation")
        pmap = self._partitions.get((topic, partition))
        if pmap is None:
            return PartitionMap(topic, partition).translate(group_offset)
        return pmap.translate(group_offset)

    def reverse_translate(self, topic: str, partition: int, downstream_offset: int) -> Translation:
        """Upstream position on the source ``topic[partition]`` for a position in its remote copy
        on the target (failback). Raises :class:`NotLoadedError` before :meth:`mark_loaded`."""
        self._require_loaded(topic, partition, "reverse translation")
        pmap = self._partitions.get((topic, partition))
        if pmap is None:
            return PartitionMap(topic, partition).reverse_translate(downstream_offset)
        return pmap.reverse_translate(downstream_offset)
