"""Offset ranges of a flow's source partitions and how they are shared out among its copy tasks.

Each source partition is one half-open offset range ``[start, until)``: a streaming task copies
from ``start`` until it is stopped (:data:`OPEN_END`), or to the source's end with ``--once``. A
flow's tasks (at most one per core it has) each read several partitions with one consumer; this
module decides which task gets which partition; it imports neither pyspark nor a Kafka client.

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
    """Records ``[start, until)`` of one source partition."""

    topic: str
    partition: int
    start: int
    until: int

    @property
    def size(self) -> int:
        return max(0, self.until - self.start)


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
                raise ValueError(f"{r.topic}[{r.partition}] planned twice in one job")
            seen.add(tp)
            if key is not None:
                k = key(r.topic, r.partition)
                if owner.setdefault(k, i) != i:
                    raise ValueError(f"{r.topic}[{r.partition}]: transaction group {k!r} planned in two tasks")
