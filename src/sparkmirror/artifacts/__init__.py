"""The JVM jars sparkmirror runs on, resolved from Maven Central once and then read offline.

The copy itself needs none: its tasks read and write with librdkafka. The dev
clusters, the tests and the benchmark need Kafka's broker, its MM2 client and MM2
itself.
Each is an :class:`ArtifactSet` whose jars live in one folder of the cache under
``$SPARKMIRROR_CACHE`` (default ``~/.cache/sparkmirror``). This package must never
reach the network except in :func:`fetch` (``sparkmirror setup``, or a benchmark's
first run), never write into the project tree, and never import a Kafka client or
start a JVM.
"""

from sparkmirror.artifacts.cache import (
    KAFKA_VERSION,
    SCALA_BINARY,
    ArtifactSet,
    cache_root,
    fetch,
    kafka_broker_artifacts,
    mm2_artifacts,
    mm2_client_artifacts,
    setup_artifacts,
)

__all__ = [
    "KAFKA_VERSION",
    "SCALA_BINARY",
    "ArtifactSet",
    "cache_root",
    "fetch",
    "kafka_broker_artifacts",
    "mm2_artifacts",
    "mm2_client_artifacts",
    "setup_artifacts",
]
