"""MM2's history matched record by record (sparkmirror.core.history): replays, gaps, retention,
refusals, resumption, and translation over the resulting map equal to the last copy of every record."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkmirror.core.history import (
    HistoryAmbiguous,
    HistoryMatcher,
    HistoryMismatch,
    record_digest,
)
from sparkmirror.core.offsetmap import Method, OffsetMap, Segment

T, R = "orders", "A.orders"


def dig(content: str) -> bytes:
    return record_digest(None, content.encode(), 0, None)


def source_of(offsets: Iterable[int]) -> list[tuple[int, bytes]]:
    """Source records at ``offsets`` whose content is their offset."""
    return [(o, dig(f"s{o}")) for o in offsets]


def remote_of(
    copies: Sequence[int | str], start: int = 0, offsets: Sequence[int] | None = None
) -> list[tuple[int, bytes]]:
    """Remote records copying source offsets ``copies`` (a str is a record of its own)."""
    offs = list(offsets) if offsets is not None else list(range(start, start + len(copies)))
    return [(d, dig(c if isinstance(c, str) else f"s{c}")) for d, c in zip(offs, copies, strict=True)]


def match(
    source: list[tuple[int, bytes]], remote: list[tuple[int, bytes]], **kw: object
) -> tuple[list[Segment], HistoryMatcher]:
    m = HistoryMatcher(iter(source), topic=T, partition=0, remote_topic=R, **kw)  # type: ignore[arg-type]
    out: list[Segment] = []
    for d, dg in remote:
        out += m.push(d, dg)
    out += m.finish()
    return out, m


def loaded(segments: Iterable[Segment]) -> OffsetMap:
    om = OffsetMap(loaded=True)
    om.add_all(segments)
    return om


def last_copies(remote_copies: Sequence[int], remote_offsets: Sequence[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for u, d in zip(remote_copies, remote_offsets, strict=True):
        out[u] = d  # the later one wins
    return out


def seg(u: int, d: int, n: int) -> Segment:
    return Segment(T, 0, u, d, n)


def test_a_plain_copy_is_one_segment() -> None:
    segs, m = match(source_of(range(100)), remote_of(list(range(100))))
    assert segs == [seg(0, 0, 100)]
    assert m.stats.matched == 100 and m.stats.replayed == 0


def test_a_replay_after_a_restart_is_a_later_segment_and_translation_takes_the_last_copy() -> None:
    copies = [*range(5, 10), *range(7, 13)]  # s5..s9, then MM2 restarted from s7
    segs, m = match(source_of(range(5, 13)), remote_of(copies))
    assert segs == [seg(5, 0, 5), seg(7, 5, 6)]
    assert m.stats.replayed == 3
    om = loaded(segs)
    truth = last_copies(copies, range(len(copies)))
    for g in range(5, 13):
        t = om.translate(T, 0, g)
        assert (t.downstream_offset, t.method) == (truth[g], Method.EXACT)


def test_a_replay_from_the_same_start_replaces_the_earlier_segment_as_the_writers_replays_do() -> None:
    copies = [5, 6, 7, 5, 6, 7, 8]
    segs, _ = match(source_of(range(5, 9)), remote_of(copies))
    assert segs == [seg(5, 0, 3), seg(5, 3, 4)]
    om = loaded(segs)
    assert len(om) == 1  # same key: the later one holds
    assert [om.translate(T, 0, g).downstream_offset for g in (5, 6, 7, 8)] == [3, 4, 5, 6]


def test_source_gaps_are_skipped_offsets() -> None:
    offsets = [0, 1, 2, 5, 6, 9]  # compaction, transaction markers
    segs, m = match(source_of(offsets), remote_of(offsets))
    assert segs == [seg(0, 0, 3), seg(5, 3, 2), seg(9, 5, 1)]
    om = loaded(segs)
    assert om.translate(T, 0, 3).method is Method.GAP and om.translate(T, 0, 3).downstream_offset == 3
    assert m.stats.source_skipped == 0


def test_source_records_the_remote_lacks_are_passed_over() -> None:
    copies = [0, 1, 2, 3, 6, 7, 8, 9]  # aborted 4, 5 not copied, or compacted away on the remote
    segs, m = match(source_of(range(10)), remote_of(copies, offsets=[0, 1, 2, 3, 6, 7, 8, 9]))
    assert segs == [seg(0, 0, 4), seg(6, 6, 4)]
    assert m.stats.source_skipped == 2


def test_remote_gaps_start_a_new_segment() -> None:
    segs, _ = match(source_of(range(4)), remote_of([0, 1, 2, 3], offsets=[10, 11, 13, 14]))
    assert segs == [seg(0, 10, 2), seg(2, 13, 2)]


def test_a_record_that_copies_nothing_is_refused_naming_both_partitions_and_offsets() -> None:
    remote = remote_of([0, 1, 2, "unrelated", 3])
    with pytest.raises(HistoryMismatch) as err:
        match(source_of(range(5)), remote)
    text = str(err.value)
    assert "A.orders[0] offset 3" in text and "orders[0]" in text and "expected was offset 3" in text
    assert "nothing was guessed" in text


def test_a_replay_further_back_than_the_window_is_refused_and_names_the_window() -> None:
    copies = [*range(0, 20), *range(5, 25)]  # goes back 15 records
    with pytest.raises(HistoryMismatch, match=r"window \(10 source records\)"):
        match(source_of(range(25)), remote_of(copies), window=10)
    segs, _ = match(source_of(range(25)), remote_of(copies), window=15)
    assert segs == [seg(0, 0, 20), seg(5, 20, 20)]


def test_copies_of_records_removed_from_the_source_are_counted_and_the_map_starts_where_both_hold_records() -> None:
    # The source's retention removed offsets 0..99; the remote still holds copies of 50..199.
    copies = list(range(50, 200))
    segs, m = match(source_of(range(100, 200)), remote_of(copies))
    assert segs == [seg(100, 50, 100)]
    assert m.stats.gone == 50
    om = loaded(segs)
    below = om.translate(T, 0, 60)
    assert below.method is Method.BELOW_HISTORY and below.downstream_offset == 50
    assert om.translate(T, 0, 100).downstream_offset == 50


def test_source_records_older_than_the_remote_are_skipped() -> None:
    segs, m = match(source_of(range(200)), remote_of(list(range(50, 200)), start=7))
    assert segs == [seg(50, 7, 150)]
    assert m.stats.source_skipped == 50


def test_logs_that_do_not_overlap_are_refused() -> None:
    with pytest.raises(HistoryMismatch, match="do not overlap within the window"):
        match(source_of(range(5, 100)), remote_of([f"x{i}" for i in range(30)]), window=20)


def test_a_first_remote_record_that_copies_nothing_is_refused_when_the_source_lost_no_record() -> None:
    with pytest.raises(HistoryMismatch, match=r"A.orders\[0\] offset 0 copies none of the first 100 records"):
        match(source_of(range(100)), remote_of(["unrelated", 0, 1, 2]))


def test_copies_past_upto_are_dropped_so_no_history_key_reaches_sparkmirrors() -> None:
    # MM2 copied 0..19 and committed 14 (killed); sparkmirror starts at 15: its copies of 15.. win.
    segs, m = match(source_of(range(20)), remote_of(list(range(20))), upto=15)
    assert segs == [seg(0, 0, 15)]
    assert m.stats.beyond == 5
    # ... and a replay after that below upto is still indexed (MM2 restarted from 10, then stopped).
    segs, _ = match(source_of(range(20)), remote_of([*range(20), *range(10, 15)]), upto=15)
    assert segs == [seg(0, 0, 15), seg(10, 20, 5)]


def test_identical_records_are_told_apart_by_the_records_after_them() -> None:
    source = [(0, dig("a")), (1, dig("b")), (2, dig("a")), (3, dig("c")), (4, dig("d"))]
    # Copies 0 1 2 3 4, then a replay from 2: "a" is 0 or 2 behind, "c" after it says 2.
    remote = [(d, dig(c)) for d, c in enumerate(["a", "b", "a", "c", "d", "a", "c", "d"])]
    segs, _ = match(source, remote)
    assert segs == [seg(0, 0, 5), seg(2, 5, 3)]


def test_identical_records_that_nothing_tells_apart_are_refused() -> None:
    source = [(0, dig("a")), (1, dig("a")), (2, dig("b"))]
    remote = [(d, dig(c)) for d, c in enumerate(["a", "a", "b", "a"])]  # which "a" was replayed?
    with pytest.raises(HistoryAmbiguous, match="offsets 0, 1"):
        match(source, remote)


def test_a_resumed_run_continues_where_the_first_stopped() -> None:
    copies = [*range(0, 30), *range(20, 50)]
    remote = remote_of(copies)
    whole, _ = match(source_of(range(50)), remote)
    first, _ = match(source_of(range(50)), remote[:35])  # interrupted after remote offset 34
    last = max(first, key=lambda s: s.downstream_start)
    rest, _ = match(
        [s for s in source_of(range(50)) if s[0] >= last.upstream_end - 10],
        remote[last.downstream_end :],
        expected=last.upstream_end,
        window=10,
    )
    truth = last_copies(copies, range(len(copies)))
    for segs in (whole, [*first, *rest]):
        om = loaded(segs)
        assert {g: om.translate(T, 0, g).downstream_offset for g in range(50)} == truth


def test_max_run_splits_runs_without_changing_translation() -> None:
    segs, _ = match(source_of(range(10)), remote_of(list(range(10))), max_run=4)
    assert segs == [seg(0, 0, 4), seg(4, 4, 4), seg(8, 8, 2)]


def mm2_history(rng: random.Random, n: int, window: int) -> tuple[list[int], list[int], list[int], int]:
    """A source with gaps, and what MM2 writes of it with restarts (each resumes from its last
    commit, commits only grow) and remote gaps; returns source offsets, copies, remote offsets and
    the final commit + 1 (where sparkmirror starts)."""
    source: list[int] = []
    o = 0
    while len(source) < n:
        source.append(o)
        o += 1 + (rng.random() < 0.05) * rng.randint(1, 3)
    copies: list[int] = []
    committed = 0  # index into source of the next record to copy after a restart
    i = 0
    while i < len(source):
        copies.append(source[i])
        i += 1
        if rng.random() < 0.1:
            committed = max(committed, min(i, rng.randint(max(0, i - window), i)))
        if rng.random() < 0.03:  # killed: resumes from its last commit (within the window here)
            committed = max(committed, i - window)
            i = committed
    d, offsets = 0, []
    for _ in copies:
        offsets.append(d)
        d += 1 + (rng.random() < 0.03)
    return source, copies, offsets, source[committed] if committed < len(source) else source[-1] + 1


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.integers(5, 300), st.integers(1, 40))
def test_translation_after_matching_is_the_last_copy_of_every_record(seed: int, n: int, window: int) -> None:
    rng = random.Random(seed)
    source, copies, offsets, _end = mm2_history(rng, n, window)
    segs, m = match(source_of(source), remote_of(copies, offsets=offsets), window=window, max_run=rng.randint(1, 50))
    assert m.stats.matched == len(copies)
    om = loaded(segs)
    for g, d in last_copies(copies, offsets).items():
        t = om.translate(T, 0, g)
        assert (t.downstream_offset, t.method) == (d, Method.EXACT), (g, segs)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32), st.integers(5, 300))
def test_history_below_upto_with_sparkmirrors_segments_after_it_translates_every_offset_exactly(
    seed: int, n: int
) -> None:
    rng = random.Random(seed)
    source, copies, offsets, adopted = mm2_history(rng, n, 30)
    e = offsets[-1] + 1
    segs, _ = match(source_of(source), remote_of(copies, offsets=offsets), window=30, upto=adopted)
    assert all(s.upstream_end <= adopted for s in segs)
    # sparkmirror copies from the adopted offset on, after everything MM2 wrote (written first).
    ours = [i for i, u in enumerate(source) if u >= adopted]
    spark = [Segment(T, 0, source[i], e + k, 1) for k, i in enumerate(ours)]
    om = OffsetMap(loaded=True)
    om.add_all(spark)
    om.add_all(segs)  # index-history runs later, below it
    truth = last_copies(copies, offsets)
    truth.update({source[i]: e + k for k, i in enumerate(ours)})
    for g, d in truth.items():
        t = om.translate(T, 0, g)
        assert (t.downstream_offset, t.method) == (d, Method.EXACT), (g, segs)


def test_after_a_refusal_the_run_matched_before_it_can_still_be_closed() -> None:
    m = HistoryMatcher(iter(source_of(range(5))), topic=T, partition=0, remote_topic=R)
    for d, dg in remote_of([0, 1, 2]):
        assert m.push(d, dg) == []
    with pytest.raises(HistoryMismatch):
        m.push(3, dig("unrelated"))
    assert m.close_run() == [seg(0, 0, 3)]


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32), st.integers(5, 200), st.sampled_from([0, 1]))
def test_the_flows_fold_over_history_and_its_own_segments_changes_no_translation(seed: int, n: int, gap: int) -> None:
    """The running flow folds its map into chains every 10 s; with history segments in it (written
    later, below its own) every offset translates, and every remote offset reverse-translates, as before.
    ``gap`` 1: exactly-once batches (a commit marker after each)."""
    rng = random.Random(seed)
    source, copies, offsets, adopted = mm2_history(rng, n, 30)
    segs, _ = match(source_of(source), remote_of(copies, offsets=offsets), window=30, upto=adopted)
    ours = [u for u in source if u >= adopted]
    spark: list[Segment] = []
    d = offsets[-1] + 1
    i = 0
    while i < len(ours):  # batches of consecutive source offsets
        k = 1
        while i + k < len(ours) and k < rng.randint(1, 8) and ours[i + k] == ours[i] + k:
            k += 1
        spark.append(Segment(T, 0, ours[i], d, k))
        d += k + gap
        i += k
    om = OffsetMap(loaded=True)
    om.add_all(spark)
    om.add_all(segs)
    before = {g: om.translate(T, 0, g) for g in range(source[-1] + 2)}
    back = {x: om.reverse_translate(T, 0, x) for x in range(d + 1)}
    om.fold(max_batches=4)
    assert {g: om.translate(T, 0, g) for g in before} == before
    assert {x: om.reverse_translate(T, 0, x) for x in back} == back


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32), st.integers(5, 200))
def test_reverse_translation_over_history_loses_no_record(seed: int, n: int) -> None:
    """Failback from a position d in MM2's range: every record without a copy below d is at or after
    the upstream position (invariant G's no-loss side; a replay from the same start, which replaces the
    earlier segment as the writer's own replays do, may cost re-reads)."""
    rng = random.Random(seed)
    source, copies, offsets, _end = mm2_history(rng, n, 30)
    segs, _ = match(source_of(source), remote_of(copies, offsets=offsets), window=30)
    om = loaded(segs)
    for x in range(offsets[-1] + 2):
        below = {u for u, o in zip(copies, offsets, strict=True) if o < x}
        unread = [u for u in source if u not in below]
        u = om.reverse_translate(T, 0, x).upstream_offset
        assert u is not None
        if unread:
            assert u <= min(unread), (x, u, min(unread))


def _records(contents: dict[int, str]) -> list[tuple[int, bytes]]:
    return [(o, dig(c)) for o, c in sorted(contents.items())]


def test_a_transaction_aborted_then_written_again_is_refused_not_mapped_to_the_aborted_copy() -> None:
    """The source read read_uncommitted holds an aborted A B C and the same A B C committed after it; an
    MM2 that read read_committed copied only the second: which the remote's copies are of is not known."""
    source = _records({0: "p", 1: "q", 2: "A", 3: "B", 4: "C", 6: "A", 7: "B", 8: "C", 10: "D", 11: "E"})
    remote = [(d, dig(c)) for d, c in enumerate(["p", "q", "A", "B", "C", "D", "E"])]
    with pytest.raises(HistoryAmbiguous, match="offset 6 is identical"):
        match(source, remote)
    # read as MM2 read it (read_committed: no aborted record), it maps exactly
    committed = _records({0: "p", 1: "q", 6: "A", 7: "B", 8: "C", 10: "D", 11: "E"})
    segments, _ = match(committed, remote)
    om = loaded(segments)
    assert [om.translate(T, 0, g).downstream_offset for g in (6, 7, 8, 10)] == [2, 3, 4, 5]


def test_a_duplicate_whose_first_copy_the_remote_lacks_is_refused() -> None:
    # a producer's retry wrote k=V twice on the source; a compacted remote kept only the later copy
    source = _records({0: "x", 1: "kV", 2: "kV", 3: "z"})
    with pytest.raises(HistoryAmbiguous):
        match(source, [(0, dig("x")), (1, dig("kV")), (2, dig("z"))])


def test_a_remote_out_of_the_sources_order_is_refused() -> None:
    source = source_of(range(10))
    with pytest.raises(HistoryMismatch, match="passed over before"):
        match(source, remote_of([0, 1, 2, 3, 4, 5, 7, 6, 8, 9]))


def test_a_remote_that_matches_nothing_is_refused_even_when_the_source_lost_records() -> None:
    source = source_of(range(50, 200))  # retention removed 0..49
    with pytest.raises(HistoryMismatch, match="none of its 150 records copies"):
        match(source, remote_of([f"other{i}" for i in range(150)]))
