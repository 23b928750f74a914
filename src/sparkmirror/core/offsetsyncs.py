"""Which MM2 offset syncs to write: MM2's own rule, applied to the offset map's segments.

An offset sync says that the record at an upstream offset was written at a downstream offset. MM2's
checkpoint task translates a group's offset from the latest sync at or below it: exactly when the
group stands on the sync, else to one past the sync's downstream offset. So a sync is worth writing
where a run of one-for-one offsets begins, and again once the copy has moved ``offset.lag.max``
records past the last one (MM2 writes on the same conditions: its first record after it starts, a
skipped upstream offset, and a translation ``offset.lag.max`` or more records stale). A writer that
starts again writes each run's start again: MM2's store of syncs starts over from it, then takes the
newer ones.

A streaming task reports each partition's current segment every commit interval, its start
unchanged and its count grown. Writing a sync per report would repeat the same pair over and over
(at 1,000 partitions, thousands a second for the source cluster to append and compact). Instead
the newest pair of a run that is not written yet is held, and every held pair is written at most
``flush_s`` after it was first held, as MM2 writes its held syncs when it commits.

Pure: no clients. :class:`~sparkmirror.offsets.syncs.OffsetSyncWriter` produces what it returns.
"""

from __future__ import annotations

from collections.abc import Iterable

from sparkmirror.core.formats import OffsetSync
from sparkmirror.core.offsetmap import Segment

_Key = tuple[str, int]


class OffsetSyncRule:
    """Per source partition: the run last seen, the downstream offset of the last sync written, and
    the newest pair not written yet."""

    def __init__(self, lag_max: int, flush_s: float) -> None:
        if lag_max < 0:
            raise ValueError(f"offset.lag.max must be >= 0, got {lag_max}")
        self.lag_max = lag_max
        self.flush_s = flush_s
        #: (upstream start, downstream start) of the partition's run last seen.
        self._run: dict[_Key, tuple[int, int]] = {}
        #: The newest (upstream, downstream) pair seen of the partition.
        self._seen: dict[_Key, tuple[int, int]] = {}
        #: Downstream offset of the partition's last sync written.
        self._synced: dict[_Key, int] = {}
        #: The newest pair not written yet, per partition.
        self._held: dict[_Key, OffsetSync] = {}
        #: When the oldest held pair was first held (None: nothing held).
        self._held_since: float | None = None

    def syncs(self, segments: Iterable[Segment], now: float) -> list[OffsetSync]:
        """The syncs to write for these segments (each partition's in offset order), then every held
        one if the oldest has waited ``flush_s``."""
        out: list[OffsetSync] = []
        for seg in segments:
            key = (seg.topic, seg.partition)
            start = (seg.upstream_start, seg.downstream_start)
            last_up = seg.upstream_start + seg.count - 1
            last_down = seg.downstream_start + seg.count - 1
            newest = OffsetSync(seg.topic, seg.partition, last_up, last_down)
            run, seen = self._run.get(key), self._seen.get(key)
            self._run[key], self._seen[key] = start, (last_up, last_down)
            if run != start and (seen is None or start[0] != seen[0] + 1 or start[1] <= seen[1]):
                # The first this writer sees of the partition, or a run after skipped upstream offsets (or
                # a downstream that went back): the last run's newest pair, then where this one begins. A
                # run that goes on upstream where the last ended (exactly once: after a commit marker)
                # needs none, as in MM2: a translation past the last sync is one past it, never beyond.
                held = self._held.get(key)
                if held is not None:
                    self._write(key, held, out)
                self._write(key, OffsetSync(seg.topic, seg.partition, *start), out)
            if last_down <= self._synced[key]:
                continue
            # MM2 translates past a sync to one past its downstream offset: stale by this many records.
            if last_down - (self._synced[key] + 1) >= self.lag_max:
                self._write(key, newest, out)
            else:
                self._held[key] = newest
                if self._held_since is None:
                    self._held_since = now
        if self._held_since is not None and now - self._held_since >= self.flush_s:
            out.extend(self.release())
        return out

    def release(self) -> list[OffsetSync]:
        """Every held pair, to write now (a flush, or the writer's close). Each then counts as its
        partition's last sync (MM2 does not count its held ones so, and writes a few more)."""
        held = list(self._held.values())
        for sync in held:
            self._synced[(sync.topic, sync.partition)] = sync.downstream_offset
        self._held.clear()
        self._held_since = None
        return held

    def _write(self, key: _Key, sync: OffsetSync, out: list[OffsetSync]) -> None:
        self._held.pop(key, None)
        if not self._held:
            self._held_since = None
        self._synced[key] = sync.downstream_offset
        out.append(sync)
