"""What a flow has done, from its tasks' reports and the copy's progress."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.lag import record_timestamps
from sparkmirror.pipeline.executor.results import PartitionResult

if TYPE_CHECKING:
    from sparkmirror.pipeline.driver.stream import StreamingCopy

#: The copy's progress, shaped as a Structured Streaming query's progress JSON
#: (:meth:`~sparkmirror.pipeline.driver.stream.StreamingCopy.progress_json`).
ProgressJson = Mapping[str, object]


@dataclass(frozen=True)
class SourceLoss:
    """Records of one source partition that expired (retention, ``delete_records``) before they were
    mirrored: offsets ``[first_offset, end_offset)``."""

    topic: str
    partition: int
    first_offset: int
    end_offset: int

    @property
    def count(self) -> int:
        return self.end_offset - self.first_offset

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}] offsets {self.first_offset}..{self.end_offset - 1} ({self.count:,})"


@dataclass
class FlowProgress:
    """Counters of one flow; updated from the tasks' reports, read by the reporter."""

    flow: str
    records: int = 0
    bytes: int = 0
    commits: int = 0
    dead_lettered: int = 0
    lag: int | None = None
    restarts: int = 0
    #: Records lost on the source (expired before they were mirrored), in total and per gap
    #: (:attr:`losses`); the metric ``sparkmirror_records_lost_total`` reads them.
    lost_on_source: int = 0
    losses: list[SourceLoss] = field(default_factory=list)
    per_topic: dict[str, int] = field(default_factory=dict)
    #: Wall clock (time.time()) of the last completed checkpoint cycle; None before the first.
    last_checkpoint_at: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _last_report: tuple[float, int] = (0.0, 0)

    def add_commit(self, results: Iterable[PartitionResult]) -> None:
        with self._lock:
            self.commits += 1
            for r in results:
                self.records += r.records
                self.bytes += r.bytes
                self.dead_lettered += r.dead_lettered
                self.per_topic[r.topic] = self.per_topic.get(r.topic, 0) + r.records

    def add_loss(self, loss: SourceLoss) -> None:
        with self._lock:
            self.losses.append(loss)
            self.lost_on_source += loss.count

    def lost_per_partition(self) -> dict[tuple[str, int], int]:
        """Records lost on the source per (topic, partition), for metrics."""
        with self._lock:
            out: dict[tuple[str, int], int] = {}
            for loss in self.losses:
                key = (loss.topic, loss.partition)
                out[key] = out.get(key, 0) + loss.count
            return out

    def rate(self) -> float:
        now = time.monotonic()
        with self._lock:
            t0, n0 = self._last_report
            self._last_report = (now, self.records)
        return 0.0 if t0 == 0.0 else (self.records - n0) / max(now - t0, 1e-6)

    def report_line(self) -> str:
        lag = "?" if self.lag is None else f"{self.lag:,}"
        extra = f" dead-lettered={self.dead_lettered:,}" if self.dead_lettered else ""
        if self.lost_on_source:
            extra += f" LOST-ON-SOURCE={self.lost_on_source:,}"
        rate = f"{self.rate():,.0f}/s"
        return f"flow={self.flow} records={self.records:,} rate={rate} lag={lag} commits={self.commits}{extra}"


def lag_from_progress(progress: ProgressJson | None) -> int | None:
    """Records on the source not yet processed, from a StreamingQueryProgress."""
    if not progress or not progress.get("sources"):
        return None
    sources = progress["sources"]
    assert isinstance(sources, list)
    total = 0
    for src in sources:
        latest = _offsets(src.get("latestOffset"))
        done = _offsets(src.get("endOffset"))
        if latest is None or done is None:
            return None
        for topic, parts in latest.items():
            for p, off in parts.items():
                total += max(0, int(off) - int(done.get(topic, {}).get(p, 0)))
    return total


def partition_positions(progress: ProgressJson | None) -> dict[tuple[str, int], tuple[int, int]]:
    """Per source partition (next offset to copy, source end) from a StreamingQueryProgress."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    if not progress or not progress.get("sources"):
        return out
    sources = progress["sources"]
    assert isinstance(sources, list)
    for src in sources:
        latest = _offsets(src.get("latestOffset")) or {}
        done = _offsets(src.get("endOffset")) or {}
        for topic, parts in latest.items():
            for p, off in parts.items():
                end = int(off)
                out[(topic, int(p))] = (min(end, int(done.get(topic, {}).get(p, end))), end)
    return out


def partition_lags(clients: FlowClients, progress: ProgressJson | None) -> dict[tuple[str, int], tuple[int, float]]:
    """Per source partition (records not yet mirrored, age of the oldest of them in seconds).

    The ages cost one fetch of the first waiting record of each partition that lags.
    """
    positions = partition_positions(progress)
    waiting = {k: done for k, (done, end) in positions.items() if end > done}
    oldest = record_timestamps(clients.source_consumer, waiting, timeout_s=5.0) if waiting else {}
    now_ms = time.time() * 1000
    return {
        k: (end - done, max(0.0, (now_ms - oldest[k]) / 1000) if k in oldest else 0.0)
        for k, (done, end) in positions.items()
    }


def last_progress(copy_job: StreamingCopy) -> dict[str, object] | None:
    """The copy's last progress as a dict, in the shape of a Structured Streaming query's progress
    (``sources[].startOffset / endOffset / latestOffset``), which :func:`lag_from_progress` and
    :func:`partition_lags` read."""
    return copy_job.progress_json()


def _offsets(raw: object) -> dict[str, dict[str, int]] | None:
    return raw if isinstance(raw, dict) else None
