"""The driver's scheduler and the task results' one definition, without Spark or a broker."""

from __future__ import annotations

import json

import pytest

from sparkmirror.pipeline.driver.scheduler import Scheduler
from sparkmirror.pipeline.executor.results import PartitionResult


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


def test_result_rows_round_trip_through_a_reports_json() -> None:
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
    )
    assert PartitionResult.from_row(json.loads(json.dumps(r.as_row()))) == r


def test_a_result_row_of_another_layout_is_refused():
    """A row's values are positional: one of another length (another version's task) is not misread."""
    r = PartitionResult("t", 0, 1, 2, 3, 3, 4, 4, 0, 5, 5, 6, 7, 1, 2, None, ((3, 4, 1),))
    with pytest.raises(ValueError, match="has 16 values, not 17"):
        PartitionResult.from_row(r.as_row()[:-1])
    named = dict(zip([f"f{i}" for i in range(17)], r.as_row(), strict=True))  # the older, named layout
    with pytest.raises(ValueError, match="has a dict, not 17 values"):
        PartitionResult.from_row(named)  # type: ignore[arg-type]
