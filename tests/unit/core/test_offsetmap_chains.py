"""Chains: consecutive batches of a partition folded into one record and one array.

The property at the heart of it: a map whose segments are folded into chains (at any moment, any
number of times, and with the fold's tombstones lost to a crash) translates and reverse-translates
every offset exactly as the same map unfolded, through replays, gaps, pruning and a reload from the
topic's records."""

from __future__ import annotations

import sys
import time
import tracemalloc
from array import array
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkmirror.core import Chain, FormatError, Method, OffsetChain, OffsetMap, OffsetMapError, Segment
from sparkmirror.core.formats import decode_offset_map_key
from sparkmirror.core.offsetmap import Fold

T = "orders"


def _eos(n: int, batch: int = 5, u0: int = 0, d0: int = 0, gap: int = 1) -> list[Segment]:
    """``n`` exactly-once batches: each starts upstream at the last end, downstream past the marker."""
    return [Segment(T, 0, u0 + i * batch, d0 + i * (batch + gap), batch) for i in range(n)]


def _check_chain_index(omap: OffsetMap) -> None:
    """The partition's downstream index of chains lists the chains held, as they are now, and (W1)
    no two of them share a downstream offset, so the index is write order."""
    pm = omap.partition(T, 0)
    if pm is None:
        return
    chains = sorted(pm.chains(), key=lambda c: c.downstream_start)
    assert pm._chain_index == sorted((c.downstream_end, c.key) for c in chains), "stale chain index"
    assert all(a.downstream_end <= b.downstream_start for a, b in zip(chains, chains[1:], strict=False)), chains
    assert pm._chain_overlaps == 0


def _answers(omap: OffsetMap, u_max: int, d_max: int) -> tuple[list[tuple], list[tuple]]:  # type: ignore[type-arg]
    forward = [(t.downstream_offset, t.method, t.missing) for t in (omap.translate(T, 0, g) for g in range(u_max))]
    reverse = [
        (t.upstream_offset, t.method, t.missing) for t in (omap.reverse_translate(T, 0, d) for d in range(d_max))
    ]
    return forward, reverse


# -- the record ---------------------------------------------------------------------------------


def test_chain_record_round_trip_in_4_and_8_byte_ends() -> None:
    for ends, width in ((array("i", [3, 7, 8]), 4), (array("q", [1, 2**40]), 8)):
        rec = OffsetChain(T, 2, 100, 100, 500, 1, ends, 1234)
        value = rec.value_bytes()
        assert len(value) == 40 + len(ends) * width
        back = OffsetChain.decode(rec.key_bytes(), value)
        assert back == rec and back.ends.itemsize == width
        assert decode_offset_map_key(rec.key_bytes()) == (1, T, 2, 100)
    seg_key = Segment(T, 2, 7, 9, 1).to_record(0).key_bytes()
    assert decode_offset_map_key(seg_key) == (0, T, 2, 7)


def test_chain_ends_are_little_endian_on_the_wire() -> None:
    value = OffsetChain(T, 0, 0, 0, 0, 1, array("i", [1, 258]), 0).value_bytes()
    assert value[40:] == b"\x01\x00\x00\x00\x02\x01\x00\x00"


def test_damaged_chain_records_say_which_chain_and_what() -> None:
    rec = OffsetChain(T, 3, 10, 10, 20, 1, array("i", [2, 4]), 0)
    key, value = rec.key_bytes(), rec.value_bytes()
    with pytest.raises(FormatError, match=r"OffsetChain orders\[3\] chain_start=10 value: 47 bytes where"):
        OffsetChain.decode(key, value[:-1])
    with pytest.raises(FormatError, match=r"orders\[3\] chain_start=10 value: truncated"):
        OffsetChain.decode(key, value[:20])
    with pytest.raises(FormatError, match="unknown version 7"):
        OffsetChain.decode(key, b"\x00\x07" + value[2:])
    with pytest.raises(FormatError, match="width 5 is neither 4 nor 8"):
        OffsetChain.decode(key, value[:34] + b"\x00\x05" + value[36:])
    with pytest.raises(FormatError, match="0 batches"):
        OffsetChain.decode(key, value[:36] + b"\x00\x00\x00\x00")
    with pytest.raises(FormatError, match="first end=0"):
        OffsetChain.decode(key, value[:40] + b"\x00" * 8)
    with pytest.raises(FormatError, match=r"offset map key: unknown version 9 \(this build reads versions 0"):
        decode_offset_map_key(b"\x00\x09" + key[2:])
    with pytest.raises(FormatError, match="OffsetChain orders"):
        OffsetMap().apply_record(key, value[:-4])


