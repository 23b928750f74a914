"""MirrorMaker 2's history, exactly: which source record each record of a remote partition copies,
found by reading the source partition beside its remote partition, as offset-map segments.

MM2 copies a record with its key, value, timestamp and headers, in order, at least once: after a
restart it resumes from its last committed offset, so the remote log can go back (it holds
s5 s6 s7 s5 s6 s7 s8 …). :class:`HistoryMatcher` is fed the remote records in order, as digests
of those four fields (:func:`record_digest`), pulls the source records it needs from an iterator,
and yields :class:`~sparkmirror.core.offsetmap.Segment` s: maximal runs where the remote offset and
the source offset both advance by one. A replay is a new segment at higher downstream offsets, as
the writer's own replays are (W2): the offset map's rule "the copy written last wins" then
translates every offset to the copy that the rest of the log follows. A segment replaying from the
same upstream start as an earlier one has its key and replaces it, as a replay of the writer does.

How a remote record is matched, in this order (the rules are the whole of it; nothing else is tried):

1. The next source record after the last match (the normal case), when its digest is equal.
2. Otherwise the source records kept behind it (a replay; a bounded window of the most recent
   ``window`` source records) and, if none of them is equal, the next ``window`` source records
   ahead (source records the remote lacks: aborted records MM2 did not copy, records compacted
   away on the remote). One equal record: that one. Several behind (records identical in all four
   fields): the candidates are followed along the next remote records, each of which must be the
   next source record of a candidate, until one candidate is left; if none or several are left,
   refused (:class:`HistoryAmbiguous`).
3. None: refused (:class:`HistoryMismatch`), naming the remote and source topic, partition and
   offsets. A replay reaching further back than the window looks the same and is said so.

Where the logs begin: source retention may have removed records whose copies the remote still
holds. The map can only start where both logs hold records: remote records before the first one
that copies a retained source record are counted (``gone``), not mapped, and a translation below
the first mapped record is the offset map's BELOW_HISTORY (the earliest mapped copy). Equally,
source records older than the remote's first copy (the remote's retention is shorter) are skipped.
The first remote record is looked for among the first ``window`` source records; failing that, and
if the source has lost records (its first offset is past 0), the first remote records (up to
``window``) are taken as copies of removed source records until one copies one of the source's
first records; failing both, refused. (``source`` must then start at the partition's log start.)

``upto``: source offsets at or past it are not indexed (copies of them are dropped, counted in
``beyond``): the caller passes the offset sparkmirror's own copying started at, so that every
history segment is keyed below every segment sparkmirror writes and neither replaces the other
in the compacted offset-map topic; sparkmirror's copies of those records are later and win anyway.

Memory is bounded: the ring of source digests holds at most three windows of records, 24 bytes
each (the window behind, as much again ahead, and up to a window dropped but not yet let go of:
72 MB at the default), a run in progress is one segment, segments are yielded as they close (``max_run`` closes a
run every so many records so that a caller can make its progress durable).

This module must never import pyspark or a Kafka client, and never guess.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from hashlib import sha256

from sparkmirror.core.exceptions import CoreError
from sparkmirror.core.offsetmap import Segment

__all__ = [
    "DEFAULT_WINDOW",
    "DIGEST_SIZE",
    "HistoryAmbiguous",
    "HistoryError",
    "HistoryMatcher",
    "HistoryMismatch",
    "HistoryStats",
    "record_digest",
]

#: Bytes of a record digest (of a SHA-256): a false match among a window of a million records is ~1e-26.
DIGEST_SIZE = 16
#: Source records a replay may go back, by default. MM2 commits its source offsets every
#: ``offset.flush.interval.ms`` (60 s): a restart replays at most that long of a partition's records
#: (plus the shutdown's), 16,000 records/s of one partition for a million. 24 MB per partition indexed.
DEFAULT_WINDOW = 1_000_000
#: Remote records followed at most to tell candidates identical in all four fields apart.
AMBIGUITY_LOOKAHEAD = 10_000

_LENGTHS = struct.Struct(">qii")
_HEADER = struct.Struct(">ii")


def record_digest(
    key: bytes | None,
    value: bytes | None,
    timestamp_ms: int,
    headers: Sequence[tuple[str, bytes | str | None]] | None,
) -> bytes:
    """The digest of what MM2 keeps of a record: key, value, timestamp and headers (in order), the first
    16 bytes of a SHA-256 (hashed in hardware on the hosts sparkmirror runs on: twice BLAKE2b's speed
    here). A null key or value is told apart from an empty one (a header value given as text is its
    UTF-8)."""
    parts = [
        _LENGTHS.pack(timestamp_ms, -1 if key is None else len(key), -1 if value is None else len(value)),
        key or b"",
        value or b"",
    ]
    if headers:
        for name, given in headers:
            nb = name.encode("utf-8")
            hv = given.encode("utf-8") if isinstance(given, str) else given
            parts += (_HEADER.pack(len(nb), -1 if hv is None else len(hv)), nb, hv or b"")
    return sha256(b"".join(parts)).digest()[:DIGEST_SIZE]


class HistoryError(CoreError):
    """The remote partition does not copy the source partition where it says; nothing was guessed."""


class HistoryMismatch(HistoryError):
    """A remote record copies no source record within reach."""


class HistoryAmbiguous(HistoryError):
    """A remote record copies one of several source records identical in key, value, timestamp and
    headers, and the records after it do not tell which."""


@dataclass
class HistoryStats:
    """What one partition's matching found."""

    #: Remote records mapped to a source record.
    matched: int = 0
    #: Of those, copies of a source record matched before (MM2's replays).
    replayed: int = 0
    #: Remote records before the first mapped one whose source record is gone (source retention).
    gone: int = 0
    #: Remote records copying source offsets at or past ``upto`` (sparkmirror's copies win).
    beyond: int = 0
    #: Source records passed over that the remote does not hold (before its first copy, or between).
    source_skipped: int = 0
    #: Segments yielded.
    segments: int = 0
    #: Remote offset range mapped ([first, last]) and source offset range covered.
    first_remote: int | None = None
    last_remote: int | None = None
    first_source: int | None = None
    last_source: int | None = None


