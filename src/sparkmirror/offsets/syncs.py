"""MM2's offset syncs, written beside the offset map for tools that read them.

sparkmirror translates from its own offset map (:mod:`sparkmirror.offsets.store`); with
``emit.offset-syncs.enabled`` (on by default, as in MM2) it also writes MM2 OffsetSyncs to
``mm2-offset-syncs.<target alias>.internal``, so that Kafka's own tools and an MM2 taking over
find syncs in the layout they read: where each run of 1:1 offsets begins, and every
``offset.lag.max`` records along it, as MM2 does (:mod:`sparkmirror.core.offsetsyncs` decides
which). The topic is kept on the source or on the target cluster as ``offset-syncs.topic.location``
says (MM2's default: the source).

What it must never do: hold up the data. Syncs are produced without waiting for them; only
:meth:`OffsetSyncWriter.close` flushes (and a report recorded after it, a task's last racing the flow's
end). Nothing in sparkmirror reads them back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sparkmirror.core.formats import OffsetSync
from sparkmirror.core.offsetmap import Segment
from sparkmirror.core.offsetsyncs import OffsetSyncRule
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.internal import COMPACTED, ensure_topic

if TYPE_CHECKING:
    from confluent_kafka import Producer

log = logging.getLogger(__name__)

#: Longest a sync held back by ``offset.lag.max`` waits to be written: MM2 writes its held ones when its
#: task commits, every ``offset.flush.interval.ms`` (60 s by default). The flow's stop writes them all.
HELD_SYNCS_FLUSH_S = 60.0


class OffsetSyncWriter:
    """Writes one flow's MM2 offset syncs; does nothing when ``emit.offset-syncs.enabled`` is false."""

    def __init__(self, clients: FlowClients) -> None:
        self.clients = clients
        self.flow = flow = clients.flow
        self.enabled = flow.emit_offset_syncs_enabled
        # MM2 names it after the *target* cluster: mm2-offset-syncs.<target>.internal
        self.topic = flow.policy.offset_syncs_topic(flow.target)
        self.on_source = flow.offset_syncs_topic_location == "source"
        self._producer: Producer | None = None
        self._rule = OffsetSyncRule(flow.offset_lag_max, HELD_SYNCS_FLUSH_S)
        self._lock = threading.Lock()  # tasks' reports (emit), the chores (tick) and the flow's end (close)
        self._closed = False

    def ensure_topic(self) -> None:
        if not self.enabled:
            return
        ensure_topic(
            self.clients.source_admin if self.on_source else self.clients.target_admin,
            self.topic,
            replication_factor=self.flow.offset_syncs_topic_replication_factor,
            config=COMPACTED,
            purpose=f"MM2 offset syncs of flow {self.flow.name}",
            key="offset-syncs.topic.replication.factor",
        )

    def emit(self, segments: Sequence[Segment]) -> None:
        """The syncs these segments call for (:class:`~sparkmirror.core.offsetsyncs.OffsetSyncRule`),
        and the held ones that have waited long enough. A report recorded after :meth:`close` (a task's
        last, racing the flow's end) holds nothing back: its syncs are written and flushed at once."""
        if not self.enabled:
            return
        with self._lock:
            syncs = self._rule.syncs(segments, time.monotonic())
            if self._closed:
                syncs += self._rule.release()
            self._produce(syncs)
            if self._closed and self._producer is not None:
                self._producer.flush(10)
                self._producer = None  # as close() leaves it

    def tick(self) -> None:
        """The held syncs that have waited long enough, with no new segment (the flow's chores call it:
        a partition whose records stopped still gets its newest pair written, as MM2's commit does)."""
        self.emit(())

    def _produce(self, syncs: Sequence[OffsetSync]) -> None:
        if not syncs:
            return
        if self._producer is None:
            from sparkmirror.kafka.factory import new_producer

            conf = self.clients.source_producer if self.on_source else self.clients.internal_producer
            self._producer = new_producer({**conf, "linger.ms": "5"})
        for sync in syncs:
            self._producer.produce(self.topic, key=sync.key_bytes(), value=sync.value_bytes())
        self._producer.poll(0)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self.enabled:
                try:
                    self._produce(self._rule.release())  # the held ones: an MM2 taking over starts from them
                except Exception as exc:  # noqa: BLE001 - the rest of the flow's shutdown goes on
                    log.warning("flow=%s the last offset syncs were not written to %s: %s", self.flow.name,
                                self.topic, exc)  # fmt: skip
            if self._producer is not None and self._producer.flush(10):
                log.warning("flow=%s records for %s were not delivered before shutdown", self.flow.name, self.topic)
            self._producer = None  # the last reference: librdkafka destroys it now
