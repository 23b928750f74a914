"""A flow's reported state, its record format, and the rules that turn facts into health.

A running flow writes a :class:`FlowStatus` record, keyed by the flow's name, to the compacted
topic :data:`STATUS_TOPIC` on its target when it starts, every progress interval, when it
restarts, fails or stops. ``sparkmirror status`` reads the clusters, not the process: the last
record says what the flow was doing and when it last said so; a running flow that has not
reported for :data:`SILENT_AFTER_INTERVALS` intervals is *silent* (its process died or lost the
target). Pure: no pyspark, no Kafka client.

Record value: UTF-8 JSON with a ``version`` field (0); unknown fields are ignored, a missing or
malformed required field raises :class:`FormatError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from enum import IntEnum
from typing import Literal

from sparkmirror.core.exceptions import FormatError
from sparkmirror.core.formats import json_record

#: The compacted topic on each target cluster holding the last status of each flow into it.
STATUS_TOPIC = "sparkmirror-status.internal"
#: A running flow that has not reported for this many progress intervals (plus a margin) is silent.
SILENT_AFTER_INTERVALS = 3
SILENT_MARGIN_MS = 15_000

State = Literal["starting", "running", "paused", "restarting", "stopped", "failed"]
STATES: tuple[State, ...] = ("starting", "running", "paused", "restarting", "stopped", "failed")
#: States in which the flow's process says it is alive (and must keep saying so). ``paused``: running,
#: with every source partition paused by an operator (``sparkmirror pause``); it keeps its lease,
#: checkpoints and metrics.
LIVE_STATES = frozenset({"starting", "running", "paused", "restarting"})


class StatusExit(IntEnum):
    """``sparkmirror status`` exit codes (1 and 2 keep their meaning: runtime and config errors; the
    numbers are not used by another command)."""

    HEALTHY = 0
    LAGGING = 8
    DOWN = 9


@dataclass(frozen=True)
class FlowStatus:
    """What a flow's process last said about itself."""

    flow: str
    state: State
    host: str
    pid: int
    started_ms: int
    updated_ms: int
    #: How often the process reports while it runs.
    interval_ms: int
    records: int = 0
    restarts: int = 0
    #: The last error (``failed``: why it stopped; ``restarting``: what it is recovering from).
    error: str | None = None
    mode: str = "at-least-once"
    #: Flow control in effect: the source topics paused (``state`` ``paused``: the whole flow is), the byte
    #: limit (None: none), and the share of the time since the report before that the
    #: flow was held back by it (0 to 1).
    paused_topics: tuple[str, ...] = ()
    throttle_bytes_per_second: int | None = None
    throttled_ratio: float = 0.0

    VERSION = 0

    def key_bytes(self) -> bytes:
        return self.flow.encode()

    def value_bytes(self) -> bytes:
        return json.dumps({"version": self.VERSION, **asdict(self)}, sort_keys=True).encode()

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> FlowStatus:
        data = json_record("FlowStatus", key, value, cls.VERSION)
        try:
            status = cls(
                flow=str(data["flow"]),
                state=data["state"],
                host=str(data["host"]),
                pid=int(data["pid"]),
                started_ms=int(data["started_ms"]),
                updated_ms=int(data["updated_ms"]),
                interval_ms=int(data["interval_ms"]),
                records=int(data.get("records", 0)),
                restarts=int(data.get("restarts", 0)),
                error=None if data.get("error") is None else str(data["error"]),
                mode=str(data.get("mode", "at-least-once")),
                paused_topics=tuple(str(t) for t in data.get("paused_topics") or ()),
                throttle_bytes_per_second=(
                    None if data.get("throttle_bytes_per_second") is None else int(data["throttle_bytes_per_second"])
                ),
                throttled_ratio=float(data.get("throttled_ratio", 0.0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"FlowStatus value of {key!r}: missing or bad field {exc}") from None
        if status.state not in STATES:
            raise FormatError(f"FlowStatus value of {key!r}: unknown state {status.state!r}")
        if status.flow.encode() != key:
            raise FormatError(f"FlowStatus value of {key!r} names another flow: {status.flow!r}")
        return status


def latest_statuses(records: Iterable[tuple[bytes | None, bytes | None]]) -> dict[str, FlowStatus]:
    """The last status of each flow among the status topic's records (tombstones forget a flow)."""
    out: dict[str, FlowStatus] = {}
    for key, value in records:
        if key is None:
            continue
        name = key.decode(errors="replace")
        if value is None:
            out.pop(name, None)
        else:
            out[name] = FlowStatus.decode(key, value)
    return out


@dataclass(frozen=True)
class PartitionLag:
    """How far one source partition's mirror is behind."""

    topic: str
    partition: int
    source_start_offset: int
    source_end_offset: int
    #: The next source offset the mirror will copy (-1: nothing mirrored yet).
    mirrored_offset: int
    #: Timestamp of the oldest record not yet mirrored (None: none waiting, or not readable).
    oldest_unmirrored_ms: int | None = None

    @property
    def lag_records(self) -> int:
        """Records on the source the mirror has not copied yet (records lost to retention excluded)."""
        start = max(self.mirrored_offset, self.source_start_offset)
        return max(0, self.source_end_offset - start)

    def lag_seconds(self, now_ms: int) -> float:
        """Age of the oldest record not yet mirrored; 0 when nothing waits."""
        if self.lag_records == 0 or self.oldest_unmirrored_ms is None:
            return 0.0
        return max(0.0, (now_ms - self.oldest_unmirrored_ms) / 1000)

    def as_dict(self, now_ms: int) -> dict[str, object]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "source_start_offset": self.source_start_offset,
            "source_end_offset": self.source_end_offset,
            "mirrored_offset": self.mirrored_offset,
            "lag_records": self.lag_records,
            "lag_seconds": round(self.lag_seconds(now_ms), 3),
        }


def flow_state(status: FlowStatus | None, now_ms: int) -> tuple[str, str]:
    """(state shown, one-line detail) for a flow's last status; ``silent``: a live state gone quiet."""
    if status is None:
        return "unknown", "no status on the target: the flow has not run since status reporting began"
    where = f"{status.host} pid {status.pid}"
    age_s = max(0, now_ms - status.updated_ms) // 1000
    if status.state in LIVE_STATES:
        if now_ms - status.updated_ms > SILENT_AFTER_INTERVALS * status.interval_ms + SILENT_MARGIN_MS:
            return "silent", (
                f"last reported {status.state} on {where} {age_s}s ago: the process stopped without saying so "
                "(killed, or it cannot reach the target)"
            )
        detail = f"on {where}, reported {age_s}s ago"
        if status.state == "paused":
            detail += "; paused by an operator (sparkmirror pause): it keeps its lease, checkpoints and metrics"
        if status.state == "restarting" and status.error:
            detail += f"; recovering from: {status.error}"
        return status.state, detail
    if status.state == "failed":
        return "failed", f"on {where} {age_s}s ago: {status.error or 'no error recorded'}"
    return "stopped", f"on {where} {age_s}s ago"


def health(
    states: Mapping[str, str],
    lags: Mapping[str, Iterable[PartitionLag]],
    now_ms: int,
    *,
    max_lag_records: int | None,
    max_lag_seconds: float | None,
) -> StatusExit:
    """The exit code of ``sparkmirror status``: DOWN beats LAGGING beats HEALTHY.

    DOWN: a flow failed, went silent, or never reported. ``stopped`` (a clean stop, or the end of
    ``run --once``) is not down: its lag says whether it fell behind.
    """
    if any(s in ("failed", "silent", "unknown") for s in states.values()):
        return StatusExit.DOWN
    for parts in lags.values():
        for p in parts:
            if max_lag_records is not None and p.lag_records > max_lag_records:
                return StatusExit.LAGGING
            if max_lag_seconds is not None and p.lag_seconds(now_ms) > max_lag_seconds:
                return StatusExit.LAGGING
    return StatusExit.HEALTHY
