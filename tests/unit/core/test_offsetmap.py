"""The exact offset map: segments, translation in both directions, pruning, replacement and
the not-loaded rule. The property tests simulate a mirror writing a gappy upstream log with
at-least-once replays and check the invariants in the module's header against the truth."""

from __future__ import annotations

import pickle
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkmirror.core import (
    Method,
    NotLoadedError,
    OffsetMap,
    OffsetMapError,
    OffsetSegment,
    PartitionMap,
    Segment,
    segments_from_offsets,
)
from sparkmirror.errors import SparkMirrorError

T = "orders"


def _loaded(*segments: Segment) -> OffsetMap:
    omap = OffsetMap()
    omap.add_all(segments)
    omap.mark_loaded()
    return omap


# -- Segment and segments_from_offsets --------------------------------------------------------


def test_segment_ends_are_exclusive() -> None:
    seg = Segment(T, 0, upstream_start=10, downstream_start=3, count=5)
    assert (seg.upstream_end, seg.downstream_end) == (15, 8)
    assert str(seg) == "orders[0] u[10,15)->d[3,8)"


def test_segment_rejects_empty_or_negative() -> None:
    with pytest.raises(OffsetMapError, match="count must be >= 1"):
        Segment(T, 0, 0, 0, 0)
    with pytest.raises(OffsetMapError, match="negative"):
        Segment(T, 0, -1, 0, 1)


def test_segment_record_round_trip() -> None:
    seg = Segment(T, 2, 7, 9, 4)
    record = seg.to_record(written_at_ms=123)
    assert record == OffsetSegment(T, 2, 7, 9, 4, 123)
    assert Segment.from_record(OffsetSegment.decode(record.key_bytes(), record.value_bytes())) == seg


def test_segments_from_offsets_splits_where_either_side_jumps() -> None:
    upstream = [0, 1, 2, 4, 5, 6, 7, 2, 3]  # gap at 3 (marker), then a replay from 2
    downstream = [0, 1, 2, 3, 4, 6, 7, 8, 9]  # gap at 5 (marker on the target)
    assert segments_from_offsets(T, 1, upstream, downstream) == [
        Segment(T, 1, 0, 0, 3),
        Segment(T, 1, 4, 3, 2),
        Segment(T, 1, 6, 6, 2),
        Segment(T, 1, 2, 8, 2),
    ]
    assert segments_from_offsets(T, 1, [], []) == []
    assert segments_from_offsets(T, 1, [5], [9]) == [Segment(T, 1, 5, 9, 1)]


def test_segments_from_offsets_one_segment_per_clean_batch() -> None:
    assert segments_from_offsets(T, 0, range(100, 1100), range(0, 1000)) == [Segment(T, 0, 100, 0, 1000)]


def test_segments_from_offsets_rejects_unequal_lists() -> None:
    with pytest.raises(OffsetMapError, match="3 upstream offsets but 2 downstream"):
        segments_from_offsets(T, 0, [1, 2, 3], [1, 2])


# -- translation, one example per method ------------------------------------------------------

# upstream 0..9 -> downstream 100..109; upstream 10 is a transaction marker;
# upstream 11..14 -> downstream 111..114 (110 is a marker on the target).
_A = Segment(T, 0, 0, 100, 10)
_B = Segment(T, 0, 11, 111, 4)


def test_translate_exact_inside_a_segment() -> None:
    t = _loaded(_A, _B).translate(T, 0, 4)
    assert (t.upstream_offset, t.downstream_offset, t.method, t.missing) == (4, 104, Method.EXACT, 0)
    assert "104" in t.explanation
    assert _loaded(_A, _B).translate(T, 0, 11).downstream_offset == 111


def test_translate_gap_goes_one_past_the_last_copy_below() -> None:
    t = _loaded(_A, _B).translate(T, 0, 10)
    assert (t.downstream_offset, t.method, t.missing) == (110, Method.GAP, 0)


def test_translate_at_the_end_is_caught_up_exact() -> None:
    t = _loaded(_A, _B).translate(T, 0, 15)
    assert (t.downstream_offset, t.method, t.missing) == (115, Method.EXACT, 0)
    assert "caught up" in t.explanation


def test_translate_beyond_reports_missing() -> None:
    t = _loaded(_A, _B).translate(T, 0, 20)
    assert (t.downstream_offset, t.method, t.missing) == (115, Method.BEYOND, 5)
    assert "5 offsets past" in t.explanation