def test_chain_whose_ends_do_not_rise_refuses_to_translate_naming_it() -> None:
    rec = OffsetChain(T, 1, 50, 50, 0, 1, array("i", [5, 9, 9, 12]), 0)
    omap = OffsetMap()
    omap.apply_record(rec.key_bytes(), rec.value_bytes())  # the load reads only the header
    omap.mark_loaded()
    with pytest.raises(OffsetMapError, match=r"chain orders\[1\] at upstream 50 is damaged: batch 2 ends at 9"):
        omap.translate(T, 1, 55)


# -- the chain ----------------------------------------------------------------------------------


def test_chain_from_segments_holds_them_exactly() -> None:
    segs = [Segment(T, 0, 10, 100, 3), Segment(T, 0, 13, 105, 1), Segment(T, 0, 14, 108, 4)]
    chain = Chain.from_segments(segs)
    assert (chain.key, chain.gap, list(chain.ends)) == (10, 2, [3, 4, 8])
    assert chain.segments() == segs
    assert (chain.upstream_end, chain.downstream_end) == (18, 112)
    assert [chain.downstream_of(g) for g in range(10, 18)] == [100, 101, 102, 105, 108, 109, 110, 111]
    assert all(chain.covers(s) for s in segs) and not chain.covers(Segment(T, 0, 14, 108, 3))
    assert chain.trimmed(1) == Chain(T, 0, 10, 13, 105, 2, array("i", [1, 5]))
    with pytest.raises(OffsetMapError, match="does not continue"):
        chain.extended([Segment(T, 0, 18, 113, 1)])  # gap 1, the chain's is 2
    with pytest.raises(OffsetMapError, match="does not continue"):
        chain.extended([Segment(T, 0, 19, 114, 1)])  # an upstream hole


def test_fold_leaves_the_last_segment_and_starts_a_new_chain_when_full() -> None:
    omap = OffsetMap()
    omap.add_all(_eos(10))
    folds = omap.fold(max_batches=4)
    assert [(f.chain.key, len(f.chain)) for f in folds if f.chain] == [(0, 4), (20, 4)]
    pm = omap.partition(T, 0)
    assert pm is not None and len(pm) == 10 and [s.upstream_start for s in pm._segments.values()] == [40, 45]
    assert pm.last_written() == Segment(T, 0, 45, 54, 5)
    omap.add_all(_eos(3, u0=50, d0=60))
    folds = omap.fold(max_batches=4)
    # The full chains stay; the segments left make a new chain (the last one written excepted).
    assert [(f.chain.key, len(f.chain)) for f in folds if f.chain] == [(40, 4)]
    omap.add(Segment(T, 0, 65, 80, 5))  # gap 3 (an aborted attempt's records and marker)
    omap.add(Segment(T, 0, 70, 88, 2))
    folds = omap.fold(max_batches=4)
    assert [(f.chain.key, len(f.chain), f.chain.gap) for f in folds if f.chain] == [(60, 2, 3)]


def test_fold_grows_the_open_chain_under_its_key() -> None:
    omap = OffsetMap()
    omap.add_all(_eos(3))
    [first] = omap.fold()
    assert first.chain is not None and len(first.chain) == 2
    omap.add_all(_eos(3, u0=15, d0=18))
    [grown] = omap.fold()
    assert grown.chain is not None and grown.chain.key == 0 and len(grown.chain) == 5
    assert [s.upstream_start for s in grown.replaced] == [10, 15, 20]


def test_a_crash_between_chain_and_tombstones_translates_the_same_and_is_tidied_by_the_next_fold() -> None:
    segs = _eos(20, batch=3)
    plain = OffsetMap(loaded=True)
    plain.add_all(segs)
    folded = OffsetMap(loaded=True)
    folded.add_all(segs)
    [fold] = folded.fold()
    assert fold.chain is not None
    crashed = OffsetMap(loaded=True)
    crashed.add_all(segs)
    crashed.add_chain(fold.chain)  # the chain is durable; no tombstone reached the topic
    want = _answers(plain, 70, 90)
    assert _answers(folded, 70, 90) == want
    assert _answers(crashed, 70, 90) == want
    [tidy] = crashed.fold()
    assert tidy.chain is None and list(tidy.replaced) == segs[:-1]
    assert _answers(crashed, 70, 90) == want


