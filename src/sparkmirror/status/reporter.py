"""The running flow says what it is doing: a :class:`~sparkmirror.core.status.FlowStatus` record
on its target, and the ``sparkmirror_flow_state`` metric.

Best effort by design: a target that cannot take the record must not stop or slow the flow (the
flow has its own ways to notice a target that is down); a failed write is logged once per outage,
and while the target does not answer, writes are queued without waiting for their
acknowledgement (the driver's loop is not held 5 s a report); the first one acknowledged ends the
outage. Closing waits for what is queued, so that the last state (``stopped``) lands.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import TYPE_CHECKING

from sparkmirror.core.status import STATUS_TOPIC, FlowStatus, State
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.internal import COMPACTED_READ_BACK, ensure_topic

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Producer

    from sparkmirror.metrics.exporter import FlowMetrics

log = logging.getLogger(__name__)

#: Seconds a status write may wait for its acknowledgement.
_WRITE_TIMEOUT_S = 5.0


class StatusReporter:
    """Writes one flow's status records; remembers the last state it reported."""

    def __init__(self, clients: FlowClients, interval_s: float, metrics: FlowMetrics | None = None) -> None:
        self.clients = clients
        self.flow = clients.flow
        self.interval_ms = int(interval_s * 1000)
        self.metrics = metrics
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.started_ms = int(time.time() * 1000)
        self.state: State = "starting"
        self.error: str | None = None
        self._producer: Producer | None = None
        self._topic_ready = False
        self._failing = False

    def ensure_topic(self) -> None:
        ensure_topic(
            self.clients.target_admin,
            STATUS_TOPIC,
            replication_factor=self.flow.offset_syncs_topic_replication_factor,
            config=COMPACTED_READ_BACK,
            purpose="the last reported status of each flow into this cluster",
            key="offset-syncs.topic.replication.factor",
        )
        self._topic_ready = True

    def report(
        self,
        state: State,
        *,
        error: str | None = None,
        records: int = 0,
        restarts: int = 0,
        paused_topics: tuple[str, ...] = (),
        throttle: int | None = None,
        throttled_ratio: float = 0.0,
    ) -> None:
        """Say ``state`` (again: every interval while running)."""
        self.state = state
        self.error = error
        if self.metrics is not None:
            self.metrics.state(state)
        if not self._topic_ready:
            return  # before the flow first reached its target: nothing to write to yet
        status = FlowStatus(
            flow=self.flow.name,
            state=state,
            host=self.host,
            pid=self.pid,
            started_ms=self.started_ms,
            updated_ms=int(time.time() * 1000),
            interval_ms=self.interval_ms,
            records=records,
            restarts=restarts,
            error=error,
            mode="exactly-once" if self.flow.exactly_once else "at-least-once",
            paused_topics=paused_topics,
            throttle_bytes_per_second=throttle,
            throttled_ratio=round(throttled_ratio, 3),
        )
        try:
            self._write(status)
        except Exception as exc:  # noqa: BLE001 - reporting must never stop the flow
            if not self._failing:
                log.warning("flow=%s cannot write its status to %s: %s", self.flow.name, STATUS_TOPIC, exc)
            self._failing = True

    def _write(self, status: FlowStatus) -> None:
        if self._producer is None:
            from sparkmirror.kafka.factory import new_producer

            self._producer = new_producer({**self.clients.internal_producer, "message.timeout.ms": "30000"})
        errors: list[str] = []

        def delivered(err: KafkaError | None, _msg: object) -> None:
            if err is not None:
                errors.append(err.str())
            elif self._failing:
                log.info("flow=%s writes its status to %s again", self.flow.name, STATUS_TOPIC)
                self._failing = False

        self._producer.produce(STATUS_TOPIC, key=status.key_bytes(), value=status.value_bytes(), on_delivery=delivered)
        if self._failing:
            self._producer.poll(0)  # queued; acknowledged (or not) while the flow goes on
            return
        if self._producer.flush(_WRITE_TIMEOUT_S):
            raise TimeoutError(f"not acknowledged within {_WRITE_TIMEOUT_S:.0f}s")
        if errors:
            raise RuntimeError(errors[0])

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None and producer.flush(_WRITE_TIMEOUT_S):
            log.info("flow=%s: %d status records not written to %s", self.flow.name, len(producer), STATUS_TOPIC)
