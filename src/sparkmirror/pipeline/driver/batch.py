"""One micro-batch on the driver: plan it, have the tasks copy it, make its offset map durable.

Spark calls :meth:`BatchHandler.__call__` from ``foreachBatch``; Spark commits the batch's source
offsets only when it returns. It returns only after the tasks saw every record acknowledged (or
dead-lettered) and the batch's offset-map segments are durable on the target; a refused record
raises a terminal error and the batch is not committed; a stop request abandons a batch before it
starts, never lets one return early.

A failed batch reaches Spark as a short error (:class:`BatchFailed`, at most
:data:`MAX_ERROR_CHARS`), never as the Py4J dump of a failed Spark job: when a query is stopped,
Spark matches the error's text against a regular expression that recurses once per character
after ``Py4JJavaError: An error occurred while calling`` (``StreamExecution.isInterruptionException``,
Spark 4.2), and a dump of a few kilobytes overflowed the stream thread's stack
(``java.lang.StackOverflowError``: the thread died without an error, which read as a query that
ended normally). The whole text is kept here (:meth:`BatchHandler.take_failure`) for the
supervisor, which decides from it whether the failure is terminal.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from sparkmirror.config.model import FlowConfig
from sparkmirror.core.offsetmap import Segment
from sparkmirror.core.ranges import SourceRange, check_disjoint, rounds, share_out, task_count
from sparkmirror.core.transactions import PER_PARTITION, group_key
from sparkmirror.errors import SparkMirrorError
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.groups import committed_offsets
from sparkmirror.kafka.topics import TopicSync
from sparkmirror.offsets.store import OffsetMapStore
from sparkmirror.offsets.syncs import OffsetSyncWriter
from sparkmirror.pipeline.driver.progress import FlowProgress, SourceLoss
from sparkmirror.pipeline.exceptions import SOURCE_LOSS_PREFIX, TERMINAL_MARKER, WriteError
from sparkmirror.pipeline.executor.plan import PartitionKey, WritePlan
from sparkmirror.pipeline.executor.results import RESULT_SCHEMA, PartitionResult, merge_rounds
from sparkmirror.pipeline.executor.sources import INPUT_COLUMNS
from sparkmirror.pipeline.executor.tasks import copy_arrow_batches, copy_range_groups
from sparkmirror.pipeline.ranges import planned_ranges
from sparkmirror.pipeline.session import SCHEDULER_POOL, pool_name

if TYPE_CHECKING:
    import threading

    import pyarrow as pa
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession

    from sparkmirror.metrics.exporter import FlowMetrics

log = logging.getLogger(__name__)


class StopRequested(Exception):
    """Raised inside foreachBatch to abandon (not commit) a batch on stop."""


#: The longest error text a failed batch hands to Spark (see the module's docstring).
MAX_ERROR_CHARS = 400

#: Spark's stop interrupts or cancels the batch's Spark job; these in the error say so (read only while a
#: stop is requested).
_INTERRUPTED = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "ClosedByInterruptException",
    "SPARK_JOB_CANCELLED",
    "part of cancelled job group",
)


class BatchFailed(SparkMirrorError):
    """A micro-batch failed; the short form Spark sees (the handler keeps the whole text)."""

    retriable = True


def error_text(exc: BaseException) -> str:
    """``exc`` as text, with the Java side's stack trace for a Py4J error (never raises)."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:  # noqa: BLE001 - a Py4J error whose JVM side is gone
        return repr(exc)


#: Errors that only wrap the one that failed.
_WRAPPERS = ("Py4JJavaError", "SparkException", "PythonException", "An error occurred while calling")
#: The error of the task attempt that failed the job last, as Spark words a stage failure.
_TASK_FAILURE = re.compile(r"most recent failure: .*?\): ([\w.$]+(?:Error|Exception)\b[^\n]*)")


