"""Prometheus metrics of a running mirror: MM2's per-partition metrics under their names, and
what MM2 lacks (lag, source loss, dead letters, batch duration, flow state).

The counts come from the tasks' result rows (:class:`~sparkmirror.pipeline.executor.results.PartitionResult`),
counted on the driver as each task reports an interval it made final, so they hold when the tasks
run on a Spark cluster. ``docs/operations.md`` explains every metric; a unit test keeps the two in step.
"""

from sparkmirror.metrics.exporter import METRIC_NAMES, FlowMetrics, MirrorMetrics

__all__ = ["METRIC_NAMES", "FlowMetrics", "MirrorMetrics"]