def test_translate_below_history_says_so() -> None:
    t = _loaded(_B).translate(T, 0, 3)
    assert (t.downstream_offset, t.method) == (111, Method.BELOW_HISTORY)
    assert "below the earliest retained segment" in t.explanation


def test_translate_no_history_has_no_offset() -> None:
    t = _loaded(_A).translate(T, 1, 4)
    assert (t.upstream_offset, t.downstream_offset, t.method) == (4, None, Method.NO_HISTORY)
    t = _loaded(_A).translate("other", 0, 0)
    assert t.method is Method.NO_HISTORY


def test_translate_uses_the_copy_written_last() -> None:
    # Upstream 0..9 written at 100..109, then a replay from 5 wrote 5..9 again at 110..114
    # and continued with 10..11 at 115..116.
    omap = _loaded(Segment(T, 0, 0, 100, 10), Segment(T, 0, 5, 110, 7))
    assert omap.translate(T, 0, 4).downstream_offset == 104
    assert omap.translate(T, 0, 5).downstream_offset == 110
    assert omap.translate(T, 0, 9).downstream_offset == 114
    assert omap.translate(T, 0, 12).downstream_offset == 117


def test_translate_rejects_negative_offsets() -> None:
    with pytest.raises(OffsetMapError, match="negative"):
        _loaded(_A).translate(T, 0, -1)
    with pytest.raises(OffsetMapError, match="negative"):
        _loaded(_A).reverse_translate(T, 0, -1)


# -- reverse translation (failback), one example per method -----------------------------------


def test_reverse_translate_each_method() -> None:
    omap = _loaded(_A, _B)
    cases = {
        105: (5, Method.EXACT, 0),
        110: (10, Method.GAP, 0),  # the target's marker: everything below upstream 10 was read
        111: (11, Method.EXACT, 0),
        115: (15, Method.EXACT, 0),  # caught up
        118: (15, Method.BEYOND, 3),
        50: (0, Method.BELOW_HISTORY, 0),
    }
    for d, (u, method, missing) in cases.items():
        t = omap.reverse_translate(T, 0, d)
        assert (t.upstream_offset, t.downstream_offset, t.method, t.missing) == (u, d, method, missing), d
    t = omap.reverse_translate(T, 9, 0)
    assert (t.upstream_offset, t.method) == (None, Method.NO_HISTORY)


def test_reverse_translate_after_replay_does_not_reread() -> None:
    # 0..9 at 100..109, then a replay from 3 at 110..: a consumer at downstream 112 has read
    # upstream 0..9 (first copies) and 3, 4 again; upstream 10 is next.
    omap = _loaded(Segment(T, 0, 0, 100, 10), Segment(T, 0, 3, 110, 10))
    assert omap.reverse_translate(T, 0, 112).upstream_offset == 10
    assert omap.reverse_translate(T, 0, 118).upstream_offset == 11


# -- replacement, pruning, the not-loaded rule -------------------------------------------------


def test_same_upstream_start_replaces_as_compaction_would() -> None:
    omap = OffsetMap(loaded=True)
    first = Segment(T, 0, 0, 100, 10)
    replay = Segment(T, 0, 0, 200, 12)
    assert omap.add(first) is None
    assert omap.add(replay) == first
    assert len(omap) == 1
    assert omap.translate(T, 0, 3).downstream_offset == 203
    assert omap.add(replay) is None  # the same segment again changes nothing


def test_replacement_out_of_write_order_still_uses_the_last_written_copy() -> None:
    # Read back from a compacted topic, records need not come in write order.
    omap = OffsetMap()
    omap.add(Segment(T, 0, 5, 110, 7))
    omap.add(Segment(T, 0, 0, 100, 10))
    omap.mark_loaded()
    assert omap.translate(T, 0, 6).downstream_offset == 111
    assert omap.translate(T, 0, 2).downstream_offset == 102


def test_prune_drops_segments_below_the_log_start_and_returns_them() -> None:
    segs = [Segment(T, 0, 0, 0, 10), Segment(T, 0, 10, 10, 10), Segment(T, 0, 20, 20, 10)]
    omap = _loaded(*segs)
    assert omap.prune(T, 0, 19) == [segs[0]]  # [10,20) still holds offset 19
    assert omap.prune(T, 0, 20) == [segs[1]]
    assert omap.prune(T, 0, 20) == []
    assert omap.prune(T, 7, 100) == []
    assert len(omap) == 1
    t = omap.translate(T, 0, 5)
    assert (t.downstream_offset, t.method) == (20, Method.BELOW_HISTORY)
    assert omap.translate(T, 0, 25).downstream_offset == 25


