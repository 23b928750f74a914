"""The offset ranges Spark's Kafka source planned for a micro-batch, read on the driver.

The direct reader lets Spark's Kafka source do what it is good at (subscribing,
new partitions, ``maxOffsetsPerTrigger``, ``Trigger.AvailableNow``, the offset
and commit logs of the checkpoint) and copies the planned ranges itself. In
``foreachBatch`` the batch is a ``LogicalRDD`` whose lineage ends in Spark's
``DataSourceRDD``; its partitions carry the ``KafkaBatchInputPartition``\\ s and
their ``KafkaOffsetRange`` (topic, partition, from, until). Listing them reads
no record: records are read only when the RDD is computed, which the direct
reader never does.

These are Spark internals (pyspark is pinned, see pyproject.toml): when the
shape is not found, :func:`planned_ranges` returns ``None`` and the job falls
back to reading through Spark (``sparkmirror.source.reader = spark``).
"""

from __future__ import annotations

import logging
from typing import Any

from py4j.protocol import Py4JError

from sparkmirror.core.ranges import SourceRange

log = logging.getLogger(__name__)

_SOURCE_RDD = "DataSourceRDD"
_MAX_DEPTH = 32


def planned_ranges(batch_df: Any) -> list[SourceRange] | None:
    """The batch's ``[from, until)`` per source partition, or ``None`` if Spark's plan has another shape."""
    try:
        leaf = batch_df._jdf.queryExecution().logical()
        if leaf.getClass().getSimpleName() != "LogicalRDD":
            return None
        rdd = _find_source_rdd(leaf.rdd(), 0)
        if rdd is None:
            return None
        ranges: list[SourceRange] = []
        for part in rdd.partitions():
            for kafka_partition in _input_partitions(part):
                r = kafka_partition.offsetRange()
                tp = r.topicPartition()
                ranges.append(
                    SourceRange(str(tp.topic()), int(tp.partition()), int(r.fromOffset()), int(r.untilOffset()))
                )
        return ranges
    except Exception as exc:  # noqa: BLE001 - Py4J errors for a missing method: another Spark
        log.debug("planned ranges not readable from this Spark's plan: %s", exc)
        return None


def _input_partitions(part: Any) -> list[Any]:
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


def _find_source_rdd(rdd: Any, depth: int) -> Any:
    if rdd.getClass().getSimpleName() == _SOURCE_RDD:
        return rdd
    if depth >= _MAX_DEPTH:
        return None
    deps = rdd.dependencies()
    for i in range(deps.length()):
        found = _find_source_rdd(deps.apply(i).rdd(), depth + 1)
        if found is not None:
            return found
    return None
