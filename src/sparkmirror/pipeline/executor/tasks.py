"""The task bodies Spark runs: a source feeding the sink, and the task's results.

:func:`copy_arrow_batches` is the ``mapInArrow`` body of the Spark reader, :func:`copy_range_groups`
the ``mapPartitions`` body of the direct reader. Both return only when every record handed to the
sink is final (see :mod:`.sink`): then, and only then, may Spark count the task as done.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Generator, Iterable, Iterator
from typing import TYPE_CHECKING

from sparkmirror.core.ranges import SourceRange
from sparkmirror.logs import worker_logging
from sparkmirror.pipeline.executor.commit import commit_for
from sparkmirror.pipeline.executor.plan import WritePlan
from sparkmirror.pipeline.executor.results import PartitionResult, arrow_batches
from sparkmirror.pipeline.executor.sink import Sink
from sparkmirror.pipeline.executor.sources import RangeReader, arrow_records

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


def copy_arrow_batches(batches: Iterator[pa.RecordBatch], plan: WritePlan) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: write every row of the task's batches; yield the results as Arrow rows."""
    keep_zip_directories()
    worker_logging()
    sink = Sink(plan, commit_for(plan))
    try:
        with collector_paused():
            for partition, records in arrow_records(batches):
                sink.write(partition, records)
            results = sink.close()
    except BaseException:
        sink.abandon()
        raise
    yield from arrow_batches(results)


def copy_range_groups(groups: Iterable[list[SourceRange]], plan: WritePlan) -> Iterator[PartitionResult]:
    """``mapPartitions`` body: copy each group of ranges handed to this task; yield its results."""
    keep_zip_directories()
    worker_logging()
    for ranges in groups:
        yield from copy_ranges(ranges, plan)


def copy_ranges(ranges: list[SourceRange], plan: WritePlan) -> list[PartitionResult]:
    """Copy ``ranges`` from the source to the target; one result per source partition."""
    sink = Sink(plan, commit_for(plan))
    try:
        # Exactly-once: fences earlier writers, then reads every partition's progress in one request.
        floors = sink.open([(r.topic, r.partition) for r in ranges])
        todo = []
        for r in ranges:
            done = floors[(r.topic, r.partition)]
            if done > r.start:
                log.info(
                    "flow=%s %s[%d] skipping offsets %d..%d, already committed on the target (progress=%d)",
                    plan.flow,
                    r.topic,
                    r.partition,
                    r.start,
                    min(done, r.until) - 1,
                    done,
                )
            todo.append(SourceRange(r.topic, r.partition, max(r.start, done), r.until))
        reader = iter(RangeReader(plan, todo))
        with collector_paused():
            try:
                for partition, records in reader:
                    sink.write(partition, records)
            finally:
                reader.close()  # a failed write closes the reader now (it drops a failed consumer)
            return sink.close()
    except BaseException:
        sink.abandon()
        raise


@contextlib.contextmanager
def collector_paused() -> Generator[None, None, None]:
    """Python's cyclic garbage collector off while a task moves records; as it was afterwards.

    Every record makes container objects (librdkafka's messages, the record tuples, a delivery
    report each) that live until their run is produced and acknowledged, so they outlive the
    young generation and keep triggering collections of the whole heap: with the collector on,
    a fifth of a task's CPU went to it (``bench/direct_path.py``, docs/performance.md). The copy
    makes no reference cycles (records, lists and bound methods are freed by reference counting),
    so nothing waits for the collector meanwhile. Nested pauses leave it to the outermost one.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def keep_zip_directories() -> None:
    """Stop PySpark's Python workers from re-reading every zip on their path before each task.

    PySpark calls ``importlib.invalidate_caches()`` at the start of every task; on Python 3.11 each
    ``zipimporter`` then re-reads its archive's whole directory, and a worker holds one per package
    imported from ``pyspark.zip``, the py4j zip and the spark-core jar: tens of milliseconds per
    task, whatever its size (docs/performance.md has the measurement). Those archives do not
    change while a worker lives (a file added to the job later is a new path with its own
    importer), so keeping what was read is safe. Idempotent; called in the executors only.
    """
    import zipimport

    current = zipimport.zipimporter.invalidate_caches
    if getattr(current, "_sparkmirror_keeps", False):
        return

    def keep(self: zipimport.zipimporter) -> None:
        return None

    keep._sparkmirror_keeps = True  # type: ignore[attr-defined]
    zipimport.zipimporter.invalidate_caches = keep  # type: ignore[method-assign]
