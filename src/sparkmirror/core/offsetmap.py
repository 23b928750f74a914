"""The exact offset map: which downstream offset holds each mirrored upstream record, and
translation of consumer positions between the source and the target in both directions.

The writer knows, for every record it writes, its upstream offset u and downstream offset d.
It reports them as **segments**, maximal runs where both advance by one
(:func:`segments_from_offsets`); the map keeps every segment per source partition, so storage
grows with the number of segments (about one per partition per commit interval), not records.
Translation is O(log n) in the number of segments of the partition (bisect over sorted lists;
a map changed by anything but an append in write order is re-sorted once, lazily).

Exactly-once writes one segment per partition per transaction that cannot extend the one before
(the transaction's commit marker takes a downstream offset), a day of them at 1,000 partitions
and a transaction a second is 86 million. Such runs are folded into **chains** (:class:`Chain`):
consecutive batches of a partition (a batch: one such segment), each starting upstream where the
one before ended and downstream ``gap`` past its end, held as one array of cumulative upstream ends
(4 or 8 bytes a batch instead of a ``Segment``). A chain translates exactly as its batches would one
by one: it is one element of the views below, resolved by a bisect inside it, and the rebuild falls
back to its batches where anything else was written in the middle of its downstream span (never
under W; see :meth:`PartitionMap.fold`).

This module must never import pyspark or a Kafka client, and never guess: where it cannot
translate it says so (``Method.NO_HISTORY``, :class:`NotLoadedError`).

What the writer guarantees (the precondition, W)
    W1. Each downstream offset holds at most one record: segments of a partition have disjoint
        downstream ranges, and a segment written later sits at higher downstream offsets.
    W2. A write run (a task attempt that completed) starts at an upstream offset no higher than
        everything mirrored before it (a replay starts earlier, a normal interval right at the end)
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
       replaces it, as compaction of the offset-map topic would. A batch folded into a chain is
       replaced the same way: a different segment with its upstream start breaks the chain into
       its batches (in memory; the fold leaves such a partition's older history alone), and one
       equal to the batch (a fold's tombstones not written before a crash) changes nothing.
    Chains: a map whose segments are folded into chains translates and reverse-translates every
    offset as the same map unfolded (tests/unit/core/test_offsetmap_chains.py).
"""

from __future__ import annotations

import enum
import logging
import operator
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice

from sparkmirror.core.exceptions import NotLoadedError, OffsetMapError
from sparkmirror.core.formats import CHAIN_KEY_VERSION, OffsetChain, OffsetSegment

__all__ = [
    "CHAIN_MAX_BATCHES",
    "Chain",
    "Fold",
    "Method",
    "OffsetMap",
    "PartitionMap",
    "Segment",
    "Translation",
    "segments_from_offsets",
]

log = logging.getLogger(__name__)

#: Batches a chain holds at most before a new one starts. The open chain of a partition is
#: rewritten (same key) each time batches are folded into it, so this bounds what one fold
#: writes per partition (4 KiB of ends at 4 bytes a batch) and the record's size; a day at one
#: batch a second is 85 chains a partition.
CHAIN_MAX_BATCHES = 1024


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


def extend_tail(segments: list[tuple[int, int, int]], tail: tuple[int, int, int] | None) -> list[tuple[int, int, int]]:
    """One task's ``(upstream start, downstream start, count)`` segments of a partition, in order,
    with the first joined to ``tail`` (the partition's last segment before this interval)
    when it continues it on both sides."""
    if segments and tail is not None:
        u0, d0, n0 = tail
        u, d, n = segments[0]
        if u0 + n0 == u and d0 + n0 == d:
            return [(u0, d0, n0 + n), *segments[1:]]
    return segments


