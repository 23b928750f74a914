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
