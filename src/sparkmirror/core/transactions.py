"""Exactly-once: which transactional id writes which source partition, and which ids a start must fence.

A flow's exactly-once writer groups its source partitions into ``groups`` transaction groups
(``sparkmirror.exactly.once.transactions``); every partition of a group is written by the producer
of the group's ``transactional.id``, one transaction per group per commit interval. ``groups = 0``
is the original layout: an id and a transaction per source partition.

Rules the rest of the pipeline relies on, and the tests pin:

- **Stable assignment.** A partition's group is a pure function of (topic, partition, groups): a
  retried or speculative attempt of a task, or a task of the job that replaces a failed one, uses the
  id of the writer it replaces, and ``init_transactions`` fences it
  (``tests/unit/core/test_transactions.py``).
- **Distinct ids per layout.** The id names the layout (``#<group>-of-<groups>``; ``#`` never occurs
  in a sanitised topic name), so no id of one layout is an id of another, and a layout used again
  gets the same ids again.
- **One task per group** (the driver's assignment, :func:`sparkmirror.core.ranges.share_out` with
  :func:`group_key`): two tasks holding the same id at once would fence each other.
- **Fence every layout that may hold an open transaction.** The layouts a flow has used since its
  last complete fencing are recorded on the target (:func:`format_layouts`); a start fences the ids
  of every recorded layout and of the new one, then records the new one alone
  (:func:`layouts_to_fence`). No record (a flow of a version before groups, or a record that
  expired) counts as the per-partition layout, so an upgrade fences the old per-partition ids.
  After that, the progress a task reads once its own ``init_transactions`` returned is final for its
  partitions: no other id can still commit for them.

Pure functions: no pyspark, no Kafka client.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping

from sparkmirror.core.naming import transactional_id

#: The layout with one transactional id per source partition.
PER_PARTITION = 0
#: Version tag of the recorded layouts (:func:`format_layouts`).
_RECORD_VERSION = "v1"
#: Group counts the config accepts (each id is a producer per Python worker that writes it).
MAX_GROUPS = 10_000


#: Most producers one copy task writes with at least once: its partitions are dealt among them
#: (docs/performance.md, "32 producers per task": against 8, a lower copy p50 and, at 1,000
#: partitions, 0.96x the limit loop's throughput instead of 0.64x).
MAX_TASK_PRODUCERS = 32
#: Exactly once, the default layout (:func:`default_transaction_groups`) has one transaction group (a
#: producer) per this many partitions of a large flow, at most :data:`MAX_TASK_TRANSACTION_GROUPS` per
#: task: 64 groups instead of 16 at 1,000 partitions added broker B's load, not speed (docs/performance.md).
PARTITIONS_PER_TRANSACTION_GROUP = 64
MAX_TASK_TRANSACTION_GROUPS = 8


def producers_for(partitions: int, per_producer: int) -> int:
    """At least once: the producers of a task writing ``partitions`` source partitions, one per
    ``per_producer`` of them (``sparkmirror.partitions.per.producer``), at most :data:`MAX_TASK_PRODUCERS`.
    librdkafka sends one partition per produce request, at most 5 at a time on a connection: a producer
    of hundreds of partitions at a low rate queues records behind the other partitions' requests."""
    return max(1, min(MAX_TASK_PRODUCERS, -(-partitions // max(1, per_producer))))


def default_transaction_groups(tasks: int, partitions: int) -> int:
    """Exactly once, ``sparkmirror.exactly.once.transactions = -1``: twice the flow's copy tasks (its
    share of the cores), or, for a flow of many partitions, one group (one producer) per
    :data:`PARTITIONS_PER_TRANSACTION_GROUP` partitions, at most :data:`MAX_TASK_TRANSACTION_GROUPS`
    per task."""
    tasks = max(1, tasks)
    groups = -(-partitions // PARTITIONS_PER_TRANSACTION_GROUP)
    return max(2 * tasks, min(MAX_TASK_TRANSACTION_GROUPS * tasks, groups))


def transaction_group(topic: str, partition: int, groups: int) -> int:
    """The group of ``topic[partition]`` among ``groups`` (``groups >= 1``).

    Consecutive partitions of a topic go to consecutive groups (balanced within a topic, and a
    partition added later lands where the next one would), starting from a point fixed by the
    topic's name (CRC-32 of its UTF-8: the same on every Python, unlike ``hash``).
    """
    if groups < 1:
        raise ValueError(f"groups must be at least 1, got {groups}")
    return (zlib.crc32(topic.encode()) + partition) % groups


def group_transactional_id(source_alias: str, target_alias: str, group: int, groups: int) -> str:
    """The ``transactional.id`` of one group of a layout of ``groups`` groups."""
    return f"sparkmirror-{source_alias}-{target_alias}-#{group}-of-{groups}"


def writer_id(source_alias: str, target_alias: str, topic: str, partition: int, groups: int) -> str:
    """The ``transactional.id`` that writes ``topic[partition]`` in the layout ``groups`` (0: per partition)."""
    if groups == PER_PARTITION:
        return transactional_id(source_alias, target_alias, topic, partition)
    return group_transactional_id(source_alias, target_alias, transaction_group(topic, partition, groups), groups)


def layout_ids(source_alias: str, target_alias: str, groups: int, topics: Mapping[str, int]) -> list[str]:
    """Every id of the layout ``groups``: one per group, or (per partition) one per partition of ``topics``."""
    if groups == PER_PARTITION:
        return [transactional_id(source_alias, target_alias, t, p) for t, n in sorted(topics.items()) for p in range(n)]
    return [group_transactional_id(source_alias, target_alias, g, groups) for g in range(groups)]


def group_key(groups: int) -> Callable[[str, int], object] | None:
    """What the driver's assignment keeps in one task: the partition's group (``None``: per partition, no
    constraint)."""
    if groups == PER_PARTITION:
        return None
    return lambda topic, partition: transaction_group(topic, partition, groups)


def format_layouts(layouts: Iterable[int]) -> str:
    """The recorded layouts as text (commit metadata on the target): ``v1 0,16``."""
    return f"{_RECORD_VERSION} " + ",".join(str(g) for g in sorted(set(layouts)))


def layout_names(layouts: set[int] | None) -> str:
    """Layouts as a log line says them: ``one per partition, 16 groups`` (``none``: no record)."""
    if layouts is None:
        return "none"
    return ", ".join("one per partition" if g == PER_PARTITION else f"{g} groups" for g in sorted(layouts))


def parse_layouts(text: str | None) -> set[int] | None:
    """The layouts of a record; ``None`` for no record or one this version cannot read (unknown layouts)."""
    if not text:
        return None
    version, _, rest = text.strip().partition(" ")
    if version != _RECORD_VERSION:
        return None
    try:
        layouts = {int(x) for x in rest.split(",") if x.strip()}
    except ValueError:
        return None
    if not layouts or any(g < 0 for g in layouts):
        return None
    return layouts


def layouts_to_fence(recorded: set[int] | None, current: int) -> set[int]:
    """The layouts whose ids a start must fence before the flow writes with ``current``.

    Every recorded layout, and the current one; with no (readable) record, also the per-partition
    layout: the flow may have run with a version that knew only that one.
    """
    out = set(recorded) if recorded is not None else {PER_PARTITION}
    out.add(current)
    return out
