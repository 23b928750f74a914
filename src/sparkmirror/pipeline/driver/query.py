"""The Spark streaming query of a flow: Spark's Kafka source subscribed to the flow's topics,
each micro-batch handed to a function, and Spark's checkpoint (with the clusters it belongs to).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sparkmirror.config.model import FlowConfig
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.retry import retry_kafka
from sparkmirror.pipeline.exceptions import FlowFailed
from sparkmirror.pipeline.session import SCHEDULER_POOL, pool_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)

#: Spark's ``startingOffsets`` per topic and partition (-2: earliest).
StartingOffsets = dict[str, dict[str, int]]


def checkpoint_dir(flow: FlowConfig) -> str:
    base = Path(flow.spark.checkpoint_location)
    return str((base / f"{flow.source}-to-{flow.target}").absolute())


def checkpoint_exists(flow: FlowConfig) -> bool:
    """Whether the flow's Spark checkpoint holds a committed batch (True when it cannot be told: not local)."""
    location = checkpoint_dir(flow)
    if "://" in location and not location.startswith("file:"):
        return True
    commits = Path(location.removeprefix("file:")) / "commits"
    return commits.is_dir() and any(commits.iterdir())


def start_query(
    spark: SparkSession,
    clients: FlowClients,
    topics: dict[str, int],
    on_batch: Callable[[DataFrame, int], None],
    *,
    once: bool,
    starting_offsets: StartingOffsets | None = None,
) -> StreamingQuery:
    """Start the flow's query over ``topics``; Spark calls ``on_batch`` for every micro-batch."""
    flow = clients.flow
    token_url = flow.source_consumer_props().get("sasl.oauthbearer.token.endpoint.url")
    if token_url:
        allow_oauth_url(spark, token_url)
    reader = spark.readStream.format("kafka")
    for k, v in clients.spark_source_options().items():
        reader = reader.option(k, v)
    reader = (
        reader.option("subscribe", ",".join(topics))
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("kafka.isolation.level", "read_committed")
        # Loss on the source is detected and reported by the batch handler; Spark's check would
        # also stop the flow on deleted or newly matched topics, forever.
        .option("failOnDataLoss", "false")
    )
    if starting_offsets is not None:
        # Used only when there is no checkpoint: the target's progress (exactly-once) or offset map
        # (at-least-once) says where the flow stands.
        reader = reader.option("startingOffsets", json.dumps(starting_offsets))
    if flow.spark.batch_max_records:
        reader = reader.option("maxOffsetsPerTrigger", str(flow.spark.batch_max_records))
    writer = (
        reader.load()
        .writeStream.queryName(f"sparkmirror {flow.name}")
        .option("checkpointLocation", checkpoint_dir(flow))
        .foreachBatch(on_batch)
    )
    if once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{flow.spark.trigger_interval_ms} milliseconds")
    # The query's thread inherits this thread's local properties when it starts: its jobs run in the
    # flow's own fair-scheduler pool. Put back after, for the next flow started from here.
    sc = spark.sparkContext
    before = sc.getLocalProperty(SCHEDULER_POOL)
    sc.setLocalProperty(SCHEDULER_POOL, pool_name(flow.name))
    try:
        return writer.start()
    finally:
        sc.setLocalProperty(SCHEDULER_POOL, before)  # type: ignore[arg-type]  # None removes it


#: Kafka 4's JVM clients fetch tokens only from URLs this system property lists.
OAUTH_ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"


def allow_oauth_url(spark: SparkSession, url: str) -> None:
    """Let the Spark JVM's Kafka clients reach the configured token endpoint, as an MM2 operator
    does with ``-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls`` (the URL comes from the file).
    The driver's JVM only: on a Spark cluster, set it in ``spark.executor.extraJavaOptions``."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    system = jvm.java.lang.System
    current = [u for u in str(system.getProperty(OAUTH_ALLOWED_URLS) or "").split(",") if u]
    if url not in current:
        system.setProperty(OAUTH_ALLOWED_URLS, ",".join([*current, url]))
        log.info("flow token endpoint %s added to %s in the Spark JVM", url, OAUTH_ALLOWED_URLS)


def check_checkpoint_identity(clients: FlowClients) -> None:
    """Refuse a checkpoint written for other clusters.

    Spark's checkpoint holds source offsets and nothing else: pointed at a rebuilt source cluster
    with the same alias, it would silently skip that many records of every partition. A small
    file beside it records the cluster ids it belongs to.
    """
    flow = clients.flow
    location = checkpoint_dir(flow)
    if "://" in location and not location.startswith("file:"):
        log.info("flow=%s checkpoint %s (not local: cluster identity not checked)", flow.name, location)
        return
    path = Path(location.removeprefix("file:"))
    ident = path.with_name(path.name + ".clusters.json")
    src = retry_kafka(
        lambda: clients.source_admin.describe_cluster(request_timeout=30).result(), what="describe source cluster"
    ).cluster_id
    tgt = retry_kafka(
        lambda: clients.target_admin.describe_cluster(request_timeout=30).result(), what="describe target cluster"
    ).cluster_id
    current = {
        "source": {"alias": flow.source, "cluster_id": src},
        "target": {"alias": flow.target, "cluster_id": tgt},
    }
    if path.exists() and ident.exists():
        stored = json.loads(ident.read_text())
        for side in ("source", "target"):
            was, now = stored.get(side, {}).get("cluster_id"), current[side]["cluster_id"]
            if was != now:
                raise FlowFailed(
                    f"flow={flow.name}: the checkpoint {path} was written for {side} cluster id "
                    f"{was} but {current[side]['alias']} is cluster id {now}; "
                    "resuming would skip or repeat records. Use another "
                    "sparkmirror.checkpoint.location, or delete the checkpoint to mirror from the start"
                )
    path.parent.mkdir(parents=True, exist_ok=True)
    ident.write_text(json.dumps(current, indent=2) + "\n")
    log.info("flow=%s checkpoint %s (source cluster %s, target cluster %s)", flow.name, path, src, tgt)