def test_a_replay_of_a_chained_batch_replaces_it_like_a_segment() -> None:
    segs = _eos(6)
    plain = OffsetMap(loaded=True)
    folded = OffsetMap(loaded=True)
    plain.add_all(segs)
    folded.add_all(segs)
    folded.fold()
    replay = Segment(T, 0, 10, 40, 2)  # upstream 10.. written again, shorter
    assert plain.add(replay) == segs[2]
    folded.add(replay)
    assert _answers(folded, 40, 50) == _answers(plain, 40, 50)
    folded.add(Segment(T, 0, 30, 43, 5))
    plain.add(Segment(T, 0, 30, 43, 5))
    assert not [f for f in folded.fold() if f.chain is not None and f.chain.key <= 25]  # broken-out batches stay
    assert _answers(folded, 40, 50) == _answers(plain, 40, 50)


def test_a_replay_from_a_chains_key_is_never_folded_under_that_key() -> None:
    """An exactly-once replay that starts at a chain's first batch breaks the chain (invariant I);
    the chain's record still holds the old copies' batches on the topic, so a fold must not write
    a new chain under its key: compaction would drop the old copies from every reloaded map."""
    plain, folded = OffsetMap(loaded=True), OffsetMap(loaded=True)
    topic: list[tuple[bytes, bytes | None]] = []

    def write(segs: list[Segment]) -> None:
        for s in segs:
            plain.add(s)
            folded.add(s)
            rec = s.to_record(0)
            topic.append((rec.key_bytes(), rec.value_bytes()))

    def fold() -> list[Fold]:
        folds = folded.fold()
        topic.extend((r.key_bytes(), r.value_bytes()) for f in folds if f.chain for r in [f.chain.to_record(0)])
        topic.extend((s.to_record(0).key_bytes(), None) for f in folds for s in f.replaced)
        return folds

    write(_eos(6))  # upstream 0..30 at downstream 0..36
    [first] = fold()
    assert first.chain is not None and first.chain.key == 0
    write(_eos(5, batch=7, d0=40))  # progress lost: a replay from upstream 0 again, in other batches
    assert all(f.chain is None or f.chain.key != 0 for f in fold())
    want = _answers(plain, 40, 85)
    assert _answers(folded, 40, 85) == want
    last = {k: i for i, (k, _v) in enumerate(topic)}  # compacted: the last record of each key
    loaded = OffsetMap()
    for i, (key, value) in enumerate(topic):
        if last[key] == i:
            loaded.apply_record(key, value)
    loaded.mark_loaded()
    assert _answers(loaded, 40, 85) == want
    _check_chain_index(loaded)


def test_the_fold_sees_the_chains_held_after_prunes_discards_and_growth() -> None:
    """The fold finds the open chain through an index of the chains in downstream order: a chain
    dropped (pruned, tombstoned) is not seen, a trimmed or grown one is seen as it is now."""
    omap = OffsetMap()
    omap.add_all(_eos(12))  # batch i: upstream 5i.., downstream 6i..
    omap.fold(max_batches=4)
    pm = omap.partition(T, 0)
    assert pm is not None
    assert [(c.key, len(c)) for c in pm.chains()] == [(0, 4), (20, 4), (40, 3)]
    _check_chain_index(omap)
    # Below downstream 30: all of chain 0 and the first batch of chain 20.
    assert [(c.key, c.upstream_start) for c in omap.prune(T, 0, 30) if isinstance(c, Chain)] == [(0, 0), (20, 25)]
    _check_chain_index(omap)
    assert omap.discard_chain(T, 0, 40) is not None  # its tombstone was read
    _check_chain_index(omap)
    # Segment 55 continued chain 40; with that gone the last chain before it is the trimmed chain
    # 20, which 55 does not continue: a new chain.
    omap.add_all(_eos(2, u0=60, d0=72))
    [fold] = omap.fold(max_batches=4)
    assert fold.chain is not None and (fold.chain.key, len(fold.chain)) == (55, 2)
    _check_chain_index(omap)
    # The next fold grows that chain (held since the last fold), up to the full size.
    omap.add_all(_eos(2, u0=70, d0=84))
    [fold] = omap.fold(max_batches=4)
    assert fold.chain is not None and (fold.chain.key, len(fold.chain)) == (55, 4)
    assert [s.upstream_start for s in fold.replaced] == [65, 70]
    _check_chain_index(omap)
    # Full now: the next run starts a chain of its own.
    omap.add_all(_eos(2, u0=80, d0=96))
    [fold] = omap.fold(max_batches=4)
    assert fold.chain is not None and (fold.chain.key, len(fold.chain)) == (75, 2)
    _check_chain_index(omap)
    assert omap.partition(T, 0) is pm and pm.last_written() == Segment(T, 0, 85, 102, 5)

    # A trimmed open chain is grown as trimmed: its dropped batches do not come back.
    omap = OffsetMap()
    omap.add_all(_eos(6))
    omap.fold()
    omap.prune(T, 0, 12)
    _check_chain_index(omap)
    omap.add_all(_eos(2, u0=30, d0=36))
    [fold] = omap.fold()
    assert fold.chain is not None
    assert (fold.chain.key, fold.chain.upstream_start, fold.chain.downstream_start, len(fold.chain)) == (0, 10, 12, 5)
    _check_chain_index(omap)


