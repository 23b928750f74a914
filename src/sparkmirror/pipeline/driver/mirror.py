"""All enabled flows of one configuration, in one Spark session, until done or asked to stop."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from sparkmirror.config.model import MirrorConfig
from sparkmirror.core.adoption import ExistingRecords
from sparkmirror.errors import ConfigError
from sparkmirror.heartbeats.emitter import HeartbeatEmitter
from sparkmirror.kafka.access import AccessDenied
from sparkmirror.kafka.flowclients import ClusterClients, FlowClients
from sparkmirror.kafka.lease import CLOSE_WAIT_S, FlowLease
from sparkmirror.pipeline.driver.control import TargetShares
from sparkmirror.pipeline.driver.flow import Flow, take_lease
from sparkmirror.pipeline.driver.scheduler import Scheduler
from sparkmirror.pipeline.driver.startup import wait_for_clusters
from sparkmirror.pipeline.driver.stream import STOP_BOUND_S
from sparkmirror.pipeline.driver.supervisor import FlowSupervisor
from sparkmirror.pipeline.exceptions import FlowFailed, stopped_flows_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkmirror.metrics.exporter import MirrorMetrics

log = logging.getLogger(__name__)

#: How often the main loop looks at the flows, in seconds.
_POLL_S = 0.5
#: What a service manager's stop timeout must allow `sparkmirror run` (deploy/: systemd's TimeoutStopSec,
#: Kubernetes' grace period), with one flow's tasks hung: the wait for the copy (``STOP_BOUND_S``), for the
#: flow's lease to be let go of (``CLOSE_WAIT_S``), and 10 s for the run's summary.
RUN_STOP_BOUND_S = STOP_BOUND_S + CLOSE_WAIT_S + 10.0


class Mirror:
    """Runs the flows of ``config``; :meth:`run` returns them when they are done."""

    def __init__(
        self,
        config: MirrorConfig,
        *,
        once: bool = False,
        master: str | None = None,
        spark_conf: dict[str, str] | None = None,
        reset_topics: frozenset[str] = frozenset(),
        existing_records: ExistingRecords = "refuse",
        mm2_offsets_topic: str = "",
    ) -> None:
        if not config.flows:
            raise FlowFailed("no enabled flow to run (set e.g. A->B.enabled = true)")
        self.config = config
        self.once = once
        #: ``run --reset-topic``: re-created source topics to mirror again from their beginning.
        self.reset_topics = reset_topics
        #: ``run --existing-records`` and ``--mm2-offsets-topic``: a flow's first start (core.adoption).
        self.existing_records: ExistingRecords = existing_records
        self.mm2_offsets_topic = mm2_offsets_topic
        first = config.flows[0].spark
        self.master = master or first.master
        self.spark_conf = {**first.spark_conf(reveal_secrets=True), **(spark_conf or {})}
        for flow in config.flows[1:]:
            if flow.spark.master != first.master or flow.spark.conf != first.conf:
                log.warning(
                    "flow=%s has its own sparkmirror.spark.* settings; all flows share one Spark session, "
                    "which uses those of flow %s",
                    flow.name,
                    config.flows[0].name,
                )
        for flow in config.flows:
            FlowClients(flow).validate()
        self._stop = threading.Event()
        self.runners: list[Flow] = []
        self.supervisors: list[FlowSupervisor] = []
        self.spark: SparkSession | None = None
        self.metrics: MirrorMetrics | None = None

    def request_stop(self) -> None:
        self._stop.set()
        for s in self.supervisors:
            s.request_stop()

    def run(
        self, *, on_progress: Callable[[list[Flow]], None] | None = None, progress_every_s: float | None = None
    ) -> list[Flow]:
        """Run until every flow is done (``--once``) or a stop is requested.

        ``on_progress`` is called every ``progress_every_s`` seconds (default: the flows' smallest
        ``sparkmirror.progress.interval.seconds``).
        """
        from sparkmirror.pipeline.session import build_session

        timeout = self.config.spark.startup_timeout_ms
        if not wait_for_clusters(self.config.flows, timeout_ms=timeout, stop=self._stop):
            return self.runners  # asked to stop while waiting
        settings = self.config.spark
        if settings.metrics_port is not None:  # first: a port in use refuses before anything is held
            from sparkmirror.metrics.exporter import MirrorMetrics

            self.metrics = MirrorMetrics()
            self.metrics.serve(settings.metrics_host, settings.metrics_port)
        # Before Spark starts: a second instance refuses in seconds, naming the first.
        leases = self._take_leases()
        ours = signal.getsignal(signal.SIGINT)
        self.spark = spark = build_session(self._master(), self.spark_conf)
        if callable(ours) and ours is not signal.default_int_handler and signal.getsignal(signal.SIGINT) is not ours:
            # pyspark's SparkContext replaces the SIGINT handler with one that cancels every job and
            # raises KeyboardInterrupt: Ctrl+C must stop the mirror as SIGTERM does, each task after its
            # current interval.
            signal.signal(signal.SIGINT, ours)
        chores = Scheduler()
        heartbeats = self._heartbeats()
        try:
            if heartbeats is not None:
                heartbeats.start()  # before the flows list topics: heartbeats are mirrored too
                chores.every("heartbeats", heartbeats.interval_s, heartbeats.emit, now=True)
                chores.run_due()
            if on_progress is not None:
                interval = progress_every_s or min(f.spark.progress_interval_seconds for f in self.config.flows)
                chores.every("progress", interval, lambda: on_progress(self.runners))
            # A target cluster's byte limit is shared by the flows into it (in this process).
            targets = TargetShares({f.target: f.target_throttle_bytes_per_second for f in self.config.flows})
            for config in self.config.flows:
                log.info("flow=%s mode=%s", config.name, "exactly-once" if config.exactly_once else "at-least-once")
                flow = Flow(
                    spark,
                    config,
                    once=self.once,
                    reset_topics=self.reset_topics,
                    existing_records=self.existing_records,
                    mm2_offsets_topic=self.mm2_offsets_topic,
                    lease=leases.pop(config.name),
                    metrics=self.metrics,
                    flow_count=len(self.config.flows),
                    target_shares=targets,
                )
                supervisor = FlowSupervisor(flow)
                self.runners.append(flow)
                self.supervisors.append(supervisor)
                if self._stop.is_set():
                    flow.stop_requested.set()
                self._guarded(supervisor, supervisor.start)
            while not self._stop.is_set():
                chores.run_due()
                for s in self.supervisors:
                    if s.flow.failure is None:
                        self._guarded(s, s.poll)
                if all(f.failure is not None for f in self.runners):
                    break
                if self.once and all(f.finished or f.failure is not None for f in self.runners):
                    break
                self._stop.wait(_POLL_S)
        finally:
            self._stop_flows()
            for lease in leases.values():  # flows that never started
                lease.release()
            if heartbeats is not None:
                heartbeats.close()
            if self.metrics is not None:
                self.metrics.close()
        stopped = stopped_flows_error([f.failure for f in self.runners if f.failure is not None])
        if stopped is not None:
            raise stopped
        return self.runners

    def _stop_flows(self) -> None:
        """Every flow's tasks told to stop first, then each flow stopped: the flows' stops overlap, and a
        flow's wait for its tasks counts from that first word (``StreamingCopy.stop``)."""
        for s in self.supervisors:
            s.flow.request_copy_stop()
        for s in self.supervisors:
            s.stop()

    def _take_leases(self) -> dict[str, FlowLease]:
        """Every flow's lease, or none (releasing those taken when one is refused)."""
        leases: dict[str, FlowLease] = {}
        try:
            for config in self.config.flows:
                clients = FlowClients(config)
                leases[config.name] = take_lease(clients)
                clients.close()
        except BaseException:
            for lease in leases.values():
                lease.release()
            raise
        return leases

    def _guarded(self, supervisor: FlowSupervisor, step: Callable[[], None]) -> None:
        """Run a supervisor step; a terminal error stops that flow only, unless
        ``sparkmirror.stop.on.flow.failure = true`` (then it ends the run, as before)."""
        flow = supervisor.flow
        try:
            step()
        except (FlowFailed, ConfigError, AccessDenied) as exc:
            if self.config.spark.stop_on_flow_failure:
                raise
            flow.failure = exc
            others = [f.flow.name for f in self.runners if f is not flow and f.failure is None]
            log.error(
                "flow=%s stopped: %s%s",
                flow.flow.name,
                exc,
                f"; {', '.join(others)} go on (sparkmirror.stop.on.flow.failure = false)" if others else "",
            )
            supervisor.stop()

    def _master(self) -> str:
        """The Spark master; ``local[*]`` with a task slot per flow at least (each holds one for good)."""
        flows = len(self.config.flows)
        if self.master == "local[*]" and flows > (os.cpu_count() or 1):
            return f"local[{flows}]"
        return self.master

    def _heartbeats(self) -> HeartbeatEmitter | None:
        flows = [f for f in self.config.flows if f.emit_heartbeats_enabled]
        if not flows:
            return None
        emitter = HeartbeatEmitter(flows[0].policy, min(f.emit_heartbeats_interval_seconds for f in flows))
        for f in flows:
            for cluster in (f.source_cluster, f.target_cluster):
                emitter.add_cluster(ClusterClients(cluster), f.heartbeats_topic_replication_factor)
            emitter.add_flow(f.source, f.target)
        return emitter