def summary(text: str) -> str:
    """One line that says what failed: a terminal error's sentence (with its marker), else the first
    line naming an error that is not Py4J's or Spark's wrapper, at most :data:`MAX_ERROR_CHARS`."""
    idx = text.find(TERMINAL_MARKER)
    failure = _TASK_FAILURE.search(text)
    if idx >= 0:
        line = text[idx:].splitlines()[0]
    elif failure is not None and not any(w in failure.group(1).split(":", 1)[0] for w in _WRAPPERS):
        line = failure.group(1)  # a JVM task's own error, inside Spark's "stage failure"
    else:
        lines = [ln.strip().removeprefix(": ").strip() for ln in text.splitlines()]
        lines = [ln for ln in lines if ln and not ln.startswith(("at ", "Traceback", "File ", "..."))]
        named = [ln for ln in lines if re.match(r"^[\w.$]*(Error|Exception)\b", ln)]
        own = [ln for ln in named if not any(w in ln.split(":", 1)[0] or ln.startswith(w) for w in _WRAPPERS)]
        line = (own or named or lines or [text])[0]
    line = line.replace("py4j.protocol.Py4JJavaError: ", "").replace("An error occurred while calling", "calling")
    return re.sub(r"\s+", " ", line)[:MAX_ERROR_CHARS]


