"""The metrics of one sparkmirror process, and the HTTP endpoint Prometheus scrapes.

One :class:`MirrorMetrics` per process (its own registry, so tests can hold several); one
:class:`FlowMetrics` per flow binds the ``source`` and ``target`` labels. Per-partition metrics
are labelled with the *remote* topic, as MM2 labels its ``topic`` tag; checkpoint metrics with the
flow. Names follow MM2's (``record-count`` becomes ``sparkmirror_record_count_total``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram

from sparkmirror.core.status import STATES
from sparkmirror.errors import ConfigError

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from sparkmirror.pipeline.executor.results import PartitionResult

log = logging.getLogger(__name__)

_FLOW = ("source", "target")
_PARTITION = ("source", "target", "topic", "partition")

#: Every metric a run exports (as scraped: counters with ``_total``), with its meaning; the
#: source of docs/operations.md's table.
METRIC_NAMES: dict[str, str] = {
    "sparkmirror_record_count_total": "Records written to the target and acknowledged (MM2 record-count).",
    "sparkmirror_byte_count_total": "Key and value bytes of those records (MM2 byte-count).",
    "sparkmirror_record_age_ms": "Mean age of the last batch's records when the task read them (MM2 record-age-ms).",
    "sparkmirror_record_age_ms_min": "Age of the youngest record of the last batch, when read (MM2 record-age-ms-min).",
    "sparkmirror_record_age_ms_max": "Age of the oldest record of the last batch, when read (MM2 record-age-ms-max).",
    "sparkmirror_replication_latency_ms": "Mean time from a record's timestamp to its acknowledgement on the "
    "target, last batch (MM2 replication-latency-ms).",
    "sparkmirror_replication_latency_ms_min": "Least of those, last batch (MM2 replication-latency-ms-min).",
    "sparkmirror_replication_latency_ms_max": "Most of those, last batch (MM2 replication-latency-ms-max).",
    "sparkmirror_dead_lettered_total": "Records the target refused, written to the dead-letter topic.",
    "sparkmirror_records_lost_total": "Records deleted on the source (retention) before they were mirrored.",
    "sparkmirror_lag_records": "Records on the source not yet mirrored.",
    "sparkmirror_lag_seconds": "Age of the oldest record not yet mirrored (0 when none waits).",
    "sparkmirror_batch_duration_seconds": "Wall time of one copy task's interval, from its last report to this one.",
    "sparkmirror_last_batch_timestamp_seconds": "Unix time of the last interval a copy task made final.",
    "sparkmirror_flow_state": "The flow's state: 1 for the current one of starting, running, paused, restarting, "
    "stopped, failed.",
    "sparkmirror_source_topic_deletions_total": "Source topics the flow mirrored found deleted on the source "
    "(labelled with the remote topic): no longer copied.",
    "sparkmirror_remote_topic_deletions_total": "Remote topics deleted on the target after their source topic was "
    "(sparkmirror.sync.topic.deletions = true).",
    "sparkmirror_throttled_seconds_total": "Seconds the flow's copy waited for its byte limit (its tasks' waits, "
    "averaged over its tasks): its rate is the share of the time the flow is held back.",
    "sparkmirror_throttle_bytes_per_second": "The flow's byte limit in effect (sparkmirror.throttle.bytes.per.second "
    "or `sparkmirror throttle`, within its target's); 0: none.",
    "sparkmirror_flow_restarts_total": "Restarts of the flow's copy after a failure.",
    "sparkmirror_checkpoint_latency_ms": "Time from reading the source groups' offsets to their checkpoints being "
    "durable on the target, longest slice of the last cycle (MM2 checkpoint-latency-ms, per flow).",
    "sparkmirror_checkpoint_count_total": "Checkpoints written to the target (a group's position on a partition "
    "that moved).",
    "sparkmirror_last_checkpoint_timestamp_seconds": "Unix time of the last completed checkpoint cycle.",
    "sparkmirror_group_checkpoint_timestamp_seconds": "Per consumer group: Unix time of the last cycle that read its "
    "offsets and left its checkpoints current on the target (a failover now starts it from there).",
}


def _doc(name: str) -> str:
    return METRIC_NAMES[name]


class MirrorMetrics:
    """The registry and metric families of one process."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.records = Counter(
            "sparkmirror_record_count", _doc("sparkmirror_record_count_total"), _PARTITION, registry=r
        )
        self.bytes = Counter("sparkmirror_byte_count", _doc("sparkmirror_byte_count_total"), _PARTITION, registry=r)
        self.age = {
            s: Gauge(f"sparkmirror_record_age_ms{s}", _doc(f"sparkmirror_record_age_ms{s}"), _PARTITION, registry=r)
            for s in ("", "_min", "_max")
        }
        self.latency = {
            s: Gauge(
                f"sparkmirror_replication_latency_ms{s}",
                _doc(f"sparkmirror_replication_latency_ms{s}"),
                _PARTITION,
                registry=r,
            )
            for s in ("", "_min", "_max")
        }
        self.dead_lettered = Counter(
            "sparkmirror_dead_lettered", _doc("sparkmirror_dead_lettered_total"), _PARTITION, registry=r
        )
        self.lost = Counter("sparkmirror_records_lost", _doc("sparkmirror_records_lost_total"), _PARTITION, registry=r)
        self.lag_records = Gauge("sparkmirror_lag_records", _doc("sparkmirror_lag_records"), _PARTITION, registry=r)
        self.lag_seconds = Gauge("sparkmirror_lag_seconds", _doc("sparkmirror_lag_seconds"), _PARTITION, registry=r)
        self.batch_duration = Histogram(
            "sparkmirror_batch_duration_seconds",
            _doc("sparkmirror_batch_duration_seconds"),
            _FLOW,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=r,
        )
        self.last_batch = Gauge(
            "sparkmirror_last_batch_timestamp_seconds",
            _doc("sparkmirror_last_batch_timestamp_seconds"),
            _FLOW,
            registry=r,
        )
        self.state = Enum(
            "sparkmirror_flow_state", _doc("sparkmirror_flow_state"), _FLOW, states=list(STATES), registry=r
        )
        self.restarts = Counter("sparkmirror_flow_restarts", _doc("sparkmirror_flow_restarts_total"), _FLOW, registry=r)
        topic = (*_FLOW, "topic")
        self.source_deleted = Counter(
            "sparkmirror_source_topic_deletions", _doc("sparkmirror_source_topic_deletions_total"), topic, registry=r
        )
        self.remote_deleted = Counter(
            "sparkmirror_remote_topic_deletions", _doc("sparkmirror_remote_topic_deletions_total"), topic, registry=r
        )
        self.throttled = Counter(
            "sparkmirror_throttled_seconds", _doc("sparkmirror_throttled_seconds_total"), _FLOW, registry=r
        )
        self.throttle_limit = Gauge(
            "sparkmirror_throttle_bytes_per_second", _doc("sparkmirror_throttle_bytes_per_second"), _FLOW, registry=r
        )
        self.checkpoint_latency = Gauge(
            "sparkmirror_checkpoint_latency_ms", _doc("sparkmirror_checkpoint_latency_ms"), _FLOW, registry=r
        )
        self.checkpoints = Counter(
            "sparkmirror_checkpoint_count", _doc("sparkmirror_checkpoint_count_total"), _FLOW, registry=r
        )
        self.last_checkpoint = Gauge(
            "sparkmirror_last_checkpoint_timestamp_seconds",
            _doc("sparkmirror_last_checkpoint_timestamp_seconds"),
            _FLOW,
            registry=r,
        )
        self.group_checkpoint = Gauge(
            "sparkmirror_group_checkpoint_timestamp_seconds",
            _doc("sparkmirror_group_checkpoint_timestamp_seconds"),
            (*_FLOW, "group"),
            registry=r,
        )
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def flow(self, source: str, target: str, remote_name: Callable[[str], str]) -> FlowMetrics:
        return FlowMetrics(self, source, target, remote_name)

    def serve(self, host: str, port: int) -> None:
        """Serve ``/metrics`` on ``host:port`` from a daemon thread."""
        from prometheus_client import start_http_server

        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            raise ConfigError(
                f"sparkmirror.metrics.port: cannot serve metrics on {host}:{port}: {exc.strerror or exc}",
                key="sparkmirror.metrics.port",
            ) from None
        log.info("metrics at http://%s:%d/metrics", host or "0.0.0.0", port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class FlowMetrics:
    """The metrics of one flow; called from the tasks' reports (driver/stream.py) and the chores."""

    def __init__(self, metrics: MirrorMetrics, source: str, target: str, remote_name: Callable[[str], str]) -> None:
        self.m = metrics
        self.source = source
        self.target = target
        self._remote_name = remote_name
        self._remote: dict[str, str] = {}
        self._groups: set[str] = set()

    def _labels(self, topic: str, partition: int) -> tuple[str, str, str, str]:
        remote = self._remote.get(topic)
        if remote is None:
            remote = self._remote[topic] = self._remote_name(topic)
        return (self.source, self.target, remote, str(partition))

    def batch(self, results: Iterable[PartitionResult], seconds: float, now_s: float) -> None:
        """A task's interval made final: its result rows and its length."""
        m = self.m
        for r in results:
            n = r.records
            if n <= 0:
                continue
            labels = self._labels(r.topic, r.partition)
            written = n - r.dead_lettered
            if written > 0:
                m.records.labels(*labels).inc(written)
            m.bytes.labels(*labels).inc(r.bytes)
            if r.dead_lettered:
                m.dead_lettered.labels(*labels).inc(r.dead_lettered)
            if r.min_timestamp_ms > 0:
                m.age[""].labels(*labels).set(r.age_sum_ms / n)
                m.age["_min"].labels(*labels).set(max(0, r.read_at_ms - r.max_timestamp_ms))
                m.age["_max"].labels(*labels).set(max(0, r.read_at_ms - r.min_timestamp_ms))
                mean = r.latency_sum_ms / n
                m.latency[""].labels(*labels).set(mean)
                # The newest and the oldest record to when the last was final: the newest may have been
                # acknowledged before the last (at least once), so its figure is at most the mean.
                m.latency["_min"].labels(*labels).set(min(mean, max(0, r.acked_at_ms - r.max_timestamp_ms)))
                m.latency["_max"].labels(*labels).set(max(mean, r.acked_at_ms - r.min_timestamp_ms))
        m.batch_duration.labels(self.source, self.target).observe(seconds)
        m.last_batch.labels(self.source, self.target).set(now_s)

    def lost(self, topic: str, partition: int, count: int) -> None:
        self.m.lost.labels(*self._labels(topic, partition)).inc(count)

    def lag(self, lags: Mapping[tuple[str, int], tuple[int, float]]) -> None:
        """Per source partition: (records not yet mirrored, age of the oldest of them in seconds)."""
        for (topic, partition), (records, seconds) in lags.items():
            labels = self._labels(topic, partition)
            self.m.lag_records.labels(*labels).set(records)
            self.m.lag_seconds.labels(*labels).set(seconds)

    def state(self, state: str) -> None:
        self.m.state.labels(self.source, self.target).state(state)

    def source_topic_deleted(self, topic: str) -> None:
        self.m.source_deleted.labels(self.source, self.target, self._labels(topic, 0)[2]).inc()

    def remote_topic_deleted(self, topic: str) -> None:
        self.m.remote_deleted.labels(self.source, self.target, self._labels(topic, 0)[2]).inc()

    def throttle(self, held_s: float, limit: float | None) -> None:
        """Seconds the flow was held back since the last call, and its byte limit now (None: none)."""
        if held_s > 0:
            self.m.throttled.labels(self.source, self.target).inc(held_s)
        self.m.throttle_limit.labels(self.source, self.target).set(limit or 0)

    def restarted(self) -> None:
        self.m.restarts.labels(self.source, self.target).inc()

    def checkpoint_cycle(
        self, latency_ms: float, written: int, now_s: float, confirmed: Mapping[str, float] | None = None
    ) -> None:
        """A completed checkpoint cycle; ``confirmed``: per group, when its checkpoints were last current."""
        self.m.checkpoint_latency.labels(self.source, self.target).set(latency_ms)
        self.m.checkpoints.labels(self.source, self.target).inc(written)
        if confirmed is None:
            return
        for group in self._groups - set(confirmed):
            self.m.group_checkpoint.remove(self.source, self.target, group)  # gone from the source
        self._groups = set(confirmed)
        for group, at in confirmed.items():
            self.m.group_checkpoint.labels(self.source, self.target, group).set(at)
        self.m.last_checkpoint.labels(self.source, self.target).set(now_s)
