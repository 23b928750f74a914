"""The driver's scheduler and the task results' one definition, without Spark or a broker."""

from __future__ import annotations

import pyarrow as pa

from sparkmirror.pipeline.driver.scheduler import Scheduler
from sparkmirror.pipeline.executor.results import (
    RESULT_SCHEMA,
    PartitionResult,
    arrow_batches,
    arrow_schema,
    merge_rounds,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_chores_run_when_due_and_every_interval_after() -> None:
    clock, ran = Clock(), []
    s = Scheduler(clock)
    s.every("a", 10, lambda: ran.append("a"), now=True)
    s.every("b", 5, lambda: ran.append("b"))
    assert s.run_due() == ["a"]
    clock.now += 5
    assert s.run_due() == ["b"]
    clock.now += 5
    assert s.run_due() == ["a", "b"]
    assert s.run_due() == []


def test_due_in_moves_only_the_chores_named_sooner_or_later() -> None:
    clock, ran = Clock(), []
    s = Scheduler(clock)
    s.every("refresh", 600, lambda: ran.append("refresh"))
    s.every("checkpoints", 1, lambda: ran.append("checkpoints"), now=True)
    s.due_in(5, "refresh")  # a failed refresh is tried again after the back-off, not its interval
    assert s.run_due() == ["checkpoints"]
    clock.now += 5
    assert s.run_due() == ["refresh", "checkpoints"]


def test_a_chore_waiting_for_its_condition_keeps_its_turn() -> None:
    clock, running = Clock(), [False]
    s = Scheduler(clock)
    s.every("checkpoints", 60, lambda: None, now=True, when=lambda: running[0])
    clock.now += 30
    assert s.run_due() == []
    running[0] = True  # the query started: the first pass runs at once, not an interval later
    assert s.run_due() == ["checkpoints"]


def test_a_failing_chore_is_not_run_again_before_its_next_turn() -> None:
    clock = Clock()
    s = Scheduler(clock)
    calls = []

    def boom() -> None:
        calls.append(1)
        raise RuntimeError("cluster down")

    s.every("c", 10, boom, now=True)
    for _ in range(2):
        try:
            s.run_due()
        except RuntimeError:
            pass
    assert calls == [1]


def test_result_rows_round_trip_through_arrow_with_the_schema_spark_is_given() -> None:
    r = PartitionResult(
        "t",
        3,
        10,
        100,
        5,
        14,
        0,
        9,
        0,
        1_700_000_000_000,
        1_699_999_999_000,
        1_700_000_000_100,
        1_700_000_000_300,
        5_000,
        7_000,
        None,
        ((5, 0, 10),),
        "host:1",
    )
    (batch,) = list(arrow_batches([r]))
    assert batch.schema == arrow_schema()
    assert [f.name for f in batch.schema] == [part.split(" ")[0] for part in RESULT_SCHEMA.split(", ")]
    assert batch.schema.field("partition").type == pa.int32()
    assert PartitionResult.from_row(batch.to_pylist()[0]) == r


def _piece(first: int, last: int, segments: tuple[tuple[int, int, int], ...], writer: str) -> PartitionResult:
    n = last - first + 1
    return PartitionResult(
        "t", 0, n, n * 10, first, last, segments[0][1], segments[-1][1] + segments[-1][2] - 1, 0,
        1_000 + last, 1_000 + first, 2_000 + first, 3_000 + last, n, 2 * n, None, segments, writer,
    )  # fmt: skip


def test_results_of_rounds_are_one_per_partition_as_if_one_job() -> None:
    # Round 2 extended round 1's segment (its tail) and started another after a gap.
    first = _piece(100, 149, ((90, 10, 60),), "w1")
    second = _piece(150, 199, ((90, 10, 100), (180, 200, 20)), "w2")
    other = _piece(0, 9, ((0, 0, 10),), "w1")
    other = PartitionResult(**{**other.__dict__, "partition": 1})
    merged = {r.partition: r for r in merge_rounds([first, other, second])}
    assert merged[1] == other
    m = merged[0]
    assert (m.records, m.bytes, m.first_offset, m.last_offset) == (100, 1_000, 100, 199)
    assert (m.first_target_offset, m.last_target_offset) == (10, 219)
    assert (m.min_timestamp_ms, m.max_timestamp_ms, m.read_at_ms, m.acked_at_ms) == (1_100, 1_199, 2_100, 3_199)
    assert (m.age_sum_ms, m.latency_sum_ms, m.error, m.writer) == (100, 200, None, "w2")
    assert m.segments == ((90, 10, 100), (180, 200, 20))


def test_an_empty_piece_does_not_hide_a_round_with_records_and_a_refusal_is_kept() -> None:
    empty = PartitionResult("t", 0, 0, 0, -1, -1, -1, -1, 0, -1, -1, 0, 0, 0, 0, None, (), "w1")
    refused = PartitionResult(**{**_piece(5, 9, ((5, 0, 5),), "w2").__dict__, "error": "refused"})
    m = merge_rounds([empty, refused])[0]
    assert (m.first_offset, m.first_target_offset, m.min_timestamp_ms, m.read_at_ms) == (5, 0, 1_005, 2_005)
    assert m.error == "refused"
