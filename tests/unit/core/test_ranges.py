"""How a flow's source partitions are shared out among its copy tasks."""

from __future__ import annotations

import pytest

from sparkmirror.core.ranges import SourceRange, check_disjoint, share_out


def r(p: int, size: int, topic: str = "t") -> SourceRange:
    return SourceRange(topic, p, 100, 100 + size)


def test_every_non_empty_range_goes_to_exactly_one_task() -> None:
    ranges = [r(p, 10 * (p + 1)) for p in range(8)] + [r(8, 0)]
    groups = share_out(ranges, 3)
    placed = [x for g in groups for x in g]
    assert sorted(placed) == sorted(x for x in ranges if x.size > 0)
    assert len(groups) == 3 and all(groups)
    check_disjoint(groups)


def test_record_counts_are_balanced() -> None:
    groups = share_out([r(0, 700), r(1, 400), r(2, 300), r(3, 100), r(4, 100)], 2)
    loads = sorted(sum(x.size for x in g) for g in groups)
    assert loads == [800, 800]


def test_fewer_ranges_than_tasks_gives_one_task_per_range() -> None:
    groups = share_out([r(0, 5), r(1, 5)], 8)
    assert [[x.partition for x in g] for g in groups] == [[0], [1]]


def test_nothing_to_copy_gives_no_task() -> None:
    assert share_out([r(0, 0)], 2) == []


def test_deterministic_and_sorted_within_a_task() -> None:
    ranges = [r(p, 50, topic) for topic in ("b", "a") for p in range(4)]
    first = share_out(ranges, 2)
    assert first == share_out(list(reversed(ranges)), 2)
    for g in first:
        assert g == sorted(g, key=lambda x: (x.topic, x.partition))


def test_a_partition_planned_twice_is_refused() -> None:
    with pytest.raises(ValueError, match=r"t\[3\] planned twice"):
        check_disjoint([[r(3, 5)], [r(3, 7)]])


def test_tasks_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        share_out([r(0, 1)], 0)


def test_a_transaction_group_goes_to_one_task() -> None:
    """Exactly-once: the partitions of one group share a transactional id, so one task writes them all."""
    from sparkmirror.core.transactions import group_key

    key = group_key(4)
    assert key is not None
    ranges = [r(p, 10 + 37 * p % 101, topic) for topic in ("a", "b", "c") for p in range(10)]
    groups = share_out(ranges, 3, key)
    check_disjoint(groups, key)
    owner: dict[object, int] = {}
    for i, g in enumerate(groups):
        for x in g:
            assert owner.setdefault(key(x.topic, x.partition), i) == i
    assert sorted(x for g in groups for x in g) == sorted(ranges)
    assert len(groups) == 3 and all(groups)


def test_groups_fewer_than_tasks_give_one_task_per_group() -> None:
    key = lambda topic, partition: partition % 2  # noqa: E731
    groups = share_out([r(p, 5) for p in range(6)], 8, key)
    assert [[x.partition for x in g] for g in groups] == [[0, 2, 4], [1, 3, 5]]


def test_a_group_split_over_two_tasks_is_refused() -> None:
    key = lambda topic, partition: partition // 2  # noqa: E731
    with pytest.raises(ValueError, match=r"t\[1\]: transaction group 0 planned in two tasks"):
        check_disjoint([[r(0, 5)], [r(1, 5)]], key)
    check_disjoint([[r(0, 5), r(1, 5)], [r(2, 5)]], key)
