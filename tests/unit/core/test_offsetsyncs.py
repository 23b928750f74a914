"""Which MM2 offset syncs are written: each run's start, then every ``offset.lag.max`` records, the rest
held at most ``flush_s``."""

from __future__ import annotations

import pytest

from sparkmirror.core.formats import OffsetSync
from sparkmirror.core.offsetmap import Segment
from sparkmirror.core.offsetsyncs import OffsetSyncRule


def _pairs(syncs: list[OffsetSync]) -> list[tuple[int, int]]:
    return [(s.upstream_offset, s.downstream_offset) for s in syncs]


def test_a_run_reported_every_interval_writes_its_start_once_then_every_lag_max_records() -> None:
    rule = OffsetSyncRule(lag_max=100, flush_s=1_000)
    written = []
    # A streaming task's reports: the same run, its count grown by 10 each interval.
    for count in range(10, 1_001, 10):
        written += _pairs(rule.syncs([Segment("t", 0, 500, 700, count)], now=count / 10))
    assert written[0] == (500, 700)
    # Then a sync each time the last one is 100 records stale (MM2's test: d - (synced + 1) >= lag).
    assert written[1:] == [(500 + n - 1, 700 + n - 1) for n in range(110, 1_001, 110)][: len(written) - 1]
    assert 9 <= len(written) <= 11  # not one per report (100 reports)
    for u, d in written:
        assert d - u == 200  # every one a true pair of the run


def test_held_pairs_are_written_once_the_oldest_has_waited_flush_s_and_at_release() -> None:
    rule = OffsetSyncRule(lag_max=100, flush_s=10)
    assert _pairs(rule.syncs([Segment("t", 0, 0, 0, 5)], now=0)) == [(0, 0)]  # (4, 4) held from now on
    assert rule.syncs([Segment("t", 0, 0, 0, 8), Segment("t", 1, 0, 0, 1)], now=1) == [OffsetSync("t", 1, 0, 0)]
    assert rule.syncs([Segment("t", 0, 0, 0, 9)], now=9.9) == []
    assert _pairs(rule.syncs([Segment("t", 1, 0, 0, 3)], now=10)) == [(8, 8), (2, 2)]
    assert rule.syncs([], now=30) == []  # nothing held: nothing more
    assert rule.syncs([Segment("t", 0, 0, 0, 12)], now=31) == []
    assert _pairs(rule.release()) == [(11, 11)]
    assert rule.release() == []


def test_skipped_upstream_offsets_start_a_run_with_a_sync_after_the_last_runs_newest_pair() -> None:
    rule = OffsetSyncRule(lag_max=100, flush_s=1_000)
    rule.syncs([Segment("t", 0, 0, 0, 50)], now=0)
    # Offsets 50..59 compacted away on the source: the next run starts at 60.
    assert _pairs(rule.syncs([Segment("t", 0, 60, 50, 5)], now=1)) == [(49, 49), (60, 50)]


def test_a_run_that_goes_on_upstream_past_a_commit_marker_needs_no_sync_of_its_own() -> None:
    rule = OffsetSyncRule(lag_max=100, flush_s=1_000)
    rule.syncs([Segment("t", 0, 0, 0, 50)], now=0)
    # Exactly once: the next transaction's records start one past the marker downstream.
    assert rule.syncs([Segment("t", 0, 50, 51, 20)], now=1) == []
    assert _pairs(rule.syncs([Segment("t", 0, 70, 72, 40)], now=2)) == [(109, 111)]  # 111 - 1 >= 100


def test_a_downstream_that_goes_back_starts_a_run() -> None:
    rule = OffsetSyncRule(lag_max=100, flush_s=1_000)
    rule.syncs([Segment("t", 0, 0, 500, 10)], now=0)
    assert _pairs(rule.syncs([Segment("t", 0, 10, 0, 1)], now=1)) == [(9, 509), (10, 0)]


def test_a_lag_max_of_zero_writes_every_newer_pair() -> None:
    rule = OffsetSyncRule(lag_max=0, flush_s=1_000)
    assert _pairs(rule.syncs([Segment("t", 0, 0, 0, 1)], now=0)) == [(0, 0)]
    assert _pairs(rule.syncs([Segment("t", 0, 0, 0, 3)], now=1)) == [(2, 2)]
    assert rule.syncs([Segment("t", 0, 0, 0, 3)], now=2) == []  # nothing newer


def test_a_negative_lag_max_is_refused() -> None:
    with pytest.raises(ValueError, match="offset.lag.max"):
        OffsetSyncRule(lag_max=-1, flush_s=1)
