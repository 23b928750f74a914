"""Spark's Real-time Mode copying topics from A to B: the benchmark's measure of it beside the engine.

Not a replicator: no offset map, no checkpoints, no refusal handling, Spark's own Kafka sink (at
least once, no record timestamps). It is the shortest query that copies records as sparkmirror does
(key, value, headers, same partition, ``A.<topic>``) in Real-time Mode (Spark 4.1+,
``trigger(realTime=...)``), so ``bench/latency_probe.py --system spark-realtime`` can set its latency
and CPU beside the engine's, MM2's and the limit loop's (docs/decisions.md, "Why not Spark's
Real-time Mode"). Real-time Mode runs one long task per source partition, so the session is
``local[N]`` with N the topics' partitions: task slots, not the host's cores.

    .venv/bin/python bench/realtime_mode.py SOURCE_BOOTSTRAP TARGET_BOOTSTRAP TOPIC[,TOPIC...] \\
        --producer FILE [--checkpoint-interval "5 seconds"] [--workdir DIR]

Spark's Kafka connector (``spark-sql-kafka-0-10``) is fetched from Maven Central into the jar cache
on the first run, then read from there. Runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import re
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pyspark
from confluent_kafka.admin import AdminClient

from sparkmirror.artifacts.cache import ArtifactSet, fetch
from sparkmirror.config.properties import read_properties_file

log = logging.getLogger("realtime_mode")


def connector_jars() -> list[str]:
    """Spark's Kafka connector and what it needs beyond pyspark's own jars (same artifact, any version:
    pyspark's is the one on the class path)."""
    folder = fetch(ArtifactSet(
        name=f"spark-sql-kafka-{pyspark.__version__}",
        coordinates=(f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}",),
    ))  # fmt: skip
    ours = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [str(p) for p in sorted(folder.glob("*.jar")) if _artifact(p.name) not in ours]


def _artifact(jar: str) -> str:
    """A jar file's artifact id: its name up to the version, the last ``-<digit>...`` part with any
    classifier after it (``kafka-clients-3.9.2.jar`` -> ``kafka-clients``,
    ``spark-sql-kafka-0-10_2.13-4.2.0.jar`` -> ``spark-sql-kafka-0-10_2.13``,
    ``netty-transport-native-epoll-4.2.13.Final-linux-x86_64.jar`` -> ``netty-transport-native-epoll``)."""
    m = re.match(r"(.+?)-(\d+\.[\w.]*)(-[A-Za-z][\w.-]*)?\.jar$", jar)
    return m.group(1) if m else jar


def partitions(bootstrap: str, topics: list[str]) -> int:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return sum(len(meta.topics[t].partitions) for t in topics)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source")
    ap.add_argument("target")
    ap.add_argument("topics", help="comma-separated")
    ap.add_argument("--producer", required=True, help="a properties file of the sink's producer settings")
    ap.add_argument("--checkpoint-interval", default="5 seconds", help="the realTime trigger's duration")
    ap.add_argument("--workdir", default="")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    topics = args.topics.split(",")
    slots = partitions(args.source, topics)
    producer = read_properties_file(Path(args.producer))
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    work = Path(args.workdir or tempfile.mkdtemp(prefix="realtime-mode-"))
    shutil.rmtree(work / "checkpoint", ignore_errors=True)  # a new query each start: each probe's clusters are new
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master(f"local[{slots}]")
        .appName("realtime-mode-copy")
        .config("spark.jars", ",".join(connector_jars()))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.source)
        .option("subscribe", ",".join(topics))
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )
    copy = source.select(
        F.concat(F.lit("A."), F.col("topic")).alias("topic"), "partition", "key", "value", "headers"
    )
    writer = (
        copy.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", args.target)
        .option("checkpointLocation", str(work / "checkpoint"))
        .outputMode("update")
        .trigger(realTime=args.checkpoint_interval)  # type: ignore[call-overload]  # pyspark 4.2's stubs lack it
    )
    for k, v in producer.items():
        writer = writer.option(f"kafka.{k}", v)
    query = writer.start()
    log.info("Real-time Mode query started: %d partitions, local[%d], checkpoint every %s",
             slots, slots, args.checkpoint_interval)  # fmt: skip

    # The handler (set before the session starts) only notes the signal: it runs inside whatever py4j
    # call the main thread is in, and a py4j call from there is a reentrant read of the same socket. The
    # probe signals the whole process group, Spark's JVM too, so the stop below often meets a gateway
    # already closing and ends with a py4j error: the measurement was taken before.
    while not stopping and query.isActive:
        query.awaitTermination(1)
    log.info("stopping the query")
    query.stop()
    spark.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
