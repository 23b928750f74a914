"""Which MM2 offset syncs are written: each run's start, then every ``offset.lag.max`` records, the rest
held at most ``flush_s``."""

from __future__ import annotations

import bisect
import random

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
    # The run's start, then the newest pair of the first report 100 or more records past the last sync
    # (MM2's test: d - (synced + 1) >= lag): counts 110, 220, ... 990 (not one per report: 100 reports).
    assert written == [(500, 700)] + [(500 + n - 1, 700 + n - 1) for n in range(110, 1_001, 110)]


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


def test_a_sync_is_written_at_exactly_lag_max_records_stale_not_one_before() -> None:
    rule = OffsetSyncRule(lag_max=10, flush_s=1_000)
    assert _pairs(rule.syncs([Segment("t", 0, 0, 0, 1)], now=0)) == [(0, 0)]
    assert rule.syncs([Segment("t", 0, 0, 0, 11)], now=1) == []  # 10 - (0 + 1) = 9
    assert _pairs(rule.syncs([Segment("t", 0, 0, 0, 12)], now=2)) == [(11, 11)]  # 11 - 1 = 10


def test_a_written_held_pair_is_the_last_sync_the_next_one_is_counted_from() -> None:
    rule = OffsetSyncRule(lag_max=10, flush_s=5)
    rule.syncs([Segment("t", 0, 0, 0, 1)], now=0)
    assert rule.syncs([Segment("t", 0, 0, 0, 4)], now=1) == []  # (3, 3) held
    assert _pairs(rule.syncs([], now=6)) == [(3, 3)]  # no report: written when due all the same
    assert rule.syncs([Segment("t", 0, 0, 0, 14)], now=7) == []  # 13 - (3 + 1) = 9
    assert _pairs(rule.syncs([Segment("t", 0, 0, 0, 15)], now=8)) == [(14, 14)]


def test_a_reused_downstream_offset_or_an_upstream_replay_starts_a_run() -> None:
    rule = OffsetSyncRule(lag_max=100, flush_s=1_000)
    rule.syncs([Segment("t", 0, 0, 0, 10)], now=0)
    # Upstream goes on, but downstream offset 9 again: not a continuation.
    assert _pairs(rule.syncs([Segment("t", 0, 10, 9, 1)], now=1)) == [(9, 9), (10, 9)]
    # At least once, a replay: upstream 5 again, written further on downstream.
    assert _pairs(rule.syncs([Segment("t", 0, 5, 20, 3)], now=2)) == [(5, 20)]
    assert _pairs(rule.release()) == [(7, 22)]


def test_after_a_restart_the_run_of_the_map_tail_is_written_then_its_newest_pair() -> None:
    # A new writer (the driver started again) sees a partition's segment extended from the offset map's
    # tail: its start is old. It writes the start, then the newest pair at once when that is stale.
    rule = OffsetSyncRule(lag_max=100, flush_s=1_000)
    assert _pairs(rule.syncs([Segment("t", 0, 1_000, 1_000, 5_000)], now=0)) == [(1_000, 1_000), (5_999, 5_999)]


def _mm2_store(syncs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The syncs MM2's store keeps after reading these in order: a sync below its earliest (a rewind)
    starts it over."""
    store: list[tuple[int, int]] = []
    for u, d in syncs:
        if store and (u < store[0][0] or d < store[0][1]):
            store = []
        store.append((u, d))
    return sorted(store)


def _mm2_translate(store: list[tuple[int, int]], group: int) -> int | None:
    """MM2's translation: the latest sync at or below the group's offset gives its downstream offset if
    the group stands on it, else one past it."""
    i = bisect.bisect_right(store, (group, float("inf"))) - 1
    if i < 0:
        return None
    u, d = store[i]
    return d if u == group else d + 1


def test_mm2_never_translates_a_group_past_its_next_record_random_streams() -> None:
    """Random reports (runs grown, upstream offsets skipped, commit markers, at-least-once replays), then
    a last stretch copied without a replay: MM2's translation of every group from the syncs written is
    at or before the last copy of each record from the group's offset on."""
    rng = random.Random(36)
    for _case in range(150):
        rule = OffsetSyncRule(lag_max=rng.choice([0, 1, 5, 100]), flush_s=rng.choice([0.5, 3, 1_000]))
        copied: dict[int, int] = {}  # upstream offset -> its last copy downstream
        written: list[tuple[int, int]] = []
        up = down = 0
        run: tuple[int, int, int] | None = None
        for step in range(40):
            if run is None or rng.random() < 0.15:  # a new run: skipped offsets, a marker, or a replay
                up = max(0, up + rng.choice([-3, 0, 0, 1, 7]))
                down += rng.choice([0, 1])
                run = (up, down, 0)
            n = rng.randint(0, 30) if step < 39 else 60  # the last report: a stretch past every replay
            run = (run[0], run[1], run[2] + n)
            for i in range(n):
                copied[up + i] = down + i
            up, down = up + n, down + n
            if run[2]:
                written += _pairs(rule.syncs([Segment("t", 0, *run)], now=step))
        written += _pairs(rule.release())
        for u, d in written:
            assert copied[u] >= d  # a true pair: its record was copied there (or again later)
        store = _mm2_store(written)
        lowest_from = {}  # group -> the lowest last copy of a record at or past it (skipped offsets hold none)
        low = None
        for u in range(up - 1, -1, -1):
            if u in copied:
                low = copied[u] if low is None else min(low, copied[u])
            lowest_from[u] = low
        for group in range(up):
            got = _mm2_translate(store, group)
            if got is not None and lowest_from[group] is not None:
                assert got <= lowest_from[group], (group, got, written)