def test_chains_written_over_each_other_are_all_looked_at() -> None:
    """Never under W1 (a damaged or foreign topic): chain 100 lies inside chain 0's downstream
    span, so the order of the chains' ends is not write order. The last batch written and the
    open chain are then found among every chain, as without the index."""
    omap = OffsetMap(loaded=True)
    omap.add_chain(Chain(T, 0, 0, 0, 0, 1, array("i", [5, 10])))  # d[0,5) and d[6,11)
    omap.add_chain(Chain(T, 0, 100, 100, 8, 1, array("i", [1])))  # d[8,9), written after 0's last batch
    pm = omap.partition(T, 0)
    assert pm is not None and pm._chain_overlaps == 1
    assert pm.last_written() == Segment(T, 0, 100, 8, 1)
    # Segments continuing chain 0: the last chain written before them is chain 100, which they
    # do not continue, so they make a chain of their own (chain 0 is not grown past chain 100).
    omap.add_all([Segment(T, 0, 10, 12, 5), Segment(T, 0, 15, 18, 5), Segment(T, 0, 20, 24, 5)])
    [fold] = omap.fold()
    assert fold.chain is not None and (fold.chain.key, len(fold.chain)) == (10, 2)
    # Chain 100 gone, the spans are disjoint again and the index is used.
    omap.discard_chain(T, 0, 100)
    assert pm._chain_overlaps == 0
    _check_chain_index(omap)


# -- equivalence, by property -----------------------------------------------------------------


@dataclass
class Run:
    """A writer's operations on one partition and what it would have put on the topic."""

    ops: list[tuple] = field(default_factory=list)  # type: ignore[type-arg]
    u_max: int = 0
    d_max: int = 0


@st.composite
def runs(draw: st.DrawFn) -> Run:
    run = Run()
    reference = OffsetMap()
    upstream_end, downstream = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from("bbbbbbbfp"))
        if kind == "f":
            run.ops.append(("fold", draw(st.integers(2, 5))))
            continue
        if kind == "p":
            run.ops.append(("prune", draw(st.integers(0, downstream + 1))))
            continue
        pm = reference.partition(T, 0)
        if pm is not None and len(pm) and draw(st.integers(0, 9)) == 0:
            # A replay from earlier (at-least-once), or from where an earlier batch began (exactly-once
            # with its progress lost), which may be a chain's key.
            starts = [s.upstream_start for s in pm.segments()]
            start = draw(st.one_of(st.integers(0, upstream_end), st.sampled_from(starts)))
        else:
            start = upstream_end
        # Upstream records of the batch: mostly consecutive, sometimes a hole (compaction, source markers).
        us, u = [], start
        for _ in range(draw(st.integers(1, 4))):
            u += draw(st.sampled_from([0, 0, 0, 0, 1, 2]))
            us.append(u)
            u += 1
        segs: list[Segment] = []
        d = downstream
        for x in us:
            if segs and segs[-1].upstream_end == x and segs[-1].downstream_end == d:
                last = segs[-1]
                segs[-1] = Segment(T, 0, last.upstream_start, last.downstream_start, last.count + 1)
            else:
                segs.append(Segment(T, 0, x, d, 1))
            d += 1
        tail = pm.last_written() if pm is not None else None
        if (
            tail is not None
            and tail.upstream_end == segs[0].upstream_start
            and tail.downstream_end == segs[0].downstream_start
        ):
            segs[0] = Segment(T, 0, tail.upstream_start, tail.downstream_start, tail.count + segs[0].count)
        for s in segs:
            reference.add(s)
        run.ops.append(("write", segs))
        upstream_end = max(upstream_end, us[-1] + 1)
        downstream = d + draw(st.sampled_from([1, 1, 1, 1, 0, 3]))  # the commit marker, none, or an abort
    run.u_max, run.d_max = upstream_end + 3, downstream + 3
    return run


