"""Exactly-once transaction groups: the assignment of partitions to transactional ids, and which ids a
start fences (sparkmirror.core.transactions)."""

from __future__ import annotations

import random

import pytest

from sparkmirror.core.naming import transactional_id
from sparkmirror.core.transactions import (
    MAX_TASK_PRODUCERS,
    MAX_TASK_TRANSACTION_GROUPS,
    PER_PARTITION,
    default_transaction_groups,
    format_layouts,
    group_key,
    layout_ids,
    layouts_to_fence,
    parse_layouts,
    producers_for,
    transaction_group,
    writer_id,
)


def test_stable_assignment_a_partition_keeps_its_group() -> None:
    """A pure function of (topic, partition, groups): the same on every call and every process."""
    assert transaction_group("orders", 3, 8) == transaction_group("orders", 3, 8)
    # Pinned value: CRC-32, not Python's salted hash(); a change here would move partitions between ids.
    assert [transaction_group("orders", p, 8) for p in range(4)] == [6, 7, 0, 1]
    for p in range(50):
        assert 0 <= transaction_group("t", p, 7) < 7


def test_a_topics_partitions_spread_evenly_and_new_partitions_move_nothing() -> None:
    counts = [0] * 4
    for p in range(40):
        counts[transaction_group("events", p, 4)] += 1
    assert counts == [10, 10, 10, 10]
    before = {p: transaction_group("events", p, 4) for p in range(5)}
    assert before == {p: transaction_group("events", p, 4) for p in range(5)}  # 5 -> 12 partitions: same groups


def test_per_partition_layout_keeps_the_old_ids() -> None:
    assert writer_id("A", "B", "a/b c", 3, PER_PARTITION) == transactional_id("A", "B", "a/b c", 3)
    assert group_key(PER_PARTITION) is None


def test_distinct_ids_per_layout() -> None:
    """No id of one layout is an id of another, whatever the topics are called."""
    grouped = set(layout_ids("A", "B", 4, {})) | set(layout_ids("A", "B", 8, {}))
    assert len(grouped) == 12
    tricky = {"#0-of": 5, "x-#1-of-4": 2, "0-of-4": 1}
    per_partition = set(layout_ids("A", "B", PER_PARTITION, tricky))
    assert len(per_partition) == 8 and not grouped & per_partition
    assert writer_id("A", "B", "t", 5, 4) in grouped
    assert all(i.startswith("sparkmirror-A-B-") for i in grouped | per_partition)  # the documented ACL prefix


def test_layout_record_round_trip_and_unreadable_records() -> None:
    assert parse_layouts(format_layouts({16, 0})) == {0, 16}
    assert format_layouts([8, 8]) == "v1 8"
    for text in (None, "", "v2 4", "v1 ", "v1 x", "v1 -3", "garbage"):
        assert parse_layouts(text) is None


def test_fence_every_layout_that_may_hold_an_open_transaction() -> None:
    """Starts that change the layout and crash anywhere: when a start writes with its layout, every
    layout an earlier start may have written with since its last fencing has been fenced."""
    rng = random.Random(16)
    for _ in range(300):
        record: str | None = None  # nothing on the target: a flow of the per-partition version
        unfenced = {PER_PARTITION} if rng.random() < 0.5 else set()  # layouts that may hold a transaction
        for _start in range(rng.randint(1, 6)):
            current = rng.choice([PER_PARTITION, 2, 4, 8])
            # target.fence: record the union, fence it, record the current layout alone.
            fence = layouts_to_fence(parse_layouts(record), current)
            record = format_layouts(fence)
            if rng.random() < 0.2:
                continue  # crashed while fencing: nothing written with `current` yet
            unfenced -= fence
            assert not unfenced, f"layouts {unfenced} may still hold open transactions"
            record = format_layouts({current})
            unfenced.add(current)  # writes, and may be killed mid-transaction
            if rng.random() < 0.2:
                # Days without a run: the record expired (a running flow renews it every hour), and
                # the broker aborted whatever was open after transaction.max.timeout.ms (15 min at most).
                record, unfenced = None, set()


@pytest.mark.parametrize("groups", [0, -1])
def test_group_count_must_be_positive(groups: int) -> None:
    with pytest.raises(ValueError):
        transaction_group("t", 0, groups)


@pytest.mark.parametrize(
    ("tasks", "partitions", "groups"),
    [
        (2, 8, 4),
        (2, 256, 4),
        (2, 257, 5),
        (2, 1000, 16),
        (2, 10**5, 2 * MAX_TASK_TRANSACTION_GROUPS),
        (1, 1000, 8),
        (0, 1, 2),
    ],
)
def test_the_default_layout_has_a_group_per_so_many_partitions_for_large_flows(
    tasks: int, partitions: int, groups: int
) -> None:
    """Twice the flow's tasks, or one group per 64 partitions (a producer each), at most 8 per task (two
    flows on two cores: a task each, at most 8 groups each), whatever at least once's producers are."""
    assert default_transaction_groups(tasks, partitions) == groups


def test_at_least_once_a_task_has_a_producer_per_so_many_partitions() -> None:
    assert [producers_for(n, 64) for n in (0, 1, 64, 65, 500, 10_000)] == [1, 1, 1, 2, 8, MAX_TASK_PRODUCERS]
    # The default: a task of 500 partitions (1,000 on two cores) writes with 32 producers.
    assert [producers_for(n, 16) for n in (8, 16, 17, 500, 10_000)] == [1, 1, 2, 32, MAX_TASK_PRODUCERS]
