"""Checkpoint rules: when to emit a checkpoint, and when to sync a group's offset on the target.

Pure decisions, no I/O: the checkpoint emitter (driver) asks :class:`CheckpointState` for the
next checkpoint of each (group, topic, partition) and writes what it returns; the group offset
sync asks :func:`group_offset_sync_decision` before committing. The rules, each with a test
named after it:

- **Restore before emitting.** After a restart the state is read back from the checkpoints
  topic before anything is emitted (KAFKA-15905: a restarted MM2 forgot its checkpoints and
  could move them backwards). :meth:`CheckpointState.next_checkpoint` raises
  :class:`NotLoadedError` until :meth:`CheckpointState.restore` was called.
- **Emit only on change.** The first checkpoint of a partition; a downstream offset that
  advanced; an upstream offset or metadata that changed at the same downstream offset.
  A repeat of the last checkpoint is skipped.
- **Never move backwards unless the group rewound.** A checkpoint whose downstream offset is
  below the last one is skipped ("preventing downstream rewind") unless the source group's
  upstream offset itself went backwards (an operator reset it): then the rewind is the truth.
- **No history, no checkpoint.** A translation without a downstream offset emits nothing.
- **Sync only empty or absent groups, never backwards** (:func:`group_offset_sync_decision`):
  committing to an active group would fight its consumers; a target offset ahead of the
  translation was reached by consumers on the target and must not be rewound.

A pass over many groups is read in slices spread over the interval (:class:`CheckpointPass`), so
that one pass never holds the driver's other chores for long and the source's group coordinators
see a steady trickle of reads rather than a burst; every group is still read once an interval.

Every decision is logged with its reason. This module must never import pyspark or a Kafka client.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence

from sparkmirror.core.exceptions import NotLoadedError
from sparkmirror.core.formats import Checkpoint
from sparkmirror.core.offsetmap import Method, Translation

__all__ = ["GROUPS_PER_SLICE", "CheckpointPass", "CheckpointState", "group_offset_sync_decision"]

log = logging.getLogger(__name__)

_Key = tuple[str, str, int]

#: Groups read in one slice of a pass: about half a second of reads (~0.5-1 ms a group, measured
#: in docs/performance.md), the longest the driver's other chores wait behind checkpoints.
GROUPS_PER_SLICE = 500


class CheckpointPass:
    """One pass over the source groups, read in slices of ``slice_size`` spread evenly over ``interval_s``.

    Slice *i* of *n* is due ``i * interval_s / n`` after the pass started (``started``, a monotonic
    time), and the next pass ``interval_s`` after it: each group is read once an interval, at the
    same point of it every time, so its checkpoint is never older than an interval plus a slice.
    A pass of up to ``slice_size`` groups is one slice, read at once, as before slicing.
    """

    def __init__(
        self, groups: Sequence[str], interval_s: float, started: float, slice_size: int = GROUPS_PER_SLICE
    ) -> None:
        if slice_size < 1:
            raise ValueError("slice_size must be at least 1")
        self.groups = list(groups)
        self.interval_s = interval_s
        self.started = started
        self.slice_size = slice_size
        self.slices = max(1, math.ceil(len(self.groups) / slice_size))
        self.taken = 0
        #: Longest slice, read to durable (seconds): the pass's checkpoint latency.
        self.longest_s = 0.0
        #: Checkpoints written by the slices so far.
        self.written = 0

    @property
    def done(self) -> bool:
        return self.taken >= self.slices

    def next_slice(self) -> list[str]:
        """The groups of the next slice (empty for a pass without groups)."""
        if self.done:
            raise IndexError("the pass is complete")
        chunk = self.groups[self.taken * self.slice_size : (self.taken + 1) * self.slice_size]
        self.taken += 1
        return chunk

    def slice_done(self, seconds: float, written: int) -> None:
        self.longest_s = max(self.longest_s, seconds)
        self.written += written

    def next_due(self) -> float:
        """When the next slice is due, or the next pass once this one is done (monotonic time)."""
        return self.started + self.interval_s * self.taken / self.slices


class CheckpointState:
    """The last emitted checkpoint per (group, topic, partition).

    ``topic`` is the topic as the checkpoint names it (the remote topic on the target, as MM2
    writes it). Not thread-safe: one emitter owns it.
    """

    def __init__(self) -> None:
        self._last: dict[_Key, Checkpoint] = {}
        self._restored = False

    @property
    def restored(self) -> bool:
        """True once :meth:`restore` has run."""
        return self._restored

    def restore(self, checkpoints: Iterable[Checkpoint]) -> None:
        """Load the checkpoints read back from the checkpoints topic, oldest first (the last per
        key wins, as in a compacted topic). Call it, with nothing if the topic is empty, before
        the first :meth:`next_checkpoint`."""
        count = 0
        for checkpoint in checkpoints:
            self._last[(checkpoint.group, checkpoint.topic, checkpoint.partition)] = checkpoint
            count += 1
        self._restored = True
        log.info("restored %d checkpoint records (%d group partitions)", count, len(self._last))

    def get(self, group: str, topic: str, partition: int) -> Checkpoint | None:
        """The last emitted (or restored) checkpoint of ``group`` for ``topic[partition]``."""
        return self._last.get((group, topic, partition))

    def __len__(self) -> int:
        return len(self._last)

    def next_checkpoint(
        self,
        group: str,
        topic: str,
        partition: int,
        upstream_offset: int,
        translation: Translation,
        metadata: str = "",
    ) -> Checkpoint | None:
        """The checkpoint to emit for ``group`` at ``upstream_offset`` given its ``translation``,
        or None when the rules say to skip. An emitted checkpoint becomes the new last one."""
        if not self._restored:
            raise NotLoadedError(
                f"checkpoint for group {group} {topic}[{partition}] refused: the checkpoints topic has not "
                "been read back yet (a restarted emitter must not move checkpoints backwards, KAFKA-15905)"
            )
        where = f"group={group} {topic}[{partition}] upstream={upstream_offset}"
        downstream = translation.downstream_offset
        if downstream is None or translation.method is Method.NO_HISTORY:
            log.debug("Skipping checkpoint %s (no offset history: %s)", where, translation.explanation)
            return None
        candidate = Checkpoint(group, topic, partition, upstream_offset, downstream, metadata)
        last = self._last.get((group, topic, partition))
        emit, reason = _decide(candidate, last)
        if emit:
            self._last[(group, topic, partition)] = candidate
            log.debug("Emitting checkpoint %s downstream=%d (%s)", where, downstream, reason)
            return candidate
        log.debug("Skipping checkpoint %s downstream=%d (%s)", where, downstream, reason)
        return None


def _decide(candidate: Checkpoint, last: Checkpoint | None) -> tuple[bool, str]:
    if last is None:
        return True, "first for this partition"
    if candidate.upstream_offset < last.upstream_offset:
        return True, f"upstream group rewound from {last.upstream_offset}"
    if candidate.downstream_offset > last.downstream_offset:
        return True, f"downstream offset advanced from {last.downstream_offset}"
    if candidate.downstream_offset < last.downstream_offset:
        return False, f"preventing downstream rewind from {last.downstream_offset}"
    if candidate.upstream_offset != last.upstream_offset:
        return True, f"upstream offset advanced from {last.upstream_offset} at the same downstream offset"
    if candidate.metadata != last.metadata:
        return True, "metadata changed"
    return False, "repeated checkpoint"


def group_offset_sync_decision(
    current_target_offset: int | None, translated: int, group_active: bool
) -> tuple[bool, str]:
    """Whether to commit ``translated`` for a group on the target, and why.

    ``current_target_offset`` is the group's committed offset on the target for the partition
    (None if it has none); ``group_active`` is true when the group has members there.
    Only empty or absent groups are synced, and never to an offset below the committed one.
    """
    if group_active:
        return False, "group is active on the target; only empty or absent groups are synced"
    if translated < 0:
        return False, f"translated offset {translated} is not a valid position"
    if current_target_offset is None or current_target_offset < 0:
        return True, f"no committed offset on the target; committing {translated}"
    if translated > current_target_offset:
        return True, f"advancing the target offset from {current_target_offset} to {translated}"
    if translated == current_target_offset:
        return False, f"target offset already at {translated}"
    return False, (f"preventing target rewind: committed {current_target_offset} is ahead of translated {translated}")