def test_discard_removes_one_segment() -> None:
    omap = _loaded(_A, _B)
    assert omap.discard(T, 0, 11) == _B
    assert omap.discard(T, 0, 11) is None
    assert omap.discard("x", 0, 0) is None
    assert omap.translate(T, 0, 12).method is Method.BEYOND


def test_translation_refused_until_map_is_loaded() -> None:
    # KAFKA-13659: a partly read map would translate to stale offsets.
    omap = OffsetMap()
    omap.add(_A)
    assert not omap.loaded
    with pytest.raises(NotLoadedError, match="KAFKA-13659") as err:
        omap.translate(T, 0, 4)
    assert err.value.retriable is True
    assert isinstance(err.value, SparkMirrorError)
    assert isinstance(pickle.loads(pickle.dumps(err.value)), NotLoadedError)
    with pytest.raises(NotLoadedError):
        omap.reverse_translate(T, 0, 104)
    omap.mark_loaded()
    assert omap.loaded
    assert omap.translate(T, 0, 4).downstream_offset == 104


def test_partitions_are_kept_apart() -> None:
    omap = _loaded(Segment(T, 0, 0, 0, 5), Segment(T, 1, 0, 50, 5), Segment("b", 0, 0, 7, 1))
    assert omap.partitions() == [("b", 0), (T, 0), (T, 1)]
    assert omap.translate(T, 1, 2).downstream_offset == 52
    assert omap.translate("b", 0, 0).downstream_offset == 7
    pmap = omap.partition(T, 0)
    assert pmap is not None and pmap.segments() == [Segment(T, 0, 0, 0, 5)]
    with pytest.raises(OffsetMapError, match="does not belong"):
        PartitionMap(T, 0).add(Segment(T, 1, 0, 0, 1))


def test_many_segments_translate_fast_and_store_per_segment() -> None:
    pmap = PartitionMap(T, 0)
    n = 50_000
    for i in range(n):  # one segment per micro-batch of 100 records, one marker after each
        pmap.add(Segment(T, 0, i * 100, i * 101, 100))
    assert len(pmap) == n
    start = time.perf_counter()
    for g in range(0, n * 100, 997):
        assert pmap.translate(g).downstream_offset == (g // 100) * 101 + g % 100
    assert time.perf_counter() - start < 2.0


# -- property tests: a simulated mirror ---------------------------------------------------------


@dataclass
class History:
    """What a simulated mirror did to one partition."""

    log_end: int  # upstream log end offset
    records: list[int]  # upstream offsets holding data records (the rest are gaps)
    mirrored: int  # how many of ``records`` (a prefix) have been written downstream
    batches: list[list[Segment]] = field(default_factory=list)  # in write order
    copies: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))  # u -> d, in write order
    downstream_end: int = 0

    @property
    def mirrored_records(self) -> list[int]:
        return self.records[: self.mirrored]

    def last_copy(self, u: int) -> int:
        return max(self.copies[u])

    def first_copy(self, u: int) -> int:
        return min(self.copies[u])


@st.composite
def histories(draw: st.DrawFn) -> History:
    # Upstream log: records and gaps (compacted away, transaction markers, aborted records).
    kinds = draw(st.lists(st.sampled_from("rrrrg"), max_size=60))
    records = [u for u, kind in enumerate(kinds) if kind == "r"]
    h = History(log_end=len(kinds), records=records, mirrored=0)
    d = draw(st.integers(0, 5))
    for _ in range(draw(st.integers(0, 8))):
        # A batch starts at the end of what is mirrored, or earlier (an at-least-once replay),
        # and writes every record from there up to at least that end (invariant W2).
        replay = draw(st.booleans())
        start = draw(st.integers(0, h.mirrored)) if replay else h.mirrored
        end = draw(st.integers(h.mirrored, len(records)))
        batch = records[start:end]
        if not batch:
            continue
        downstream = list(range(d, d + len(batch)))
        for u, dd in zip(batch, downstream, strict=True):
            h.copies[u].append(dd)
        h.batches.append(segments_from_offsets(T, 0, batch, downstream))
        h.mirrored = max(h.mirrored, end)
        d += len(batch) + draw(st.integers(0, 2))  # commit markers or other writers on the target
        h.downstream_end = d
    return h