class HistoryMatcher:
    """Maps the records of one remote partition, fed in order with :meth:`push`, to the source
    partition's records pulled from ``source`` (``(offset, digest)`` in offset order).

    ``expected``: resume after an earlier run, the next source offset expected (the end of the last
    segment it wrote); ``source`` must then start up to ``window`` offsets before it, so that a
    replay into what that run matched is found. None: a first run (``source`` from its log start).
    """

    def __init__(
        self,
        source: Iterator[tuple[int, bytes]],
        *,
        topic: str,
        partition: int,
        remote_topic: str,
        window: int = DEFAULT_WINDOW,
        expected: int | None = None,
        upto: int | None = None,
        max_run: int = 1 << 62,
    ) -> None:
        if window < 1 or max_run < 1:
            raise ValueError("window and max_run must be at least 1")
        self.topic, self.partition, self.remote_topic = topic, partition, remote_topic
        self.window = window
        self.upto = upto
        self._upto = upto if upto is not None else 1 << 63
        self.max_run = max_run
        self.stats = HistoryStats()
        self._source = source
        self._source_done = False
        # The ring: source offsets and their digests; [base, len) is kept, pos is the next expected.
        self._offs = array("q")
        self._digs = bytearray()
        self._base = 0
        self._pos = 0
        self._dropped = 0  # records dropped from the ring's front so far (ring index + this = absolute)
        self._matched_upto = -1  # highest source offset matched so far (tells replays)
        self._resume = expected
        self._aligned = False
        # The open run: upstream start, downstream start, count (0: none). The stats count a run when it closes.
        self._ru = self._rd = self._rn = 0
        # Aligned, and no candidates followed: the per-record fast path of :meth:`push` applies.
        self._fast = False
        self._out: list[Segment] = []
        #: Per ring record: 1 once a remote record was matched to it (a replay goes back only to those).
        self._was = bytearray()
        # Ambiguity: candidate ring indexes and the remote records held while they are followed.
        self._candidates: list[int] = []
        self._held: list[tuple[int, bytes]] = []
        self._gone_from: int | None = None
        self._first_source: set[bytes] | None = None

    # -- the ring -------------------------------------------------------------------------------

    def _pull(self) -> bool:
        """Append the next source record to the ring; False at the source's end."""
        if self._source_done:
            return False
        try:
            off, dig = next(self._source)
        except StopIteration:
            self._source_done = True
            return False
        self._offs.append(off)
        self._digs += dig
        self._was.append(0)
        return True

    def _dig(self, i: int) -> bytes:
        return bytes(self._digs[i * DIGEST_SIZE : (i + 1) * DIGEST_SIZE])

    def _find(self, dig: bytes, lo: int, hi: int) -> list[int]:
        """Ring indexes in [lo, hi) whose digest is ``dig``."""
        out = []
        digs, n = self._digs, DIGEST_SIZE
        at = digs.find(dig, lo * n, hi * n)
        while at >= 0:
            if at % n == 0:
                out.append(at // n)
            at = digs.find(dig, at + 1, hi * n)
        return out

    def _trim(self) -> None:
        """Keep ``window`` records behind the expected one; drop the rest now and then (a memmove
        of the ring once per ``window`` records)."""
        if self._pos - self._base > self.window:
            self._base = self._pos - self.window
        if self._base >= max(self.window, 4096):
            del self._offs[: self._base]
            del self._digs[: self._base * DIGEST_SIZE]
            del self._was[: self._base]
            self._pos -= self._base
            self._dropped += self._base
            self._base = 0

    def _expected_offset(self) -> str:
        if self._pos < len(self._offs):
            return f"offset {self._offs[self._pos]}"
        if self._offs:
            return f"the record after offset {self._offs[-1]} (the source ends there)"
        return "a record (the source partition holds none from where it was read)"

    def _where(self, remote_offset: int) -> str:
        return f"{self.remote_topic}[{self.partition}] offset {remote_offset}"

    # -- matching -------------------------------------------------------------------------------

    def push(self, remote_offset: int, digest: bytes) -> list[Segment]:
        """Map the next remote record; returns the segments closed by it (usually none)."""
        if self._fast:
            # The normal case, a copy of the next source record continuing the open run, inline: this
            # runs once per record of the history.
            pos = self._pos
            n = self._rn
            if (
                n
                and (pos < len(self._offs) or self._pull())
                and self._digs[pos * DIGEST_SIZE : (pos + 1) * DIGEST_SIZE] == digest
            ):
                u = self._offs[pos]
                if u == self._ru + n and remote_offset == self._rd + n and n < self.max_run and u < self._upto:
                    self._rn = n + 1
                    self._was[pos] = 1
                    self._pos = pos + 1
                    if pos + 1 - self._base > self.window:
                        self._trim()
                    return []
            self._match_next(remote_offset, digest)
        elif self._candidates:
            self._follow(remote_offset, digest)
        elif not self._aligned:
            self._align(remote_offset, digest)
        else:
            self._match_next(remote_offset, digest)
        out, self._out = self._out, []
        return out

    def finish(self) -> list[Segment]:
        """The remote partition ended: the open run, closed. Refuses if candidates are still open, or if no
        remote record matched a source record at all (every one counted as a copy of a record the source
        lost: nothing shows the two logs are the same)."""
        if self._candidates:
            self._refuse_ambiguous("the remote partition ends before the records after it tell them apart")
        if not self._aligned and self.stats.gone:
            raise HistoryMismatch(
                f"{self.remote_topic}[{self.partition}] offsets {self._gone_from} on: none of its "
                f"{self.stats.gone:,} records copies one of the records {self.topic}[{self.partition}] holds, and "
                "nothing shows they copy records retention removed from it: the logs do not match; nothing was "
                "guessed. A remote topic whose records carry the time they were appended "
                "(message.timestamp.type=LogAppendTime) looks the same: --ignore-timestamps."
            )
        self._close()
        out, self._out = self._out, []
        return out

    def close_run(self) -> list[Segment]:
        """The open run, closed (after a refusal: what was matched before it is still true)."""
        self._close()
        out, self._out = self._out, []
        return out

    def _match_next(self, r: int, dig: bytes) -> None:
        pos = self._pos
        if pos == len(self._offs) and not self._pull():
            self._resolve(r, dig)
            return
        digs, n = self._digs, DIGEST_SIZE
        if digs[pos * n : pos * n + n] == dig:
            self._matched(pos, r)
        else:
            self._resolve(r, dig)

    def _resolve(self, r: int, dig: bytes) -> None:
        """The next source record is not the copy: a replay (behind), or records the remote lacks (ahead)."""
        # A replay copies records MM2 had copied before: a record behind that no remote record matched yet
        # (passed over as one the remote lacks) copied now would be out of order, which the map cannot say.
        found_behind = self._find(dig, self._base, self._pos)
        behind = [i for i in found_behind if self._was[i]]
        if found_behind and not behind:
            raise HistoryMismatch(
                f"{self._where(r)} copies {self.topic}[{self.partition}] offset {self._offs[found_behind[-1]]}, "
                f"which the remote passed over before (it holds copies of later records before this one): the "
                f"remote's order is not the source's there, which an offset map cannot represent; nothing was guessed"
            )
        if len(behind) == 1:
            self._matched(behind[0], r)
            return
        if len(behind) > 1:
            self._follow_from(behind, r, dig)
            return
        start = self._pos
        end = start + self.window
        i = start
        while i < end:
            if i == len(self._offs) and not self._pull():
                break
            if self._digs[i * DIGEST_SIZE : (i + 1) * DIGEST_SIZE] == dig:
                self._check_passed_over(start, i, r)
                self.stats.source_skipped += i - start
                # Records the remote lacks were passed over: an identical record further on may be the
                # one copied (the remote lacks this one too), so the records after it decide, or nothing.
                while len(self._offs) < i + 1 + AMBIGUITY_LOOKAHEAD and self._pull():
                    pass
                same = [i, *self._find(dig, i + 1, min(len(self._offs), i + 1 + AMBIGUITY_LOOKAHEAD))]
                if len(same) > 1:
                    self._follow_from(same, r, dig)
                else:
                    self._matched(i, r)
                return
            i += 1
        lo = self._offs[self._base] if self._base < len(self._offs) else None
        hi = self._offs[min(i, len(self._offs)) - 1] if self._offs else None
        searched = f"offsets {lo} to {hi}" if lo is not None else "no offsets (the source holds no record there)"
        raise HistoryMismatch(
            f"{self._where(r)} copies no record of {self.topic}[{self.partition}] within reach: the next "
            f"source record expected was {self._expected_offset()}, and none of {searched} has the same key, "
            f"value, timestamp and headers. The two logs do not match there; nothing was guessed. A replay "
            f"reaching further back than the window ({self.window:,} source records) looks the same: rerun "
            f"with a larger --window if MM2 may have gone back that far. A remote topic whose records carry the "
            f"time they were appended (message.timestamp.type=LogAppendTime) looks the same at every record: "
            f"--ignore-timestamps."
        )

    def _check_passed_over(self, start: int, i: int, r: int) -> None:
        """Records ``start``..``i - 1`` are passed over as ones the remote lacks. If one of them is identical
        to a record matched just before, the remote's copy may have been of either (a transaction's
        records aborted then written again, a producer's retry): which one MM2 copied is not known, so
        nothing is guessed. Looked at over the last :data:`AMBIGUITY_LOOKAHEAD` records matched."""
        lo = max(self._base, start - AMBIGUITY_LOOKAHEAD)
        matched = {self._dig(j) for j in range(lo, start) if self._was[j]}
        twins = [k for k in range(start, i) if self._dig(k) in matched]
        if twins:
            k = twins[0]
            raise HistoryAmbiguous(
                f"{self._where(r)}: to match it, {self.topic}[{self.partition}] offsets {self._offs[start]} to "
                f"{self._offs[i - 1]} are passed over as records the remote lacks, but offset {self._offs[k]} is "
                f"identical (key, value, timestamp and headers) to a record matched just before it: the remote's "
                f"earlier copy may be of either (a transaction aborted and written again, a producer's retry), so "
                "nothing was guessed. If MirrorMaker 2 read the source read_committed, so must index-history "
                "(source.consumer.isolation.level = read_committed in the file, or --source-isolation)"
            )

    def _matched(self, i: int, r: int) -> None:
        u = self._offs[i]
        self._was[i] = 1
        self._pos = i + 1
        n = self._rn
        if u >= self._upto:
            self.stats.beyond += 1
            self._close()
        elif n and u == self._ru + n and r == self._rd + n and n < self.max_run:
            self._rn = n + 1
        else:
            self._close()
            self._ru, self._rd, self._rn = u, r, 1
        self._fast = not self._candidates
        self._trim()

    def _close(self) -> None:
        """Close the open run into a segment, and count it."""
        n = self._rn
        if not n:
            return
        u0, d0 = self._ru, self._rd
        self._out.append(Segment(self.topic, self.partition, u0, d0, n))
        st = self.stats
        st.segments += 1
        st.matched += n
        # Within a run the source offset rises by one: its records matched before are those up to
        # the highest matched before it.
        if self._matched_upto >= u0:
            st.replayed += min(u0 + n, self._matched_upto + 1) - u0
        self._matched_upto = max(self._matched_upto, u0 + n - 1)
        if st.first_remote is None:
            st.first_remote = d0  # runs close in remote order
        st.last_remote = d0 + n - 1
        st.first_source = u0 if st.first_source is None else min(st.first_source, u0)
        st.last_source = u0 + n - 1 if st.last_source is None else max(st.last_source, u0 + n - 1)
        self._rn = 0

    # -- where the two logs begin ---------------------------------------------------------------

    def _align(self, r: int, dig: bytes) -> None:
        if self._resume is not None:
            # Resume: the records before the expected one are the window behind it.
            while (not self._offs or self._offs[-1] < self._resume) and self._pull():
                pass
            self._pos = next((i for i, o in enumerate(self._offs) if o >= self._resume), len(self._offs))
            self._matched_upto = self._resume - 1
            for i in range(self._pos):  # an earlier run mapped them (a replay may go back to them)
                self._was[i] = 1
            self._base = max(0, self._pos - self.window)
            self._aligned = True
            self._match_next(r, dig)
            return
        if self._gone_from is None:
            while len(self._offs) < self.window and self._pull():
                pass
            found = self._find(dig, 0, len(self._offs))
            if found:
                self._align_at(found, r, dig)
                return
            if not self._offs:
                raise HistoryMismatch(
                    f"{self._where(r)}: {self.topic}[{self.partition}] holds no record to match it with "
                    "(empty, or every record removed by retention); nothing was guessed"
                )
            if self._offs[0] == 0:
                raise HistoryMismatch(
                    f"{self._where(r)} copies none of the first {len(self._offs):,} records of "
                    f"{self.topic}[{self.partition}], which has lost no record to retention (it starts at offset "
                    "0): the two logs do not match there; nothing was guessed. A remote topic whose records carry "
                    "the time they were appended (message.timestamp.type=LogAppendTime) looks the same: "
                    "--ignore-timestamps."
                )
            # Copies of records the source no longer holds (it starts past offset 0)? Then a later remote
            # record copies one of the source's first records.
            self._gone_from = r
            self._first_source = {self._dig(i) for i in range(min(len(self._offs), AMBIGUITY_LOOKAHEAD))}
        assert self._first_source is not None
        if dig in self._first_source:
            self._first_source = None
            self._align_at(self._find(dig, 0, min(len(self._offs), AMBIGUITY_LOOKAHEAD)), r, dig)
            return
        self.stats.gone += 1
        if self.stats.gone > self.window:
            raise HistoryMismatch(
                f"{self.remote_topic}[{self.partition}] offsets {self._gone_from} to {r}: none copies one of "
                f"the first {len(self._offs):,} records of {self.topic}[{self.partition}] (from offset "
                f"{self._offs[0]}), and {self._where(self._gone_from)} copies none of them either: the logs "
                f"do not overlap within the window ({self.window:,} records); nothing was guessed"
            )

    def _align_at(self, found: list[int], r: int, dig: bytes) -> None:
        """The logs begin to match: remote record ``r`` copies the first of ``found`` (ring indexes),
        or one of them that the records after it tell apart; the source records before it are passed over."""
        self._aligned = True
        self.stats.source_skipped += found[0]
        if len(found) == 1:
            self._matched(found[0], r)
        else:
            self._follow_from(found, r, dig)

    # -- records identical in all four fields -----------------------------------------------------

    def _follow_from(self, candidates: list[int], r: int, dig: bytes) -> None:
        """Remote record ``r`` copies one of ``candidates`` (ring indexes): follow them along the next ones."""
        self._candidates, self._held = candidates, [(r, dig)]
        self._fast = False

    def _follow(self, r: int, dig: bytes) -> None:
        """Keep the candidates whose next source record is this remote record's copy."""
        self._fast = False
        self._held.append((r, dig))
        step = len(self._held) - 1
        kept = []
        for c in self._candidates:
            i = c + step
            while i >= len(self._offs) and self._pull():
                pass
            if i < len(self._offs) and self._dig(i) == dig:
                kept.append(c)
        if not kept:
            self._refuse_ambiguous(f"the records after it match none of them in order (at {self._where(r)})")
        self._candidates = kept
        if len(kept) == 1:
            self._release(kept[0])
        elif len(self._held) > AMBIGUITY_LOOKAHEAD:
            self._refuse_ambiguous(f"{AMBIGUITY_LOOKAHEAD:,} records after it do not tell them apart")

    def _release(self, c: int) -> None:
        held, self._held, self._candidates = self._held, [], []
        first = c + self._dropped  # ring indexes move when the ring drops its front
        for k, (r, _dig) in enumerate(held):
            self._matched(first + k - self._dropped, r)

    def _refuse_ambiguous(self, why: str) -> None:
        r = self._held[0][0]
        offsets = ", ".join(str(self._offs[c]) for c in self._candidates[:10])
        raise HistoryAmbiguous(
            f"{self._where(r)} copies one of the records of {self.topic}[{self.partition}] at offsets {offsets} "
            f"(identical key, value, timestamp and headers), and {why}; nothing was guessed"
        )
