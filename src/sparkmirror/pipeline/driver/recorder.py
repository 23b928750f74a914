"""What the driver does with what the streaming tasks copied, and its check before they start.

:meth:`CopyRecorder.record` takes each task's results once they are final (the task's report after
its interval's acknowledgements): a refused record stops the flow, the offset-map segments (already
durable on the target) join the map, MM2's offset syncs are written, the flow's progress counted.
:meth:`CopyRecorder.check_source_loss` runs before the tasks start: records that expired on the
source between where each partition stopped and the source's log start are said (topic, partition,
offsets, count) and counted, and with ``sparkmirror.source.loss = fail`` the flow stops before
anything past the gap is copied.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sparkmirror.config.model import FlowConfig
from sparkmirror.core.offsetmap import Segment
from sparkmirror.core.ranges import SourceRange
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.offsets.store import OffsetMapStore
from sparkmirror.offsets.syncs import OffsetSyncWriter
from sparkmirror.pipeline.driver.progress import FlowProgress, SourceLoss
from sparkmirror.pipeline.exceptions import SourceLossError, WriteError
from sparkmirror.pipeline.executor.plan import PartitionKey, WritePlan
from sparkmirror.pipeline.executor.results import PartitionResult

if TYPE_CHECKING:
    from sparkmirror.metrics.exporter import FlowMetrics

log = logging.getLogger(__name__)


class CopyRecorder:
    """The flow's record of what its tasks copied, and what it keeps between their reports."""

    def __init__(
        self,
        clients: FlowClients,
        plan: WritePlan,
        *,
        store: OffsetMapStore,
        syncs: OffsetSyncWriter,
        progress: FlowProgress,
    ) -> None:
        self.flow: FlowConfig = clients.flow
        self.clients = clients
        #: The plan of the next job; the flow replaces it when the target or the fencing changes.
        self.plan = plan
        self.store = store
        self.syncs = syncs
        self.progress = progress
        #: Source topics of the running copy and their partition counts.
        self.subscribed: dict[str, int] = {}
        #: Gaps already reported, (partition, first lost offset): a restart does not count them twice.
        self._reported: set[tuple[PartitionKey, int]] = set()
        #: Set after every recorded report; the supervisor resets its failure count on it.
        self.succeeded = False
        #: The flow's metrics (None: no metrics endpoint).
        self.metrics: FlowMetrics | None = None

    def record(self, results: list[PartitionResult]) -> None:
        """A task's results once they are final: a refused record stops the flow (a terminal
        :class:`WriteError`); the offset-map segments, already durable on the target (the task wrote
        them, exactly once in its transaction), join the map; MM2's offset syncs; the flow's progress."""
        refusals = sorted(r.error for r in results if r.error)
        if refusals:
            raise WriteError(refusals[0], terminal=True)
        segments = [Segment(r.topic, r.partition, u, d, n) for r in results for u, d, n in r.segments]
        self.syncs.emit(segments)  # MM2's offset syncs, for MM2's tools
        self.store.apply(segments)
        self.progress.add_commit(results)
        self.succeeded = True

    def check_source_loss(self, ranges: list[SourceRange]) -> None:
        """Before the tasks start: records between where each partition stopped (``ranges``' starts,
        from what the target holds: the progress, and at least once the offset map's end) and the
        source's log start expired before they were mirrored. Say so (topic, partition, offsets,
        count), count them, and with ``sparkmirror.source.loss = fail`` stop the flow before anything
        past the gap is copied (:class:`SourceLossError`, exit 5). A running task that finds its
        position gone ends its job, and the restart checks here again. Gaps inside a range
        (compaction, transaction markers, aborted records) are not loss and are not looked at."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        starts = {(r.topic, r.partition): (r.start, r.until) for r in ranges if r.until > r.start}
        if not starts:
            return
        request = {TopicPartition(t, p): OffsetSpec.earliest() for t, p in starts}
        try:
            result = self.clients.source_admin.list_offsets(request, request_timeout=30)
            earliest = {(tp.topic, tp.partition): fut.result().offset for tp, fut in result.items()}
        except Exception as exc:  # noqa: BLE001 - the data path goes on; the next start checks again
            log.warning("flow=%s cannot check the source's log start offsets: %s", self.flow.name, exc)
            return
        gaps = {key: start for key, (start, _until) in starts.items() if earliest.get(key, -1) > start}
        losses = []
        for key, first in sorted(gaps.items()):
            until = starts[key][1]
            end = min(earliest[key], until)
            if end > first and (key, first) not in self._reported:
                losses.append(SourceLoss(key[0], key[1], first, end))
        for loss in losses:
            self._reported.add(((loss.topic, loss.partition), loss.first_offset))
            self.progress.add_loss(loss)
            if self.metrics is not None:
                self.metrics.lost(loss.topic, loss.partition, loss.count)
            log.error(
                "flow=%s %s[%d] offsets %d..%d were deleted on the source (retention) before they were "
                "mirrored: %d records lost; raise the source's retention or the mirror's throughput%s",
                self.flow.name,
                loss.topic,
                loss.partition,
                loss.first_offset,
                loss.end_offset - 1,
                loss.count,
                " (sparkmirror.source.loss = fail: stopping the flow)" if self.flow.spark.source_loss == "fail" else "",
            )
        if losses and self.flow.spark.source_loss == "fail":
            raise SourceLossError(
                f"flow={self.flow.name} records expired on the source before they were "
                f"mirrored: {', '.join(str(x) for x in losses)}. Nothing past the gap was copied; to go on, "
                "set sparkmirror.source.loss = report (the gap stays reported) and run again"
            )