class Chain:
    """Consecutive batches of ``topic[partition]``: batch i holds the upstream records
    ``[upstream_start + ends[i-1], upstream_start + ends[i])`` (``ends[-1]`` read as 0), written
    one for one from downstream ``downstream_start + ends[i-1] + i * gap``. Each batch starts
    upstream where the one before ended and downstream ``gap`` past its end (exactly-once: the
    commit marker, gap 1). ``key`` is the upstream start the chain was first written with, its
    record's key; pruning drops leading batches and keeps the key.

    ``ends`` is an ``array`` and is not copied: a loaded chain is the record's bytes. That it
    rises is checked once, lazily (:meth:`check`), when the chain is first looked inside.
    """

    __slots__ = (
        "topic",
        "partition",
        "key",
        "upstream_start",
        "downstream_start",
        "gap",
        "ends",
        "upstream_end",
        "downstream_end",
        "_checked",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        key: int,
        upstream_start: int,
        downstream_start: int,
        gap: int,
        ends: array,
    ) -> None:
        if len(ends) < 1 or ends[0] < 1:
            raise OffsetMapError(f"chain {topic}[{partition}] at {key}: needs a first batch of at least one record")
        if gap < 0 or upstream_start < key or downstream_start < 0 or partition < 0 or key < 0:
            raise OffsetMapError(
                f"chain {topic}[{partition}] at {key}: negative gap, offset or partition, or an upstream start "
                f"below its key (upstream_start={upstream_start}, downstream_start={downstream_start}, gap={gap})"
            )
        self.topic = topic
        self.partition = partition
        self.key = key
        self.upstream_start = upstream_start
        self.downstream_start = downstream_start
        self.gap = gap
        self.ends = ends
        #: One past the last upstream offset of the chain.
        self.upstream_end: int = upstream_start + ends[-1]
        #: One past the downstream copy of the chain's last record.
        self.downstream_end: int = downstream_start + ends[-1] + (len(ends) - 1) * gap
        self._checked = False

    def __len__(self) -> int:
        return len(self.ends)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Chain):
            return NotImplemented
        return (
            (self.topic, self.partition, self.key, self.upstream_start, self.downstream_start)
            == (other.topic, other.partition, other.key, other.upstream_start, other.downstream_start)
            and (self.gap == other.gap or len(self.ends) == 1)
            and list(self.ends) == list(other.ends)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Chain({self.topic}[{self.partition}] key={self.key} u[{self.upstream_start},{self.upstream_end})"
            f"->d[{self.downstream_start},{self.downstream_end}) batches={len(self.ends)} gap={self.gap})"
        )

    def check(self) -> None:
        """Raise :class:`OffsetMapError` naming the chain and the batch unless every batch holds a record."""
        if self._checked:
            return
        ends = self.ends
        if not all(map(operator.lt, ends, islice(ends, 1, None))):
            i = next(i for i in range(1, len(ends)) if ends[i] <= ends[i - 1])
            raise OffsetMapError(
                f"chain {self.topic}[{self.partition}] at upstream {self.key} is damaged: batch {i} ends at "
                f"{ends[i]}, not after batch {i - 1} ({ends[i - 1]}); the record cannot be translated from"
            )
        self._checked = True

    def batch(self, i: int) -> tuple[int, int, int]:
        """``(upstream start, downstream start, count)`` of batch ``i``."""
        e0 = self.ends[i - 1] if i else 0
        return self.upstream_start + e0, self.downstream_start + e0 + i * self.gap, self.ends[i] - e0

    def upstream_index(self, g: int) -> int:
        """The batch holding upstream offset ``g`` (``upstream_start <= g < upstream_end``)."""
        self.check()
        return bisect_right(self.ends, g - self.upstream_start)

    def downstream_index(self, d: int) -> int:
        """The last batch starting at or below downstream offset ``d`` (``d >= downstream_start``)."""
        self.check()
        ends, gap = self.ends, self.gap
        return (
            bisect_right(range(len(ends)), d - self.downstream_start, key=lambda i: (ends[i - 1] if i else 0) + i * gap)
            - 1
        )

    def downstream_of(self, g: int) -> int:
        """The downstream offset of upstream record ``g`` (in the chain)."""
        u, d, _n = self.batch(self.upstream_index(g))
        return d + (g - u)

    def covers(self, segment: Segment) -> bool:
        """True if ``segment`` is one of the chain's batches, exactly."""
        if not self.upstream_start <= segment.upstream_start < self.upstream_end:
            return False
        i = self.upstream_index(segment.upstream_start)
        return self.batch(i) == (segment.upstream_start, segment.downstream_start, segment.count)

    def segments(self) -> list[Segment]:
        """The chain's batches as segments, in order."""
        self.check()
        return [Segment(self.topic, self.partition, *self.batch(i)) for i in range(len(self.ends))]

    def trimmed(self, first: int) -> Chain:
        """The chain without its batches before ``first`` (same key)."""
        e0 = self.ends[first - 1] if first else 0
        u, d, _n = self.batch(first)
        return Chain(
            self.topic,
            self.partition,
            self.key,
            u,
            d,
            self.gap,
            array(self.ends.typecode, (e - e0 for e in self.ends[first:])),
        )

    def extended(self, segments: Sequence[Segment]) -> Chain:
        """The chain followed by ``segments`` (each must continue it with the chain's gap)."""
        ends = array("q", self.ends)
        gap = self.gap
        u_end, d_end = self.upstream_end, self.downstream_end
        for seg in segments:
            if len(ends) == 1 and len(segments) and seg is segments[0]:
                gap = seg.downstream_start - d_end
            if seg.upstream_start != u_end or seg.downstream_start - d_end != gap or gap < 0:
                raise OffsetMapError(f"{seg} does not continue {self!r}")
            ends.append(ends[-1] + seg.count)
            u_end, d_end = seg.upstream_end, seg.downstream_end
        return Chain(
            self.topic, self.partition, self.key, self.upstream_start, self.downstream_start, gap, _compact(ends)
        )

    @classmethod
    def from_segments(cls, segments: Sequence[Segment]) -> Chain:
        """The chain of ``segments`` (in write order; each continuing the one before with one gap)."""
        first = segments[0]
        head = cls(
            first.topic,
            first.partition,
            first.upstream_start,
            first.upstream_start,
            first.downstream_start,
            0,
            array("q", [first.count]),
        )
        return head.extended(segments[1:]) if len(segments) > 1 else head

    def to_record(self, written_at_ms: int) -> OffsetChain:
        """The durable record of this chain."""
        return OffsetChain(
            self.topic,
            self.partition,
            self.key,
            self.upstream_start,
            self.downstream_start,
            self.gap,
            self.ends,
            written_at_ms,
        )

    @classmethod
    def from_record(cls, record: OffsetChain) -> Chain:
        """The chain a durable record describes (sharing its ends)."""
        return cls(
            record.topic,
            record.partition,
            record.chain_start,
            record.upstream_start,
            record.downstream_start,
            record.gap,
            record.ends,
        )


def _compact(ends: array) -> array:
    """4-byte ends where they fit: half the memory of a day's map."""
    return array("i", ends) if ends[-1] < 2**31 else ends


def _write_order(element: Segment | Chain) -> tuple[int, int, int]:
    """Sort key of segments and chains in write order; a chain before a segment that starts with it
    (that is its first batch, left by a crash before its tombstone)."""
    return element.downstream_start, element.upstream_start, isinstance(element, Segment)


def _overlap(a: Chain | None, b: Chain | None) -> int:
    """1 if the downstream spans of chains ``a`` and ``b`` share an offset, else 0."""
    if a is None or b is None:
        return 0
    return int(a.downstream_start < b.downstream_end and b.downstream_start < a.downstream_end)


@dataclass(frozen=True)
class Fold:
    """What folding one run of a partition writes: ``chain`` (new, or an open chain grown; None if
    only tombstones are due) and the segments it replaces, whose records are to be tombstoned
    after the chain's is durable. A crash in between leaves both; they translate identically."""

    chain: Chain | None
    replaced: tuple[Segment, ...]


class PartitionMap:
    """The segments and chains of one source partition and translation over them.

    Two derived, sorted views answer queries by bisect: the *upstream view*, disjoint upstream
    intervals each mapped to the copy written last (segments and chains painted in downstream
    order, a later one over an earlier; a piece of a chain is resolved inside the chain), and the
    *downstream view*, segments and chains sorted by ``downstream_start`` with a running maximum
    of ``upstream_end``. Adding a segment written after all others (the normal case) updates both
    in place; any other change (replacement, removal, a fold, out-of-order load) rebuilds them on
    the next query.
    """

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self._segments: dict[int, Segment] = {}
        self._chains: dict[int, Chain] = {}
        #: The chains in downstream order, as ``(downstream_end, key)``: the fold and
        #: :meth:`last_written` find the chains they need by bisect instead of a pass over a
        #: history that grows by ~85 chains a day. Kept with ``_chains`` by :meth:`_hold_chain`
        #: and :meth:`_drop_chain`, the only places that change either.
        self._chain_index: list[tuple[int, int]] = []
        #: Pairs of chains next to each other in that order whose downstream spans overlap. Never
        #: any under W1 (a chain's span holds its batches and the gaps between them, and nothing
        #: else is written there); while there are, chains are not in write order by their ends and
        #: the queries that use the index look at every chain instead.
        self._chain_overlaps = 0
        #: Batches held in chains (``len`` counts them as segments).
        self._chained = 0
        #: Segments broken out of a chain whose batch was replaced (invariant I): upstream start ->
        #: the chain's key. Only that chain's record holds them on the target; the fold leaves them be.
        self._pinned: dict[int, int] = {}
        #: Those chains as the topic holds them (key -> chain): pruning trims or deletes them there.
        self._broken: dict[int, Chain] = {}
        #: At least the highest upstream end of any chain held (never lowered): a segment starting
        #: there or above cannot replace a chained batch, so adding it need not look at the chains.
        self._chains_u_end = 0
        self._dirty = False
        #: The segment with the highest downstream start, kept apart from the views (which an
        #: extension of that segment makes dirty): the driver asks for it at every job's start and
        #: topic refresh.
        #: None means "not known", found again on demand.
        self._last: Segment | None = None
        self._reset_views()

    def _reset_views(self) -> None:
        # Upstream view: pieces [lo, hi) -> downstream lo maps to dlo (ref None), or to what the
        # chain ref says for each offset.
        self._lo: list[int] = []
        self._hi: list[int] = []
        self._dlo: list[int] = []
        self._ref: list[Chain | None] = []
        # Downstream view.
        self._by_d: list[Segment | Chain] = []
        self._d_starts: list[int] = []
        self._u_end_max: list[int] = []
        self._min_u_start = 0
        self._min_d_start = 0
        self._max_u_end = 0
        self._max_d_end = 0

    def __len__(self) -> int:
        return len(self._segments) + self._chained

    def segments(self) -> list[Segment]:
        """All segments, chains' batches included, by upstream start (a segment equal to a
        chain's batch once)."""
        by_start = {b.upstream_start: b for c in self._chains.values() for b in c.segments()}
        by_start.update(self._segments)
        return [by_start[k] for k in sorted(by_start)]

    def chains(self) -> list[Chain]:
        """The chains, by key."""
        return [self._chains[k] for k in sorted(self._chains)]

    def chain(self, key: int) -> Chain | None:
        """The chain with ``key``, if held."""
        return self._chains.get(key)

    def holds_record(self, chain: Chain) -> bool:
        """True if ``chain`` is what the topic is to hold under its key (held, or broken into its
        batches in memory); False if its key is to be tombstoned."""
        return self._chains.get(chain.key) is chain or self._broken.get(chain.key) is chain

    def last_written(self) -> Segment | None:
        """The segment with the highest downstream start (the one the writer extends); None if empty.
        A chain's last batch counts as a segment (the fold never folds the last one written).

        Constant time while segments are added in write order, as the writer does: a job's start
        and each topic refresh ask it of every partition, and sorting a long history each time grew
        with its length."""
        if self._last is None and (self._segments or self._chains):
            candidates = list(self._segments.values())
            if self._chains:
                if self._chain_overlaps:
                    # Never under W1. The last batch of each chain starts downstream where it ends
                    # minus its count.
                    c = max(
                        self._chains.values(),
                        key=lambda c: (c.downstream_end - c.ends[-1] + (c.ends[-2] if len(c.ends) > 1 else 0), -c.key),
                    )
                else:
                    # Disjoint spans: the chain ending last holds the last batch written of any chain.
                    c = self._chains[self._chain_index[-1][1]]
                candidates.append(Segment(c.topic, c.partition, *c.batch(len(c) - 1)))
            self._last = max(candidates, key=lambda s: (s.downstream_start, -s.upstream_start))
        return self._last

    def add(self, segment: Segment) -> Segment | None:
        """Hold ``segment``; one with the same ``upstream_start`` is replaced (returned)."""
        if (segment.topic, segment.partition) != (self.topic, self.partition):
            raise OffsetMapError(f"segment {segment} does not belong to {self.topic}[{self.partition}]")
        old = self._segments.get(segment.upstream_start)
        if old == segment:
            return None
        if self._chains and segment.upstream_start < self._chains_u_end:
            self._break_chain_at(segment)
            old = self._segments.get(segment.upstream_start)
        self._segments[segment.upstream_start] = segment
        self._pinned.pop(segment.upstream_start, None)
        last = self._last
        if last is not None:
            d, u = segment.downstream_start, segment.upstream_start
            if d > last.downstream_start or (d == last.downstream_start and u == last.upstream_start):
                self._last = segment  # written after the last one, or the last one extended
            elif d == last.downstream_start or old is last or old == last:
                self._last = None  # a tie, or the last one replaced by an earlier copy: found again on demand
        if old is None and not self._dirty and (len(self) == 1 or segment.downstream_start >= self._max_d_end):
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

    def _break_chain_at(self, segment: Segment) -> None:
        """A segment with the upstream start of a chain's batch other than that batch replaces it
        (invariant I): the chain is broken into its batches first (in memory only)."""
        for chain in self._chains.values():
            if chain.upstream_start <= segment.upstream_start < chain.upstream_end:
                i = chain.upstream_index(segment.upstream_start)
                u, _d, _n = chain.batch(i)
                if u != segment.upstream_start or chain.covers(segment):
                    return
                self._drop_chain(chain)
                self._broken[chain.key] = chain
                for batch in chain.segments():
                    held = self._segments.get(batch.upstream_start)
                    if held is None or held == batch:
                        self._segments[batch.upstream_start] = batch
                        self._pinned[batch.upstream_start] = chain.key
                    elif (held.downstream_start, held.count) < (batch.downstream_start, batch.count):
                        self._segments[batch.upstream_start] = batch  # written before the batch
                        self._pinned[batch.upstream_start] = chain.key
                self._dirty = True
                self._last = None
                log.info(
                    "%s[%d] upstream %d written again at downstream %d: chain at %d held as its %d batches",
                    self.topic,
                    self.partition,
                    segment.upstream_start,
                    segment.downstream_start,
                    chain.key,
                    len(chain),
                )
                return

    def add_chain(self, chain: Chain) -> Chain | None:
        """Hold ``chain``; one with the same key is replaced (returned). Segments equal to its
        batches are kept until :meth:`fold` lets them go (their records need tombstones).

        A segment with the upstream start of one of its batches but another copy is settled by
        write order, which W1 makes downstream order whatever order the records are read in (a
        compacted topic keeps a rewritten chain after the segments that followed it): the copy
        written later (higher downstream start; at the same one, the longer) replaces the other,
        as invariant I says."""
        if (chain.topic, chain.partition) != (self.topic, self.partition):
            raise OffsetMapError(f"{chain!r} does not belong to {self.topic}[{self.partition}]")
        broken = self._broken.pop(chain.key, None)
        if broken is not None:
            # A new version of a chain held as its batches: it restates them.
            for u, key in list(self._pinned.items()):
                if key == chain.key:
                    del self._pinned[u]
                    self._segments.pop(u, None)
            self._dirty = True
        old = self._hold_chain(chain)
        self._last = None
        later = self._reconcile(chain)
        if later is not None:
            self._break_chain_at(later)
        elif old is None and not self._dirty and (len(self) == len(chain) or chain.downstream_start >= self._max_d_end):
            self._append(chain)
        else:
            self._dirty = True
        return old

    def _hold_chain(self, chain: Chain) -> Chain | None:
        """Hold ``chain`` in place of the one with its key (returned, if any): in ``_chains``, its
        batch count and the downstream index."""
        old = self._chains.get(chain.key)
        if old is not None:
            self._drop_chain(old)
        self._chains[chain.key] = chain
        self._chained += len(chain)
        self._chains_u_end = max(self._chains_u_end, chain.upstream_end)
        index, chains = self._chain_index, self._chains
        i = bisect_left(index, (chain.downstream_end, chain.key))
        before = chains[index[i - 1][1]] if i else None
        after = chains[index[i][1]] if i < len(index) else None
        self._chain_overlaps += _overlap(before, chain) + _overlap(chain, after) - _overlap(before, after)
        index.insert(i, (chain.downstream_end, chain.key))
        return old

    def _drop_chain(self, chain: Chain) -> None:
        """Let go of ``chain`` (held under its key): the reverse of :meth:`_hold_chain`."""
        del self._chains[chain.key]
        self._chained -= len(chain)
        index, chains = self._chain_index, self._chains
        i = bisect_left(index, (chain.downstream_end, chain.key))
        del index[i]
        before = chains[index[i - 1][1]] if i else None
        after = chains[index[i][1]] if i < len(index) else None
        self._chain_overlaps -= _overlap(before, chain) + _overlap(chain, after) - _overlap(before, after)

    def _chains_from(self, d: int) -> list[Chain]:
        """The chains ending at or after downstream ``d``, and the last written of those ending
        before it (the open chain a run of segments from ``d`` continues)."""
        if self._chain_overlaps:
            # Never under W1: the ends are not in write order, look at every chain.
            near = [c for c in self._chains.values() if c.downstream_end >= d]
            before = [c for c in self._chains.values() if c.downstream_end < d]
            if before:
                near.append(max(before, key=_write_order))
            return near
        # Disjoint spans: the order of the ends is write order, and the last chain ending before
        # d is the last written of those.
        index, chains = self._chain_index, self._chains
        i = bisect_left(index, (d, -1))
        return [chains[key] for _end, key in index[max(i - 1, 0) :]]

    def _reconcile(self, chain: Chain) -> Segment | None:
        """Drop held segments that a batch of ``chain`` replaced (written before it, same upstream
        start); returns one written after a batch with its upstream start, if any (it replaces the batch)."""
        later = None
        for seg in [
            s for s in self._segments.values() if chain.upstream_start <= s.upstream_start < chain.upstream_end
        ]:
            u, d, n = chain.batch(chain.upstream_index(seg.upstream_start))
            if u != seg.upstream_start or (d, n) == (seg.downstream_start, seg.count):
                continue
            if (seg.downstream_start, seg.count) > (d, n):
                later = seg
            else:
                del self._segments[u]
                self._pinned.pop(u, None)
                self._dirty = True
        return later

    def discard(self, upstream_start: int) -> Segment | None:
        """Drop the segment starting at ``upstream_start`` (a tombstone was read); returns it."""
        old = self._segments.pop(upstream_start, None)
        self._pinned.pop(upstream_start, None)
        if old is not None:
            self._dirty = True
            if old is self._last:
                self._last = None
        return old

    def discard_chain(self, key: int) -> Chain | None:
        """Drop the chain with ``key`` (a tombstone was read); returns it."""
        old = self._chains.get(key)
        if old is not None:
            self._drop_chain(old)
            self._dirty = True
            self._last = None
        return old

    def prune(self, downstream_log_start: int) -> list[Segment | Chain]:
        """Drop the segments entirely below ``downstream_log_start`` (the target partition's
        log start offset), and the batches of chains entirely below it; returns what changed so the
        store can write it: removed segments and chains (tombstones), and chains that lost leading
        batches (the new chain, same key: its record is rewritten)."""
        removed = [s for s in self._segments.values() if s.downstream_end <= downstream_log_start]
        for s in removed:
            del self._segments[s.upstream_start]
            self._pinned.pop(s.upstream_start, None)
        changed: list[Segment | Chain] = list(removed)
        dropped_batches = 0
        for chain in [c for c in self._chains.values() if c.downstream_start < downstream_log_start]:
            rest = self._trim(chain, downstream_log_start)
            if rest is chain:
                continue
            dropped_batches += len(chain) - (len(rest) if rest is not None else 0)
            if rest is None:
                self._drop_chain(chain)
                changed.append(chain)
            else:
                self._hold_chain(rest)
                changed.append(rest)
        for chain in [c for c in self._broken.values() if c.downstream_start < downstream_log_start]:
            # Held as segments (pruned above); its record on the topic is trimmed the same way.
            rest = self._trim(chain, downstream_log_start)
            if rest is chain:
                continue
            if rest is None:
                del self._broken[chain.key]
                changed.append(chain)
            else:
                self._broken[chain.key] = rest
                changed.append(rest)
        if changed:
            self._dirty = True
            self._last = None
            log.info(
                "%s[%d] pruned %d segments and %d chained batches below downstream log start %d",
                self.topic,
                self.partition,
                len(removed),
                dropped_batches,
                downstream_log_start,
            )
        return sorted(changed, key=lambda s: s.upstream_start)

    @staticmethod
    def _trim(chain: Chain, downstream_log_start: int) -> Chain | None:
        """``chain`` without its batches entirely below the log start (itself if none is; None if all are)."""
        chain.check()
        ends, gap = chain.ends, chain.gap
        # Batch i ends downstream at downstream_start + ends[i] + i * gap: rising with i.
        k = bisect_right(
            range(len(ends)), downstream_log_start - chain.downstream_start, key=lambda i: ends[i] + i * gap
        )
        if k == 0:
            return chain
        return None if k == len(ends) else chain.trimmed(k)

    # -- folding ---------------------------------------------------------------------------------

    def fold(self, max_batches: int = CHAIN_MAX_BATCHES, *, apply: bool = True) -> list[Fold]:
        """Fold runs of segments into chains; returns what to write (chains first, then the
        replaced segments' tombstones), applied to this map unless ``apply`` is False (the store
        holds each chain once it is durable, and lets go of the segments once their tombstones are:
        a failure in between leaves the map as the topic is).

        A run is consecutive in write (downstream) order, each segment starting upstream where
        the one before ended and downstream the same ``gap`` past its end; it continues the last
        chain when that one has fewer than ``max_batches`` batches. Never folded: the last segment
        written (at-least-once may extend it under its key), segments broken out of a chain
        (:meth:`add`), and a segment at the head of a new chain whose key another chain's record
        holds (held, or broken by a replay from its first batch). Segments equal to a
        chain's batch (a fold whose tombstones were not written) are only tombstoned."""
        if len(self._segments) < 2:
            return []
        last = self.last_written()
        # Only chains that reach the segments' downstream range, and the one just before it (the
        # open chain a run continues), matter: the others end before every segment. A week holds
        # ~600 chains a partition and the fold runs every 10 s: they are found by bisect.
        first_d = min(s.downstream_start for s in self._segments.values())
        near = self._chains_from(first_d)
        elements: list[Segment | Chain] = sorted([*self._segments.values(), *near], key=_write_order)
        folds: list[Fold] = []
        covered = [s for s in self._segments.values() if self._covering_chain(s, near) is not None]
        if covered:
            folds.append(Fold(None, tuple(sorted(covered, key=lambda s: s.upstream_start))))
            skip = {id(s) for s in covered}
            elements = [e for e in elements if id(e) not in skip]
        if self._classify(elements)[1]:
            # Something was written inside a chain's span (never under W): leave the partition as
            # it is rather than fold next to it.
            if apply:
                for fold in folds:
                    self.apply_fold(fold)
            return folds
        run_head: Chain | None = None
        run: list[Segment] = []
        run_gap: int | None = None

        def close() -> None:
            nonlocal run_head, run, run_gap
            if run and (run_head is not None or len(run) >= 2):
                if run_head is not None:
                    folds.append(Fold(run_head.extended(run), tuple(run)))
                else:  # its head's key is free (a run never starts at a taken one, below)
                    folds.append(Fold(Chain.from_segments(run), tuple(run)))
            run_head, run, run_gap = None, [], None

        for e in elements:
            if isinstance(e, Chain):
                close()
                if len(e) < max_batches:
                    run_head, run_gap = e, (e.gap if len(e) > 1 else None)
                continue
            if e is last or e == last or e.upstream_start in self._pinned:
                close()
                continue
            prev: Segment | Chain | None = run[-1] if run else run_head
            if prev is not None:
                size = len(run) + (len(run_head) if run_head is not None else 0)
                gap = e.downstream_start - prev.downstream_end
                if (
                    e.upstream_start == prev.upstream_end
                    and gap >= 0
                    and (run_gap is None or gap == run_gap)
                    and size < max_batches
                ):
                    run.append(e)
                    run_gap = gap
                    continue
                close()
            # A segment whose upstream start keys a chain (held, or broken into its batches by this
            # replay of its first one) never heads a run: a chain under that key would replace that
            # chain's record on the topic, and with it the older copies only that record holds.
            run, run_gap = ([] if self._key_taken(e.upstream_start) else [e]), None
        close()
        if apply:
            for fold in folds:
                self.apply_fold(fold)
        return folds

    def _key_taken(self, upstream_start: int) -> bool:
        """A chain record is keyed by this upstream start: a held chain's, or a broken one's."""
        return upstream_start in self._chains or upstream_start in self._broken

    @staticmethod
    def _covering_chain(segment: Segment, chains: Iterable[Chain]) -> Chain | None:
        for chain in chains:
            if chain.upstream_start <= segment.upstream_start < chain.upstream_end and chain.covers(segment):
                return chain
        return None

    def apply_fold(self, fold: Fold, *, chain_only: bool = False) -> None:
        """Hold ``fold.chain`` and (unless ``chain_only``) let go of the segments it replaces (those
        still held as they were).

        The views are kept: a fold changes no translation (its chain says what its segments said),
        so views built before it still answer exactly, and rebuilding every partition's views after
        every fold cost seconds at a week's history. They are rebuilt once they hold twice the
        elements the map does (the folded segments they still reference)."""
        chain = fold.chain
        if chain is not None and self._chains.get(chain.key) is not chain:
            self._hold_chain(chain)
            later = self._reconcile(chain)  # a replay added since the fold was planned
            if later is not None:
                self._break_chain_at(later)
        if not chain_only:
            for seg in fold.replaced:
                if self._segments.get(seg.upstream_start) == seg and seg.upstream_start not in self._pinned:
                    del self._segments[seg.upstream_start]
        self._last = None
        if len(self._by_d) > 2 * (len(self._segments) + len(self._chains)) + 64:
            self._dirty = True

    # -- views ---------------------------------------------------------------------------------

    def _append(self, element: Segment | Chain) -> None:
        """Fold in a segment or chain written after every held one (W1: it has the highest downstream start)."""
        first = len(self._by_d) == 0
        u_start, u_end = element.upstream_start, element.upstream_end
        d_start, d_end = element.downstream_start, element.downstream_end
        if isinstance(element, Chain):
            self._paint(u_start, u_end, 0, element)
        else:
            self._paint(u_start, u_end, d_start, None)
        self._by_d.append(element)
        self._d_starts.append(d_start)
        prev = self._u_end_max[-1] if self._u_end_max else 0
        self._u_end_max.append(max(prev, u_end))
        if first:
            self._min_u_start, self._min_d_start = u_start, d_start
        else:
            self._min_u_start = min(self._min_u_start, u_start)
            self._min_d_start = min(self._min_d_start, d_start)
        self._max_u_end = max(self._max_u_end, u_end)
        self._max_d_end = max(self._max_d_end, d_end)

    def _extend_last(self, segment: Segment) -> None:
        """Fold in the last-written segment grown by a batch (the writer's normal case in
        at-least-once): painting it again over its shorter self is what a rebuild would do, at the
        cost of one piece instead of the partition's whole history."""
        self._paint(segment.upstream_start, segment.upstream_end, segment.downstream_start, None)
        self._by_d[-1] = segment
        prev = self._u_end_max[-2] if len(self._u_end_max) > 1 else 0
        self._u_end_max[-1] = max(prev, segment.upstream_end)
        self._max_u_end = max(self._max_u_end, segment.upstream_end)
        self._max_d_end = max(self._max_d_end, segment.downstream_end)

    def _paint(self, a: int, b: int, d: int, ref: Chain | None) -> None:
        """Map upstream [a, b) to downstream d… (or through chain ``ref``) over whatever the
        upstream view said there. A chain has no upstream holes, so a clipped piece of one is
        still resolved by the chain."""
        lo, hi, dlo, refs = self._lo, self._hi, self._dlo, self._ref
        i = bisect_right(hi, a)  # first piece ending after a
        j = bisect_left(lo, b)  # first piece starting at or after b
        new_lo, new_hi, new_d, new_ref = [], [], [], []
        if i < j and lo[i] < a:
            new_lo.append(lo[i])
            new_hi.append(a)
            new_d.append(dlo[i])
            new_ref.append(refs[i])
        new_lo.append(a)
        new_hi.append(b)
        new_d.append(d)
        new_ref.append(ref)
        if i < j and hi[j - 1] > b:
            new_lo.append(b)
            new_hi.append(hi[j - 1])
            new_d.append(dlo[j - 1] + (b - lo[j - 1]) if refs[j - 1] is None else 0)
            new_ref.append(refs[j - 1])
        lo[i:j] = new_lo
        hi[i:j] = new_hi
        dlo[i:j] = new_d
        refs[i:j] = new_ref

    def _view_elements(self) -> list[Segment | Chain]:
        """What the views are built from, in write order: segments equal to a chain's batch are left
        out (the chain says the same), and a chain with anything else written inside its downstream
        span is taken as its batches (painting it whole would put that other write under or over
        all of the chain's batches)."""
        elements: list[Segment | Chain] = sorted([*self._segments.values(), *self._chains.values()], key=_write_order)
        if not self._chains:
            return elements
        skip, explode = self._classify(elements)
        if not skip and not explode:
            return elements
        out: list[Segment | Chain] = []
        for e in elements:
            if id(e) in skip:
                continue
            if id(e) in explode:
                assert isinstance(e, Chain)
                out.extend(e.segments())
            else:
                out.append(e)
        out.sort(key=_write_order)
        return out

    @staticmethod
    def _classify(elements: Sequence[Segment | Chain]) -> tuple[set[int], set[int]]:
        """Among ``elements`` (in write order): the ids of segments equal to a batch of a chain whose
        span holds them, and the ids of chains with anything else inside their downstream span."""
        open_chains: list[Chain] = []
        skip: set[int] = set()
        explode: set[int] = set()
        for e in elements:
            if open_chains:
                open_chains = [c for c in open_chains if c.downstream_end > e.downstream_start]
            if isinstance(e, Segment) and any(c.covers(e) for c in open_chains):
                skip.add(id(e))
                continue
            for c in open_chains:
                explode.add(id(c))
                if isinstance(e, Chain):
                    explode.add(id(e))
            if isinstance(e, Chain):
                open_chains.append(e)
        return skip, explode

    def _ensure_built(self) -> None:
        if not self._dirty:
            return
        self._reset_views()
        for element in self._view_elements():
            self._append(element)
        self._dirty = False

    # -- queries -------------------------------------------------------------------------------

    def upstream_end(self) -> int | None:
        """One past the highest mirrored upstream offset (None without segments): where the
        source's records not on the target yet begin."""
        if not len(self):
            return None
        self._ensure_built()
        return self._max_u_end

    def translate(self, group_offset: int) -> Translation:
        """Downstream position for upstream position ``group_offset`` (invariants A–F)."""
        g = group_offset
        if g < 0:
            raise OffsetMapError(f"{self.topic}[{self.partition}]: cannot translate negative offset {g}")
        tp = f"{self.topic}[{self.partition}]"
        if not len(self):
            return Translation(g, None, Method.NO_HISTORY, 0, f"{tp}: no offset-map segments for this partition")
        self._ensure_built()
        lo, hi, dlo, refs = self._lo, self._hi, self._dlo, self._ref
        i = bisect_right(lo, g) - 1
        if i >= 0 and g < hi[i]:
            ref = refs[i]
            d = dlo[i] + (g - lo[i]) if ref is None else ref.downstream_of(g)
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
        ref = refs[i]
        d = dlo[i] + (hi[i] - lo[i]) if ref is None else ref.downstream_of(hi[i] - 1) + 1
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
        if not len(self):
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
        element = self._by_d[j]
        before = self._u_end_max[j - 1] if j > 0 else None
        if isinstance(element, Chain) and d < element.downstream_end:
            # Inside the chain's span: its batch at or below d, as the batches' own entries would say.
            u_i, d_i, n_i = element.batch(element.downstream_index(d))
            if d < d_i + n_i:
                record = u_i + (d - d_i)
                u = max(record, before) if before is not None else record
                return Translation(
                    u, d, Method.EXACT, 0, f"{tp} downstream {d} is a copy of upstream {record}; resume upstream at {u}"
                )
            u = max(u_i + n_i, before) if before is not None else u_i + n_i
            return Translation(
                u,
                d,
                Method.GAP,
                0,
                f"{tp} downstream {d} is between mirrored records; every record below upstream {u} was read",
            )
        if isinstance(element, Segment) and d < element.downstream_end:
            record = element.upstream_start + (d - element.downstream_start)
            # Records already read below d (an earlier, longer run) need not be read again.
            u = max(record, before) if before is not None else record
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

    def chains(self) -> int:
        """How many chains are held (``len`` counts their batches)."""
        return sum(len(p.chains()) for p in self._partitions.values())

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

    def add_chain(self, chain: Chain) -> Chain | None:
        """Hold ``chain``; one with the same (topic, partition, key) is replaced (returned)."""
        key = (chain.topic, chain.partition)
        pmap = self._partitions.get(key)
        if pmap is None:
            pmap = self._partitions[key] = PartitionMap(*key)
        return pmap.add_chain(chain)

    def discard_chain(self, topic: str, partition: int, key: int) -> Chain | None:
        """Drop one chain (a tombstone for its key was read); returns it if it was held."""
        pmap = self._partitions.get((topic, partition))
        return pmap.discard_chain(key) if pmap is not None else None

    def fold(self, max_batches: int = CHAIN_MAX_BATCHES, *, apply: bool = True) -> list[Fold]:
        """Fold every partition's runs of segments into chains (:meth:`PartitionMap.fold`)."""
        return [f for pmap in self._partitions.values() for f in pmap.fold(max_batches, apply=apply)]

    def apply_fold(self, fold: Fold, *, chain_only: bool = False) -> None:
        """Hold a fold's chain and (unless ``chain_only``) let go of the segments it replaces."""
        some = fold.chain or (fold.replaced[0] if fold.replaced else None)
        if some is None:
            return
        pmap = self._partitions.get((some.topic, some.partition))
        if pmap is None:
            pmap = self._partitions[(some.topic, some.partition)] = PartitionMap(some.topic, some.partition)
        pmap.apply_fold(fold, chain_only=chain_only)

    def apply_record(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of the offset-map topic, in topic order: a segment (key version 0),
        a chain (key version 1) or a tombstone of either. Raises :class:`FormatError` on bad bytes."""
        if len(key) >= 2 and key[0] == 0 and key[1] == CHAIN_KEY_VERSION:
            if value is None:
                self.discard_chain(*OffsetChain.decode_key(key))
            else:
                self.add_chain(Chain.from_record(OffsetChain.decode(key, value)))
        elif value is None:
            self.discard(*OffsetSegment.decode_key(key))
        else:
            self.add(Segment.from_record(OffsetSegment.decode(key, value)))

    def add_all(self, segments: Iterable[Segment]) -> None:
        """Hold every segment, in the order given (later ones replace earlier ones with the same key)."""
        for segment in segments:
            self.add(segment)

    def discard(self, topic: str, partition: int, upstream_start: int) -> Segment | None:
        """Drop one segment (a tombstone for its key was read); returns it if it was held."""
        pmap = self._partitions.get((topic, partition))
        return pmap.discard(upstream_start) if pmap is not None else None

    def prune(self, topic: str, partition: int, downstream_log_start: int) -> list[Segment | Chain]:
        """Drop the segments (and chained batches) of ``topic[partition]`` entirely below the
        target's log start offset; returns what changed (:meth:`PartitionMap.prune`) so the store
        can write tombstones and trimmed chains."""
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
