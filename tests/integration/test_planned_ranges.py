"""The offset ranges Spark plans for a micro-batch, read from Spark's internals by ``pipeline/ranges.py``.

The direct reader copies the ``[from, until)`` ranges that Spark's Kafka source
planned; it finds them in Spark's private plan (``LogicalRDD`` ->
``DataSourceRDD`` -> ``KafkaBatchInputPartition.offsetRange()``). When a Spark
release changes that shape, ``planned_ranges`` returns ``None`` and the job
quietly reads through Spark instead, slower. These tests run a real streaming
query on the installed Spark against a real topic and fail, naming the Spark
version, when the shape is not found or the ranges are not the records Spark
reads. docs/spark-versions.md says how to check a new Spark with them.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

from kafka_helpers import Rec, create_topics, produce, unique
from sparkmirror.core.ranges import SourceRange
from sparkmirror.pipeline import ranges
from sparkmirror.pipeline.ranges import parse_range_text, planned_ranges

PARTITIONS = 3
#: Records per partition: uneven, so that a range of the wrong partition shows.
COUNTS = {0: 40, 1: 55, 2: 17}


def _produce(bootstrap: str, topic: str) -> None:
    # Recent timestamps: the brokers' retention keeps them for the whole test.
    now = int(time.time() * 1000)
    create_topics(bootstrap, {topic: PARTITIONS})
    for p, n in COUNTS.items():
        produce(bootstrap, topic, p, [Rec(f"k{i}".encode(), f"{p}/{i}".encode(), (), now - 1000 + i) for i in range(n)])


def _run_query(
    spark: Any, bootstrap: str, topic: str, checkpoint: Path, max_offsets: int | None
) -> list[dict[str, Any]]:
    """One ``Trigger.AvailableNow`` query, read as the job reads; per batch: the planned and the read ranges."""
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("kafka.isolation.level", "read_committed")
        .option("failOnDataLoss", "false")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    batches: list[dict[str, Any]] = []

    def each(batch_df: Any, batch_id: int) -> None:
        planned = planned_ranges(batch_df)  # before anything computes the batch, as in the job
        read = {
            (r["topic"], r["partition"]): (r["first"], r["last"] + 1, r["records"])
            for r in batch_df.groupBy("topic", "partition")
            .agg(F.min("offset").alias("first"), F.max("offset").alias("last"), F.count("*").alias("records"))
            .collect()
        }
        batches.append({"id": batch_id, "planned": planned, "read": read})

    query = (
        reader.load()
        .writeStream.queryName(unique("planned-ranges"))
        .option("checkpointLocation", str(checkpoint))
        .foreachBatch(each)
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(180), "the query did not finish within 180 s"
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    return batches


@pytest.mark.parametrize("path", ["text", "field-by-field"])
@pytest.mark.parametrize("max_offsets", [None, 25], ids=["one-batch", "max-offsets-per-trigger"])
def test_planned_ranges_are_the_offsets_produced(bootstraps, spark, checkpoints: Path, max_offsets, path, monkeypatch):
    """On the installed Spark the shape is found, and each batch's ranges are exactly the records it holds,
    read from the partitions' text in one call (the job's way) or field by field (its fallback)."""
    parsed: list[object] = []

    def parse(text: str) -> list[SourceRange] | None:
        got = None if path == "field-by-field" else parse_range_text(text)
        parsed.append(got)
        return got

    monkeypatch.setattr("sparkmirror.pipeline.ranges.parse_range_text", parse)
    topic = unique("ranges")
    _produce(bootstraps["A"], topic)

    batches = _run_query(spark, bootstraps["A"], topic, checkpoints, max_offsets)

    assert batches, "Spark ran no batch"
    covered: dict[int, list[SourceRange]] = {p: [] for p in COUNTS}
    for batch in batches:
        planned = batch["planned"]
        assert planned is not None, (
            f"Spark {spark.version}: planned_ranges found no offset ranges in batch {batch['id']}'s plan; "
            "the direct reader would fall back to Spark's reader. Spark's internal shape changed: "
            "see docs/spark-versions.md"
        )
        nonempty = [r for r in planned if r.size]
        assert all(r.topic == topic for r in planned), planned
        assert len({r.partition for r in nonempty}) == len(nonempty), f"a partition planned twice: {planned}"
        # Planned [from, until) == what Spark itself reads for the batch (no transactions: no gaps).
        assert {(r.topic, r.partition): (r.start, r.until, r.size) for r in nonempty} == batch["read"], (
            f"Spark {spark.version}: batch {batch['id']} planned {planned}, read {batch['read']}"
        )
        for r in nonempty:
            covered[r.partition].append(r)

    # Across the batches, every produced offset exactly once, in order.
    for p, n in COUNTS.items():
        ranges = covered[p]
        assert ranges and ranges[0].start == 0, f"partition {p}: {ranges}"
        assert all(a.until == b.start for a, b in zip(ranges, ranges[1:], strict=False)), f"partition {p}: {ranges}"
        assert ranges[-1].until == n, f"partition {p}: {ranges}"
    if max_offsets:
        assert len(batches) >= sum(COUNTS.values()) // max_offsets, "maxOffsetsPerTrigger did not split the input"
    if path == "text":
        assert parsed and all(p is not None for p in parsed), f"Spark {spark.version}: the partitions' text not read"


def test_another_shape_gives_none_without_a_warning(spark, caplog, monkeypatch):
    """A batch of another shape: ``None``, no exception, and no WARNING from the adapter (the job warns once)."""
    monkeypatch.setattr(ranges, "_reasons_logged", set())
    with caplog.at_level(logging.DEBUG, logger="sparkmirror.pipeline.ranges"):
        assert planned_ranges(spark.range(3)) is None
        assert planned_ranges(spark.range(3)) is None
    mine = [r for r in caplog.records if r.name == "sparkmirror.pipeline.ranges"]
    assert [r.levelno for r in mine] == [logging.DEBUG], [r.getMessage() for r in mine]
    assert spark.version in mine[0].getMessage()