class BatchHandler:
    """The flow's ``foreachBatch`` function and what it keeps between batches."""

    def __init__(
        self,
        spark: SparkSession,
        clients: FlowClients,
        plan: WritePlan,
        *,
        topics: TopicSync,
        store: OffsetMapStore,
        syncs: OffsetSyncWriter,
        progress: FlowProgress,
        stop: threading.Event,
        on_offsets_backwards: Callable[[set[str]], None] | None = None,
        per_partition: Callable[[], WritePlan] | None = None,
        shared: bool = False,
    ) -> None:
        self.spark = spark
        #: Other flows run in this Spark application: big batches are copied in rounds (``task.max.records``).
        self.shared = shared
        #: Called (before copying) with the topics whose planned range ends before it starts.
        self.on_offsets_backwards = on_offsets_backwards
        #: Exactly-once, when Spark's reader replaces the direct one: fences the groups' ids and
        #: returns the plan with one transactional id per partition (Spark's tasks hold one each).
        self.per_partition = per_partition
        self.flow: FlowConfig = clients.flow
        self.clients = clients
        #: The plan of the next batch; the flow replaces it when the target or the fencing changes.
        self.plan = plan
        self.topics = topics
        self.store = store
        self.syncs = syncs
        self.progress = progress
        self.stop = stop
        #: Source topics of the running query and their partition counts.
        self.subscribed: dict[str, int] = {}
        #: Exactly-once: which Python worker used each transactional id last (WritePlan.writers).
        self.writers: dict[str, str] = {}
        #: The next source offset per partition after the last batch (source-loss check).
        self.next_offset: dict[PartitionKey, int] = {}
        #: Gaps already reported, (partition, first lost offset): a replayed batch does not count them twice.
        self._reported: set[tuple[PartitionKey, int]] = set()
        #: Set after every committed batch; the supervisor resets its failure count on it.
        self.succeeded = False
        #: The flow's metrics (None: no metrics endpoint).
        self.metrics: FlowMetrics | None = None
        self._direct_unavailable_logged = False
        #: The whole error text of the last failed batch, until the supervisor takes it.
        self._failure: str | None = None

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        if self.stop.is_set():
            raise StopRequested(f"flow={self.flow.name} batch {batch_id} abandoned: stop requested")
        try:
            self._run_batch(batch_df, batch_id)
        except Exception as exc:  # noqa: BLE001 - handed to Spark in a short form, kept whole here
            raise self._failed(batch_id, exc) from None

    def take_failure(self) -> str | None:
        """The whole text of the last failed batch's error (once); None if none failed since."""
        text, self._failure = self._failure, None
        return text

    def _failed(self, batch_id: int, exc: Exception) -> Exception:
        """What Spark gets for a failed batch: short, without the Py4J dump (module docstring)."""
        if isinstance(exc, StopRequested):
            return exc
        text = error_text(exc)
        if self.stop.is_set() and any(name in text for name in _INTERRUPTED):
            return StopRequested(f"flow={self.flow.name} batch {batch_id} abandoned: stop requested")
        self._failure = text
        log.debug("flow=%s batch %d failed: %s", self.flow.name, batch_id, text)
        return BatchFailed(f"flow={self.flow.name} batch {batch_id} failed: {summary(text)}")

    def _run_batch(self, batch_df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        # The thread Spark calls us from inherited the pool from the query's start; set it again in
        # case this thread is another one (pyspark without pinned threads).
        self.spark.sparkContext.setLocalProperty(SCHEDULER_POOL, pool_name(self.flow.name))
        self._ensure_partitions()
        grown = time.monotonic()
        # Read per batch: topic limits may have changed, and the tasks extend each partition's
        # last segment.
        plan = dataclasses.replace(self.plan, tails=self.store.tails(), writers=dict(self.writers))
        ranges = planned_ranges(batch_df)
        planned = time.monotonic()
        backwards = {r.topic for r in ranges or () if r.until < r.start}
        if backwards and self.on_offsets_backwards is not None:
            self.on_offsets_backwards(backwards)  # a re-created topic stops the flow here
        self._check_source_loss(ranges, plan)
        prepared = time.monotonic()
        direct = self.flow.spark.source_reader == "direct"
        results = self._copy_direct(plan, ranges) if direct else None
        self.progress.reader = "direct" if results is not None else "spark"
        if results is None:
            if plan.exactly_once and plan.transaction_groups != PER_PARTITION:
                if self.per_partition is None:
                    raise WriteError(
                        f"flow={self.flow.name} exactly-once transaction groups need the direct reader", terminal=True
                    )
                fresh = self.per_partition()
                plan = dataclasses.replace(fresh, tails=plan.tails, writers={})
            results = self._copy_arrow(batch_df, plan)
        written = time.monotonic()
        # Not committed if a record was refused: raising here fails the batch.
        self.record(plan, results, durable=plan.exactly_once)
        copied = time.monotonic()
        finished = time.monotonic()
        if self.metrics is not None:
            self.metrics.batch(results, finished - started, time.time())
        log.debug(
            "flow=%s batch %d: %d records from %d partitions in %.0f ms (prepare %.0f: new partitions %.0f, "
            "planned ranges %.0f, source log starts %.0f; copy %.0f, offset map %.0f, after %.0f)",
            self.flow.name,
            batch_id,
            sum(r.records for r in results),
            len(results),
            (finished - started) * 1000,
            (prepared - started) * 1000,
            (grown - started) * 1000,
            (planned - grown) * 1000,
            (prepared - planned) * 1000,
            (written - prepared) * 1000,
            (copied - written) * 1000,
            (finished - copied) * 1000,
        )

    def record(self, plan: WritePlan, results: list[PartitionResult], *, durable: bool) -> None:
        """What the driver does with the tasks' results once they are final: a refused record stops
        the flow (a terminal :class:`WriteError`); the offset-map segments are recorded (made durable
        here unless the tasks already did: ``durable``); MM2's offset syncs; the flow's progress.

        Both engines call it: after each micro-batch, and on each streaming task's report.
        """
        refusals = sorted(r.error for r in results if r.error)
        if refusals:
            raise WriteError(refusals[0], terminal=True)
        segments = [Segment(r.topic, r.partition, u, d, n) for r in results for u, d, n in r.segments]
        self.syncs.emit(segments)  # MM2's offset syncs, for MM2's tools
        if durable:
            self.store.apply(segments)  # already on the target (a transaction, or the streaming task)
        else:
            self.store.write(segments)  # durable before Spark commits the batch
        self.writers.update({plan.transactional_id(r.topic, r.partition): r.writer for r in results})
        for r in results:
            if r.last_offset >= 0:
                self.next_offset[(r.topic, r.partition)] = r.last_offset + 1
        self.progress.add_batch(results)
        self.succeeded = True

    def _copy_arrow(self, batch_df: DataFrame, plan: WritePlan) -> list[PartitionResult]:
        """Spark's reader: the tasks write the Arrow batches Spark's Kafka source read."""

        def write(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            return copy_arrow_batches(iter(batches), plan)

        selected = batch_df.selectExpr(*INPUT_COLUMNS)
        rows = selected.mapInArrow(write, RESULT_SCHEMA).collect()
        return [PartitionResult.from_row(r.asDict(recursive=True)) for r in rows]

    def _copy_direct(self, plan: WritePlan, ranges: list[SourceRange] | None) -> list[PartitionResult] | None:
        """Copy the batch's planned ranges in at most one task per core; ``None`` if Spark's plan cannot be read.

        When other flows share the application, a batch above ``task.max.records`` per core is copied
        in rounds, one Spark job each (:func:`~sparkmirror.core.ranges.rounds`); the results are one
        per partition as if it were one job.
        """
        if ranges is None:
            if not self._direct_unavailable_logged:
                self._direct_unavailable_logged = True
                log.warning(
                    "flow=%s this Spark (%s) does not expose the planned offset ranges; reading through "
                    "Spark's Kafka source instead (as sparkmirror.source.reader = spark)",
                    self.flow.name,
                    self.spark.version,
                )
            return None
        cores = max(1, int(self.spark.sparkContext.defaultParallelism))
        total = sum(r.size for r in ranges)
        # Several flows: at most task.max.records per task and round, so the cores come free for the
        # other flows' jobs between rounds (the fair scheduler gives them to the pool with fewest tasks).
        limit = self.flow.spark.task_max_records * cores if self.shared else max(1, total)
        pieces = rounds(ranges, limit)
        sc = self.spark.sparkContext
        results: list[PartitionResult] = []
        for n, piece in enumerate(pieces, 1):
            if n > 1 and self.stop.is_set():
                # Not committed: at-least-once replays the rounds done, exactly-once resumes from the target.
                raise StopRequested(
                    f"flow={self.flow.name}: batch abandoned after {n - 1} of {len(pieces)} rounds: stop requested"
                )
            if n > 1:
                # Each round extends the segments of the one before and writes through the same workers.
                done = merge_rounds(results)
                tails = {(r.topic, r.partition): r.segments[-1] for r in done if r.segments}
                writers = {plan.transactional_id(r.topic, r.partition): r.writer for r in done}
                plan = dataclasses.replace(plan, tails={**plan.tails, **tails}, writers={**plan.writers, **writers})
            round_results = self._copy_round(sc, plan, piece, cores, f"{n}/{len(pieces)}")
            results.extend(round_results)
            if any(r.error for r in round_results):
                break  # a refused record stops the flow: the later rounds are not copied
        return merge_rounds(results)

    def _copy_round(
        self, sc: SparkContext, plan: WritePlan, ranges: list[SourceRange], cores: int, name: str
    ) -> list[PartitionResult]:
        """One Spark job copying ``ranges`` in at most one task per core."""
        records = sum(r.size for r in ranges)
        tasks = task_count(records, cores, exactly_once=plan.exactly_once)
        # Exactly-once: a transaction group's partitions in one task (its transactional id writes them all).
        key = group_key(plan.transaction_groups) if plan.exactly_once else None
        groups = share_out(ranges, tasks, key)
        if not groups:
            return []
        check_disjoint(groups, key)

        def copy(items: Iterable[list[SourceRange]]) -> Iterator[PartitionResult]:
            return copy_range_groups(items, plan)

        what = f"round {name}, " if name != "1/1" else ""
        sc.setJobDescription(f"sparkmirror {self.flow.name}: copy {what}{records:,} records")
        try:
            return list(sc.parallelize(groups, len(groups)).mapPartitions(copy).collect())
        finally:
            sc.setJobDescription(None)  # type: ignore[arg-type]

    def _ensure_partitions(self) -> None:
        """Grow remote topics before a batch that may hold new source partitions.

        Spark plans a batch before calling foreachBatch, so every partition in it exists on the
        source by now; one metadata request tells them all.
        """
        md = self.clients.source_admin.list_topics(timeout=30).topics
        current = {t: len(md[t].partitions) for t in self.subscribed if t in md and md[t].error is None}
        grown = {t: n for t, n in current.items() if n > self.subscribed.get(t, 0)}
        if grown:
            self.topics.sync(grown, configs=False)
            self.subscribed.update(grown)

    def check_source_loss(self, ranges: list[SourceRange], plan: WritePlan) -> None:
        """The streaming engine's check before its tasks start (see :meth:`_check_source_loss`)."""
        self._check_source_loss(ranges, plan)

    def _check_source_loss(self, ranges: list[SourceRange] | None, plan: WritePlan) -> None:
        """Before copying: records between where each partition stopped and the source's log start
        expired before they were mirrored. Say so (topic, partition, offsets, count), count them, and
        with ``sparkmirror.source.loss = fail`` stop the flow before anything past the gap is copied.

        Where a partition stopped is durable: Spark plans each range from its checkpoint, or, without
        one, from what the target says was mirrored (the offset map, the exactly-once progress), so
        the first batch after a restart is checked like any other. Spark's own check
        (``failOnDataLoss``) stays off: it also fires on normal events (a topic newly matched with a
        log start above 0) and would stop the flow on every restart. Gaps inside a range
        (compaction, transaction markers, aborted records) are not loss and are not looked at.
        """
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        starts: dict[PartitionKey, tuple[int, int | None]]
        if ranges is not None:
            starts = {(r.topic, r.partition): (r.start, r.until) for r in ranges if r.until > r.start}
        else:  # Spark's plan unreadable: where the last batch of this process ended (not durable)
            starts = {key: (offset, None) for key, offset in self.next_offset.items() if key[0] in self.subscribed}
        if not starts:
            return
        request = {TopicPartition(t, p): OffsetSpec.earliest() for t, p in starts}
        try:
            result = self.clients.source_admin.list_offsets(request, request_timeout=30)
            earliest = {(tp.topic, tp.partition): fut.result().offset for tp, fut in result.items()}
        except Exception as exc:  # noqa: BLE001 - the data path goes on; the next batch checks again
            log.warning("flow=%s cannot check the source's log start offsets: %s", self.flow.name, exc)
            return
        gaps = {key: start for key, (start, _until) in starts.items() if earliest.get(key, -1) > start}
        if gaps and plan.exactly_once:
            # A batch that committed its transactions but not Spark's checkpoint is planned again from
            # its old start: what the target's progress holds was mirrored.
            gaps = self._after_progress(gaps, plan)
        losses = []
        for key, first in sorted(gaps.items()):
            until = starts[key][1]
            end = earliest[key] if until is None else min(earliest[key], until)
            if end > first and (key, first) not in self._reported:
                losses.append(SourceLoss(key[0], key[1], first, end))
        for loss in losses:
            self._reported.add(((loss.topic, loss.partition), loss.first_offset))
            self.next_offset[(loss.topic, loss.partition)] = max(
                self.next_offset.get((loss.topic, loss.partition), 0), loss.end_offset
            )
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
            raise WriteError(
                f"{SOURCE_LOSS_PREFIX} flow={self.flow.name} records expired on the source before they were "
                f"mirrored: {', '.join(str(x) for x in losses)}. Nothing past the gap was copied; to go on, "
                "set sparkmirror.source.loss = report (the gap stays reported) and run again",
                terminal=True,
            )

    def _after_progress(self, gaps: dict[PartitionKey, int], plan: WritePlan) -> dict[PartitionKey, int]:
        """``gaps`` with each start raised to the exactly-once progress committed on the target."""
        remote = {self.topics.remote_name(t): t for t, _p in gaps}
        committed = committed_offsets(
            plan.consumer_config, plan.progress_group, [(self.topics.remote_name(t), p) for t, p in gaps]
        )
        out = dict(gaps)
        for (r, p), offset in committed.items():
            key = (remote[r], p)
            out[key] = max(out[key], offset)
        return out