def _topic_records(changed: list[Segment | Chain], omap: OffsetMap) -> list[tuple[bytes, bytes | None]]:
    out: list[tuple[bytes, bytes | None]] = []
    for item in changed:
        if isinstance(item, Segment):
            out.append((item.to_record(0).key_bytes(), None))
        else:
            pm = omap.partition(T, 0)
            rec = item.to_record(0)
            out.append((rec.key_bytes(), rec.value_bytes() if pm is not None and pm.holds_record(item) else None))
    return out


@settings(max_examples=400, deadline=None)
@given(runs(), st.data())
def test_folded_map_translates_every_offset_as_the_unfolded_one(run: Run, data: st.DataObject) -> None:
    plain, folded = OffsetMap(loaded=True), OffsetMap(loaded=True)
    topic: list[tuple[bytes, bytes | None]] = []  # what the store would have written, in order
    crash = data.draw(st.booleans())
    for op in run.ops:
        if op[0] == "write":
            for s in op[1]:
                plain.add(s)
                folded.add(s)
                rec = s.to_record(0)
                topic.append((rec.key_bytes(), rec.value_bytes()))
        elif op[0] == "fold":
            # As the store does: the chains, then the tombstones, each held once durable; with
            # ``crash`` the tombstones may be lost (the process goes on, or restarts below).
            folds: list[Fold] = folded.fold(op[1], apply=False)
            topic += [(r.key_bytes(), r.value_bytes()) for f in folds if f.chain for r in [f.chain.to_record(0)]]
            for f in folds:
                folded.apply_fold(f, chain_only=True)
            if not (crash and data.draw(st.booleans())):
                topic += [(s.to_record(0).key_bytes(), None) for f in folds for s in f.replaced]
                for f in folds:
                    folded.apply_fold(f)
        else:
            plain.prune(T, 0, op[1])
            topic += _topic_records(folded.prune(T, 0, op[1]), folded)
        assert _answers(folded, run.u_max, run.d_max) == _answers(plain, run.u_max, run.d_max), op
        _check_chain_index(folded)
    assert len(folded) >= len(plain)
    # A start reads the topic back (whole, or compacted: the last record of each key, in its place).
    if data.draw(st.booleans()):
        last = {k: i for i, (k, _v) in enumerate(topic)}
        topic = [(k, v) for i, (k, v) in enumerate(topic) if last[k] == i]
    loaded = OffsetMap()
    for key, value in topic:
        loaded.apply_record(key, value)
    loaded.mark_loaded()
    assert _answers(loaded, run.u_max, run.d_max) == _answers(plain, run.u_max, run.d_max)
    _check_chain_index(loaded)


# -- size and speed -----------------------------------------------------------------------------


def test_a_days_batches_of_a_partition_take_about_4_bytes_each_and_translate_fast() -> None:
    batches = 86_400  # a batch a second
    tracemalloc.start()
    omap = OffsetMap(loaded=True)
    for k in range(0, batches, 1024):
        n = min(1024, batches - k)
        omap.add_chain(Chain(T, 0, k * 50, k * 50, k * 51, 1, array("i", range(50, 50 * n + 1, 50))))
    size, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(omap) == batches
    assert size / batches < 8, f"{size / batches:.1f} bytes a batch"
    start = time.perf_counter()
    for g in range(0, batches * 50, 4321):
        assert omap.translate(T, 0, g).downstream_offset == (g // 50) * 51 + g % 50
    for d in range(0, batches * 51, 4321):
        t = omap.reverse_translate(T, 0, d)
        assert t.method is (Method.EXACT if d % 51 < 50 else Method.GAP)
    assert time.perf_counter() - start < 3.0


@pytest.mark.skipif(sys.byteorder != "little", reason="the swap is for big-endian hosts")
def test_decoding_shares_the_bytes_read_without_a_pass_in_python() -> None:
    ends = array("i", range(1, 1_000_001))
    rec = OffsetChain(T, 0, 0, 0, 0, 1, ends, 0)
    key, value = rec.key_bytes(), rec.value_bytes()
    start = time.perf_counter()
    for _ in range(20):
        OffsetChain.decode(key, value)
    assert (time.perf_counter() - start) / 20 < 0.05  # a million batches; a Python loop takes ~50x this
