"""PartitionMap.last_written: the segment the writer extends, kept up to date without sorting the history."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sparkmirror.core.offsetmap import PartitionMap, Segment

_op = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 40), st.integers(0, 40), st.integers(1, 5)),
    st.tuples(st.just("discard"), st.integers(0, 40), st.just(0), st.just(0)),
    st.tuples(st.just("prune"), st.integers(0, 45), st.just(0), st.just(0)),
)


def _expected(pm: PartitionMap) -> Segment | None:
    segs = pm.segments()  # by upstream start: the first of equal downstream starts wins, as before
    return max(segs, key=lambda s: s.downstream_start) if segs else None


@given(st.lists(_op, max_size=60))
def test_last_written_is_the_segment_with_the_highest_downstream_start(ops) -> None:  # type: ignore[no-untyped-def]
    pm = PartitionMap("t", 0)
    for op, a, b, n in ops:
        if op == "add":
            pm.add(Segment("t", 0, a, b, n))
        elif op == "discard":
            pm.discard(a)
        else:
            pm.prune(a)
        assert pm.last_written() == _expected(pm)


def test_extending_the_last_segment_keeps_it_last() -> None:
    pm = PartitionMap("t", 0)
    pm.add(Segment("t", 0, 0, 0, 10))
    pm.add(Segment("t", 0, 10, 11, 5))
    pm.add(Segment("t", 0, 10, 11, 9))  # the writer extends the last segment under its key
    assert pm.last_written() == Segment("t", 0, 10, 11, 9)


def _translations(pm: PartitionMap) -> list[object]:
    out: list[object] = [pm.upstream_end()]
    if len(pm):
        for x in range(0, 60):
            t, r = pm.translate(x), pm.reverse_translate(x)
            out += [(t.downstream_offset, t.method), (r.upstream_offset, r.method)]
    return out


_write = st.one_of(
    st.tuples(st.just("extend"), st.integers(1, 4), st.just(0)),
    st.tuples(st.just("next"), st.integers(0, 2), st.integers(1, 5)),
    st.tuples(st.just("replay"), st.integers(0, 10), st.integers(1, 5)),
)


@given(st.lists(_write, max_size=40))
def test_a_grown_last_segment_translates_as_a_rebuilt_map(writes) -> None:  # type: ignore[no-untyped-def]
    """The writer extends the last segment in place; translation must equal a rebuild from scratch."""
    pm = PartitionMap("t", 0)
    pm.add(Segment("t", 0, 0, 0, 1))
    for op, a, b in writes:
        last = pm.last_written()
        assert last is not None
        if op == "extend":
            pm.add(Segment("t", 0, last.upstream_start, last.downstream_start, last.count + a))
        elif op == "next":  # a gap of a offsets on either side, then a new run
            pm.add(Segment("t", 0, last.upstream_end + a, last.downstream_end + a, b))
        else:  # a replay from an earlier upstream offset, written after everything else
            pm.add(Segment("t", 0, max(0, last.upstream_end - a), last.downstream_end, b))
        pm.translate(0)  # views built (or folded in place) after each write, as the emitter does
    rebuilt = PartitionMap("t", 0)
    for segment in pm.segments():
        rebuilt.add(segment)
    rebuilt._dirty = True  # noqa: SLF001 - force the from-scratch build the in-place paths must match
    assert _translations(pm) == _translations(rebuilt)
