"""MM2's offset syncs, written beside the offset map for tools that read them.

sparkmirror translates from its own offset map (:mod:`sparkmirror.offsets.store`); with
``emit.offset-syncs.enabled`` (on by default, as in MM2) it also writes one MM2 OffsetSync per
offset-map segment start, where a run of 1:1 offsets begins, to
``mm2-offset-syncs.<target alias>.internal``, so that Kafka's own tools and an MM2 taking over
find syncs in the layout they read. The topic is kept on the source or on the target cluster as
``offset-syncs.topic.location`` says (MM2's default: the source).

What it must never do: hold up the data. Syncs are produced without waiting for them; only
:meth:`OffsetSyncWriter.close` flushes. Nothing in sparkmirror reads them back.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sparkmirror.core.formats import OffsetSync
from sparkmirror.core.offsetmap import Segment
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.internal import COMPACTED, ensure_topic

if TYPE_CHECKING:
    from confluent_kafka import Producer

log = logging.getLogger(__name__)


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
        """One MM2 OffsetSync per segment start: where a run of 1:1 offsets begins."""
        if not self.enabled or not segments:
            return
        if self._producer is None:
            from sparkmirror.kafka.factory import new_producer

            conf = self.clients.source_producer if self.on_source else self.clients.internal_producer
            self._producer = new_producer({**conf, "linger.ms": "5"})
        for seg in segments:
            sync = OffsetSync(seg.topic, seg.partition, seg.upstream_start, seg.downstream_start)
            self._producer.produce(self.topic, key=sync.key_bytes(), value=sync.value_bytes())
        self._producer.poll(0)

    def close(self) -> None:
        if self._producer is not None and self._producer.flush(10):
            log.warning("flow=%s records for %s were not delivered before shutdown", self.flow.name, self.topic)
        self._producer = None  # the last reference: librdkafka destroys it now
