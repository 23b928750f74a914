"""Offset ranges of a micro-batch and how they are shared out among tasks.

Spark's Kafka source plans each micro-batch as one half-open offset range
``[start, until)`` per source partition. The direct reader (docs/decisions.md)
copies those ranges in at most as many tasks as the job has cores (fewer for a
small at-least-once batch, :func:`task_count`), each task reading several
partitions with one consumer. This module decides how many tasks there are and
which task gets which partition; it imports neither pyspark nor a Kafka client.

Rule: every range goes to exactly one task, and exactly-once keeps the partitions of one
transaction group in one task (two tasks with the same partition, or the same group's
transactional id, would fence each other's transactions).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class SourceRange:
    """Records ``[start, until)`` of one source partition, as Spark planned them."""

    topic: str
    partition: int
    start: int
    until: int

    @property
    def size(self) -> int:
        return max(0, self.until - self.start)


#: Records below which one more task costs more than it saves: each task has a fixed cost (a Python
#: worker's turn, a consumer assignment, a flush per partition) that a small batch does not repay
#: (measured in docs/performance.md).
MIN_RECORDS_PER_TASK = 20_000


def task_count(records: int, cores: int, *, exactly_once: bool, min_records: int = MIN_RECORDS_PER_TASK) -> int:
    """How many tasks copy a batch of ``records``: one per ``min_records``, at most one per core.

    Exactly-once always uses every core: a partition's transactional producer lives in the Python
    worker that ran its last task, and Spark hands a lone task to its idle workers in turn, so one
    task per batch made every producer anew each batch (docs/performance.md).
    """
    if cores < 1:
        raise ValueError(f"cores must be at least 1, got {cores}")
    if exactly_once:
        return cores
    return max(1, min(cores, records // max(1, min_records)))


#: The end of a streaming task's range: it copies until it is stopped.
OPEN_END = 2**63 - 1


def share_out(
    ranges: Iterable[SourceRange],
    tasks: int,
    key: Callable[[str, int], object] | None = None,
    *,
    weight: Callable[[SourceRange], int] | None = None,
) -> list[list[SourceRange]]:
    """Split non-empty ranges into at most ``tasks`` groups of about equal record counts.

    ``weight`` replaces a range's record count as its share of the work: the streaming engine's
    ranges are open (:data:`OPEN_END`), and each partition weighs one.

    Ranges whose partitions have the same ``key`` (exactly-once: the partition's transaction group,
    :func:`sparkmirror.core.transactions.group_key`) always go to the same group; without a key each
    range stands alone. Largest unit first, each to the group with the fewest records so far (ties:
    the lower group index), so the result is deterministic. Empty ranges are dropped; no group is
    empty.
    """
    if tasks < 1:
        raise ValueError(f"tasks must be at least 1, got {tasks}")
    size = weight or (lambda r: r.size)
    units: dict[object, list[SourceRange]] = {}
    for r in ranges:
        if r.size > 0:
            units.setdefault((r.topic, r.partition) if key is None else key(r.topic, r.partition), []).append(r)
    work = sorted(units.values(), key=lambda u: (-sum(size(r) for r in u), min((r.topic, r.partition) for r in u)))
    n = min(tasks, len(work))
    groups: list[list[SourceRange]] = [[] for _ in range(n)]
    heap = [(0, i) for i in range(n)]
    for unit in work:
        load, i = heapq.heappop(heap)
        groups[i].extend(unit)
        heapq.heappush(heap, (load + sum(size(r) for r in unit), i))
    for g in groups:
        g.sort(key=lambda r: (r.topic, r.partition))
    return groups


def check_disjoint(groups: Sequence[Sequence[SourceRange]], key: Callable[[str, int], object] | None = None) -> None:
    """Raise if a source partition (or, with ``key``, a transaction group) appears in more than one
    task's ranges (a planning bug, never expected)."""
    seen: set[tuple[str, int]] = set()
    owner: dict[object, int] = {}
    for i, g in enumerate(groups):
        for r in g:
            tp = (r.topic, r.partition)
            if tp in seen:
                raise ValueError(f"{r.topic}[{r.partition}] planned twice in one micro-batch")
            seen.add(tp)
            if key is not None:
                k = key(r.topic, r.partition)
                if owner.setdefault(k, i) != i:
                    raise ValueError(f"{r.topic}[{r.partition}]: transaction group {k!r} planned in two tasks")


def rounds(ranges: Iterable[SourceRange], max_records: int) -> list[list[SourceRange]]:
    """Cut a batch's ranges into successive rounds of at most about ``max_records`` records each.

    Each partition's range is cut into consecutive pieces, one per round, in offset order (round
    ``k + 1`` starts where round ``k`` ended), so copying the rounds one after the other writes every
    partition in order. A round gives each partition still holding records the same share
    (``max_records`` over the partitions that still hold records, at least one record), so a round
    holds more than ``max_records`` only when more partitions than that hold records. Empty ranges
    are dropped; a batch within the limit is one round, unchanged.
    """
    if max_records < 1:
        raise ValueError(f"max_records must be at least 1, got {max_records}")
    work = [r for r in ranges if r.size > 0]
    if sum(r.size for r in work) <= max_records:
        return [work] if work else []
    out: list[list[SourceRange]] = []
    while work:
        share = max(1, max_records // len(work))
        out.append([SourceRange(r.topic, r.partition, r.start, min(r.until, r.start + share)) for r in work])
        work = [SourceRange(r.topic, r.partition, r.start + share, r.until) for r in work if r.start + share < r.until]
    return out
