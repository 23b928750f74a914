"""What ``sparkmirror status`` knows about a flow, read from its clusters (never from the process).

Per flow: its last reported state (:data:`~sparkmirror.core.status.STATUS_TOPIC` on the target),
per source partition how far the mirror is (the offset map on the target says what was mirrored,
the source says what there is), and per consumer group the age of its last checkpoint. Read-only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sparkmirror.config.model import FlowConfig
from sparkmirror.core.formats import Checkpoint
from sparkmirror.core.status import STATUS_TOPIC, FlowStatus, PartitionLag, flow_state, latest_statuses
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.internal import read_to_end, read_to_end_timed
from sparkmirror.kafka.lag import log_bounds, record_timestamps
from sparkmirror.kafka.topics import TopicSync
from sparkmirror.offsets.store import read_offset_map


@dataclass(frozen=True)
class GroupCheckpoint:
    """The newest checkpoint of one consumer group."""

    group: str
    partitions: int
    written_ms: int

    def age_seconds(self, now_ms: int) -> float:
        return max(0.0, (now_ms - self.written_ms) / 1000)


@dataclass
class FlowReport:
    """Everything ``status`` shows about one flow."""

    flow: str
    mode: str
    state: str
    detail: str
    status: FlowStatus | None
    partitions: list[PartitionLag] = field(default_factory=list)
    groups: list[GroupCheckpoint] = field(default_factory=list)
    #: Source topics among ``partitions`` that are MM2's internal heartbeats, not the user's data.
    internal_topics: frozenset[str] = frozenset()

    def lag_records(self) -> int:
        return sum(p.lag_records for p in self.partitions)

    def lag_seconds(self, now_ms: int) -> float:
        return max((p.lag_seconds(now_ms) for p in self.partitions), default=0.0)

    def as_dict(self, now_ms: int) -> dict[str, object]:
        s = self.status
        return {
            "flow": self.flow,
            "mode": self.mode,
            "state": self.state,
            "detail": self.detail,
            "host": s.host if s else None,
            "pid": s.pid if s else None,
            "last_report_age_seconds": round(max(0, now_ms - s.updated_ms) / 1000, 1) if s else None,
            "last_error": s.error if s else None,
            "paused_topics": list(s.paused_topics) if s else [],
            "throttle_bytes_per_second": s.throttle_bytes_per_second if s else None,
            "throttled_ratio": s.throttled_ratio if s else 0.0,
            "lag_records": self.lag_records(),
            "lag_seconds": round(self.lag_seconds(now_ms), 3),
            "partitions": [p.as_dict(now_ms) for p in self.partitions],
            "groups": [
                {
                    "group": g.group,
                    "partitions": g.partitions,
                    "checkpoint_age_seconds": round(g.age_seconds(now_ms), 1),
                }
                for g in self.groups
            ],
        }


def read_statuses(clients: FlowClients) -> dict[str, FlowStatus]:
    """The last status of every flow into the flow's target."""
    return latest_statuses(read_to_end(clients.target_consumer, STATUS_TOPIC, timeout_s=30))


def read_flow(flow: FlowConfig, now_ms: int | None = None) -> FlowReport:
    """The status of ``flow``, read from its two clusters."""
    clients = FlowClients(flow)
    try:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        status = read_statuses(clients).get(flow.name)
        state, detail = flow_state(status, now)
        topics = TopicSync(clients).source_topics()
        bounds = log_bounds(clients.source_admin, topics)
        offset_map = read_offset_map(clients.target_consumer, flow)
        mirrored = {k: offset_map.upstream_end(*k) for k in bounds}
        waiting = {
            k: max(m if m is not None else 0, bounds[k][0])
            for k, m in mirrored.items()
            if (m if m is not None else 0) < bounds[k][1]
        }
        oldest = record_timestamps(clients.source_consumer, waiting)
        partitions = [
            PartitionLag(
                topic=t,
                partition=p,
                source_start_offset=bounds[(t, p)][0],
                source_end_offset=bounds[(t, p)][1],
                mirrored_offset=-1 if mirrored[(t, p)] is None else int(mirrored[(t, p)] or 0),
                oldest_unmirrored_ms=oldest.get((t, p)),
            )
            for t, p in sorted(bounds)
        ]
        groups = _checkpoints(clients, flow) if flow.emit_checkpoints_enabled else []
        mode = "exactly-once" if flow.exactly_once else "at-least-once"
        internal = frozenset(t for t in topics if flow.policy.is_heartbeats_topic(t))
        return FlowReport(flow.name, mode, state, detail, status, partitions, groups, internal)
    finally:
        clients.close()


def _checkpoints(clients: FlowClients, flow: FlowConfig) -> list[GroupCheckpoint]:
    latest: dict[str, tuple[set[tuple[str, int]], int]] = {}
    topic = flow.policy.checkpoints_topic(flow.source)
    for key, value, ts in read_to_end_timed(clients.target_consumer, topic, timeout_s=60):
        if key is None or value is None:
            continue
        cp = Checkpoint.decode(key, value)
        parts, newest = latest.get(cp.group, (set(), 0))
        parts.add((cp.topic, cp.partition))
        latest[cp.group] = (parts, max(newest, ts))
    return [GroupCheckpoint(g, len(parts), ts) for g, (parts, ts) in sorted(latest.items())]