def _build(h: History, shuffled: random.Random | None = None) -> tuple[OffsetMap, int]:
    """The map as the writer would leave it; optionally in a scrambled load order (the last
    write of each key still wins, as in a compacted topic). Returns it and the replacements seen."""
    segments = [s for batch in h.batches for s in batch]
    omap = OffsetMap()
    replaced = 0
    if shuffled is not None:
        latest = {s.upstream_start: s for s in segments}
        segments = list(latest.values())
        shuffled.shuffle(segments)
        replaced = 1 if len(latest) < sum(len(b) for b in h.batches) else 0
    for s in segments:
        if omap.add(s) is not None:
            replaced += 1
    omap.mark_loaded()
    return omap, replaced


@settings(max_examples=300, deadline=None)
@given(histories(), st.data(), st.randoms(use_true_random=False))
def test_translate_never_loses_and_is_exact_in_segments(h: History, data: st.DataObject, rnd: random.Random) -> None:
    omap, _ = _build(h, rnd if data.draw(st.booleans()) else None)
    mirrored = h.mirrored_records
    for g in range(0, h.log_end + 3):
        t = omap.translate(T, 0, g)
        if not mirrored:
            assert t.method is Method.NO_HISTORY and t.downstream_offset is None
            continue
        d = t.downstream_offset
        assert d is not None
        # (a) no loss: every mirrored record at or after g has a copy at or after d.
        for u in mirrored:
            if u >= g:
                assert h.last_copy(u) >= d, (g, u, t)
        mirrored_end = mirrored[-1] + 1
        if g in h.copies:
            # (b) exact: the copy written last, so no re-reads either.
            assert (d, t.method) == (h.last_copy(g), Method.EXACT)
        elif g >= mirrored_end:
            assert d == max(dd for ds in h.copies.values() for dd in ds) + 1
            assert t.missing == g - mirrored_end
            assert t.method is (Method.EXACT if g == mirrored_end else Method.BEYOND)
        elif g < mirrored[0]:
            assert t.method is Method.BELOW_HISTORY
        else:
            # (c) a gap: one past the last copy of the last record below g.
            below = max(u for u in mirrored if u < g)
            assert (d, t.method) == (h.last_copy(below) + 1, Method.GAP)


@settings(max_examples=300, deadline=None)
@given(histories(), st.data(), st.randoms(use_true_random=False))
def test_reverse_translate_never_loses_and_never_rereads(h: History, data: st.DataObject, rnd: random.Random) -> None:
    omap, replaced = _build(h, rnd if data.draw(st.booleans()) else None)
    mirrored = h.mirrored_records
    held = [s for s in (omap.partition(T, 0).segments() if omap.partition(T, 0) else [])]
    for d in range(0, h.downstream_end + 3):
        t = omap.reverse_translate(T, 0, d)
        if not mirrored:
            assert t.method is Method.NO_HISTORY and t.upstream_offset is None
            continue
        u = t.upstream_offset
        assert u is not None
        consumed = {r for r in mirrored if h.first_copy(r) < d}
        # No loss: a record with no copy below d is at or after u.
        for r in mirrored:
            if r not in consumed:
                assert r >= u, (d, r, t)
        # No re-reads: every record before u has been read; exact whenever d is a held copy,
        # and everywhere when no segment was lost to replacement.
        in_held = any(s.downstream_start <= d < s.downstream_end for s in held)
        if in_held or replaced == 0:
            for r in mirrored:
                if r < u:
                    assert r in consumed, (d, r, t)
            if in_held:
                assert t.method is Method.EXACT


@settings(max_examples=200, deadline=None)
@given(histories(), st.data())
def test_translate_after_prune_never_loses_retained_records(h: History, data: st.DataObject) -> None:
    omap, _ = _build(h)
    log_start = data.draw(st.integers(0, h.downstream_end + 1))
    removed = omap.prune(T, 0, log_start)
    assert all(s.downstream_end <= log_start for s in removed)
    pmap = omap.partition(T, 0)
    assert pmap is None or all(s.downstream_end > log_start for s in pmap.segments())
    for g in range(0, h.log_end + 2):
        t = omap.translate(T, 0, g)
        if t.downstream_offset is None:
            continue
        for u in h.mirrored_records:
            if u >= g and h.last_copy(u) >= log_start:
                assert h.last_copy(u) >= t.downstream_offset, (g, u, t, log_start)
