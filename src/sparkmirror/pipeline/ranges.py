"""The offset ranges Spark's Kafka source planned for a micro-batch, read on the driver.

The direct reader lets Spark's Kafka source do what it is good at (subscribing,
new partitions, ``maxOffsetsPerTrigger``, ``Trigger.AvailableNow``, the offset
and commit logs of the checkpoint) and copies the planned ranges itself. In
``foreachBatch`` the batch is a ``LogicalRDD`` whose lineage ends in Spark's
``DataSourceRDD``; its partitions carry the ``KafkaBatchInputPartition``\\ s and
their ``KafkaOffsetRange`` (topic, partition, from, until). Listing them reads
no record: records are read only when the RDD is computed, which the direct
reader never does.

This module is the only code that touches those Spark internals (over Py4J); it
must never compute the batch or read a record, and never raise: when the shape
is not found, :func:`planned_ranges` returns ``None`` and the job falls back to
reading through Spark (``sparkmirror.source.reader = spark``). The job warns
about that once, naming the Spark version; here each distinct reason is logged
once at DEBUG. The supported Spark versions and the test that pins the shape
(``tests/integration/test_planned_ranges.py``): docs/spark-versions.md.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from py4j.java_gateway import JavaObject
from py4j.protocol import Py4JError

from sparkmirror.core.ranges import SourceRange

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

#: The shape read, leaf to source: the batch's logical plan (a LogicalRDD), the RDD it wraps,
#: the DataSourceRDD that reads the source somewhere in that RDD's lineage, the input partitions
#: of its partitions (KafkaBatchInputPartition), and each one's offsetRange().
_BATCH_PLAN = "LogicalRDD"
_SOURCE_RDD = "DataSourceRDD"
_MAX_DEPTH = 32

#: A planned range as Spark prints it (see :func:`parse_range_text`).
_RANGE_TEXT = re.compile(r"KafkaOffsetRange\(([A-Za-z0-9._-]+)-(\d+),(-?\d+),(-?\d+),")
_INPUT_PARTITION_TEXT = "KafkaBatchInputPartition("

_reasons_logged: set[str] = set()


class _ShapeNotFound(Exception):
    """Spark's plan for the batch is not the shape this module reads."""


def planned_ranges(batch_df: DataFrame) -> list[SourceRange] | None:
    """The batch's ``[from, until)`` per source partition, or ``None`` if Spark's plan has another shape."""
    try:
        return _read_ranges(batch_df._jdf.queryExecution().logical(), batch_df.sparkSession._jvm)
    except _ShapeNotFound as exc:
        reason = str(exc)
    except Exception as exc:  # noqa: BLE001 - Py4J errors for a missing class or method: another Spark
        lines = str(exc).strip().splitlines() or [""]
        # Py4J names the JVM object called (o123), a new one each batch.
        reason = f"{type(exc).__name__}: " + re.sub(r"\bo\d+\.", "o.", lines[0])
    _log_once(batch_df, reason)
    return None


def _read_ranges(plan: JavaObject, jvm: JavaObject) -> list[SourceRange]:
    if _simple_name(plan) != _BATCH_PLAN:
        raise _ShapeNotFound(f"the batch's logical plan is {_simple_name(plan)}, not {_BATCH_PLAN}")
    rdd = _find_source_rdd(plan.rdd(), 0)
    if rdd is None:
        raise _ShapeNotFound(f"no {_SOURCE_RDD} within {_MAX_DEPTH} dependencies of the batch's RDD")
    # A few Py4J calls for the whole batch: reading each range's fields took ten calls a partition,
    # about a second a batch at 1,000 partitions (docs/performance.md).
    text = _input_partitions_text(rdd, jvm)
    ranges = parse_range_text(text) if text is not None else None
    del text  # it holds the executors' Kafka parameters
    if ranges is not None:
        return ranges
    ranges = []
    for part in rdd.partitions():
        for kafka_partition in _input_partitions(part):
            r = kafka_partition.offsetRange()
            tp = r.topicPartition()
            ranges.append(SourceRange(str(tp.topic()), int(tp.partition()), int(r.fromOffset()), int(r.untilOffset())))
    return ranges


def _input_partitions_text(rdd: JavaObject, jvm: JavaObject) -> str | None:
    """The text of the ``DataSourceRDD``'s input partitions (its private ``inputPartitions``, one per
    RDD partition), or ``None`` if this Spark has no such field."""
    try:
        field = rdd.getClass().getDeclaredField("inputPartitions")
        field.setAccessible(True)
        return str(jvm.scala.runtime.ScalaRunTime.stringOf(field.get(rdd)))
    except Py4JError:
        return None


def parse_range_text(text: str) -> list[SourceRange] | None:
    """The ranges in the text of a batch's input partitions, or ``None`` if it is not the expected
    shape (then the ranges are read field by field).

    Each ``KafkaBatchInputPartition(...)`` holds a ``KafkaOffsetRange(<topic>-<partition>,<from>,
    <until>,<preferred location>)`` (Scala case classes; Kafka's ``TopicPartition`` prints as
    ``topic-partition``, and topic names are ASCII letters, digits, ``.``, ``_`` and ``-``). The text
    also holds the executors' Kafka parameters, secrets included: it is parsed here and never kept,
    logged or put in an error.
    """
    found = _RANGE_TEXT.findall(text)
    if not found or len(found) != text.count(_INPUT_PARTITION_TEXT):
        return None
    return [SourceRange(topic, int(p), int(start), int(until)) for topic, p, start, until in found]


def _input_partitions(part: JavaObject) -> list[JavaObject]:
    """One ``DataSourceRDDPartition``'s input partitions, in either of the layouts Spark has used.

    Spark 4.2 holds one ``inputPartition: Option[InputPartition]`` per RDD partition; Spark 4.0
    and 4.1 held ``inputPartitions: Seq[InputPartition]``. The pinned Spark's layout is tried first.
    """
    try:
        option = part.inputPartition()
    except Py4JError:
        seq = part.inputPartitions()
        return [seq.apply(i) for i in range(seq.length())]
    return [option.get()] if option.isDefined() else []


def _find_source_rdd(rdd: JavaObject, depth: int) -> JavaObject | None:
    if _simple_name(rdd) == _SOURCE_RDD:
        return rdd
    if depth >= _MAX_DEPTH:
        return None
    deps = rdd.dependencies()
    for i in range(deps.length()):
        found = _find_source_rdd(deps.apply(i).rdd(), depth + 1)
        if found is not None:
            return found
    return None


def _simple_name(java_object: JavaObject) -> str:
    return str(java_object.getClass().getSimpleName())


def _log_once(batch_df: DataFrame, reason: str) -> None:
    if reason in _reasons_logged:
        return
    _reasons_logged.add(reason)
    try:
        version = str(batch_df.sparkSession.version)
    except Exception:  # noqa: BLE001 - only for the log line
        version = "unknown"
    log.debug("planned ranges not readable from Spark %s's plan: %s", version, reason)
