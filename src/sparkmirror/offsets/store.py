"""The offset map store: sparkmirror's exact upstream->downstream mapping, kept on the target.

Segments (see :mod:`sparkmirror.core.offsetmap`) are records of a compacted
topic on the target, ``sparkmirror-offset-map.<source alias>.internal``, keyed
by (source topic, partition, upstream start): a copy written again from the same
upstream start, or a segment extended by the next commit interval, replaces the
earlier record. The copy tasks write them: exactly once in the data's transaction,
at least once after the interval's records are acknowledged and before its
progress is committed. The driver adds the segments the tasks report to the map
in memory (:meth:`OffsetMapStore.apply`), and loads, prunes and folds the topic.
:meth:`OffsetMapStore.write` writes segments itself, for ``offsets index-history``
(:mod:`sparkmirror.offsets.history`).

Rules: nothing is translated before the topic was read to its end (the
in-memory map refuses until :meth:`OffsetMapStore.load` marks it loaded);
segments whose downstream range fell below the target partition's log start
offset are pruned with tombstones, so storage follows retained data.

Chains: :meth:`OffsetMapStore.fold` (a driver chore) folds runs of segments
into chain records (key version 1, see :mod:`sparkmirror.core.formats`): the
open chain of a partition is rewritten under its key with the new batches,
then the replaced segments get tombstones. The chains are acknowledged before
any tombstone is sent, so a crash between the two leaves both on the topic;
they translate identically and the next fold sends the missing tombstones.
Exactly-once writes one segment per partition per commit interval; without
folding, a day at 1,000 partitions and an interval a second is 86 million records
to load.

It holds the map only: MM2's offset syncs are written by
:class:`sparkmirror.offsets.syncs.OffsetSyncWriter`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from sparkmirror.config.model import FlowConfig
from sparkmirror.core.exceptions import FormatError
from sparkmirror.core.formats import OffsetChain, OffsetSegment
from sparkmirror.core.naming import offset_map_topic
from sparkmirror.core.offsetmap import CHAIN_MAX_BATCHES, Chain, OffsetMap, Segment, Translation
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.internal import COMPACTED_READ_BACK, ensure_topic, produce_durably, read_to_end

if TYPE_CHECKING:
    from confluent_kafka import Producer

log = logging.getLogger(__name__)


def read_offset_map(consumer_conf: Mapping[str, str], flow: FlowConfig) -> OffsetMap:
    """The flow's offset map, read from its topic to the end with ``consumer_conf``, marked loaded.

    For callers that only translate (failover plans read each flow's map where it is stored);
    :meth:`OffsetMapStore.load` reads the same way.
    """
    t0 = time.monotonic()
    topic = offset_map_topic(flow.source)
    fresh = OffsetMap()
    n = 0
    nbytes = 0
    for key, value in read_to_end(consumer_conf, topic):
        if key is None:
            continue
        try:
            fresh.apply_record(key, value)
        except FormatError as exc:
            raise FormatError(f"offset map topic {topic}, record {n} from the start: {exc}") from None
        n += 1
        nbytes += len(key) + (len(value) if value is not None else 0)
    fresh.mark_loaded()
    log.info(
        "flow=%s offset map loaded: %d segments (%d chains) from %d records (%.1f MB) of %s in %.1fs",
        flow.name,
        len(fresh),
        fresh.chains(),
        n,
        nbytes / 1e6,
        topic,
        time.monotonic() - t0,
    )
    return fresh


class OffsetMapStore:
    """The offset map of one flow: in memory (thread-safe) and on the target."""

    def __init__(self, clients: FlowClients) -> None:
        self.clients = clients
        self.flow = clients.flow
        self.topic = offset_map_topic(self.flow.source)
        self.map = OffsetMap()
        self._lock = threading.Lock()
        #: Serialises writes and tombstones, so a prune cannot land after an extension.
        self._write_lock = threading.Lock()
        self._producer: Producer | None = None

    # -- set-up ---------------------------------------------------------------
    def ensure_topic(self) -> None:
        ensure_topic(
            self.clients.target_admin,
            self.topic,
            replication_factor=self.flow.offset_syncs_topic_replication_factor,
            config=COMPACTED_READ_BACK,
            purpose=f"offset map of flow {self.flow.name}",
            key="offset-syncs.topic.replication.factor",
        )

    def load(self) -> int:
        """Read the topic to its end into memory; only then may translation run."""
        fresh = read_offset_map(self.clients.target_consumer, self.flow)
        with self._lock:
            self.map = fresh
        return len(fresh)

    # -- what the writer needs ----------------------------------------------
    def tails(self) -> dict[tuple[str, int], tuple[int, int, int]]:
        """The last-written segment of each partition, for the writer to extend."""
        out: dict[tuple[str, int], tuple[int, int, int]] = {}
        with self._lock:
            for topic, partition in self.map.partitions():
                pm = self.map.partition(topic, partition)
                last = pm.last_written() if pm is not None else None
                if last is not None:
                    out[(topic, partition)] = (last.upstream_start, last.downstream_start, last.count)
        return out

    # -- updates ------------------------------------------------------------
    def apply(self, segments: Iterable[Segment]) -> None:
        """Record segments already durable on the target (the copy tasks wrote them)."""
        with self._lock:
            self.map.add_all(segments)

    def write(self, segments: list[Segment]) -> None:
        """Make segments durable, then record them (``offsets index-history``'s segments)."""
        if not segments:
            return
        with self._write_lock:
            self._write(segments)

    def _write(self, segments: list[Segment]) -> None:
        if self._producer is None:
            from sparkmirror.kafka.factory import new_producer

            self._producer = new_producer({**self.clients.internal_producer, "linger.ms": "5"})
        now = int(time.time() * 1000)
        records = [seg.to_record(now) for seg in segments]
        produce_durably(
            self._producer,
            self.topic,
            ((rec.key_bytes(), rec.value_bytes()) for rec in records),
            what=f"flow={self.flow.name}: offset map segments",
        )
        self.apply(segments)

    def prune(self, log_starts: dict[tuple[str, int], int]) -> int:
        """Drop segments below the remote partitions' log start offsets (``(source topic, p) -> start``)."""
        removed: list[Segment | Chain] = []
        with self._write_lock:
            with self._lock:
                for (topic, partition), start in log_starts.items():
                    pm = self.map.partition(topic, partition)
                    tail = pm.last_written() if pm is not None else None
                    if tail is None:
                        continue
                    # Never the last segment: a task may be extending it
                    # under the same key right now.
                    removed += self.map.prune(topic, partition, min(start, tail.downstream_start))
            if not removed:
                return 0
            with self._lock:
                records = self._changed_records(removed)
            if self._producer is None:
                from sparkmirror.kafka.factory import new_producer

                self._producer = new_producer(self.clients.internal_producer)
            for key, value in records:
                self._producer.produce(self.topic, key=key, value=value)
            self._producer.flush(60)
        log.info(
            "flow=%s pruned %d offset-map segments and chains below the target's log start",
            self.flow.name,
            len(removed),
        )
        return len(removed)

    def _changed_records(self, changed: list[Segment | Chain]) -> list[tuple[bytes, bytes | None]]:
        """The records that make the topic say what :meth:`OffsetMap.prune` left: tombstones for
        removed segments and chains, the new version of a chain that lost leading batches."""
        now = int(time.time() * 1000)
        out: list[tuple[bytes, bytes | None]] = []
        for item in changed:
            if isinstance(item, Segment):
                out.append((OffsetSegment.encode_key(item.topic, item.partition, item.upstream_start), None))
                continue
            pm = self.map.partition(item.topic, item.partition)
            if pm is not None and pm.holds_record(item):
                rec = item.to_record(now)
                out.append((rec.key_bytes(), rec.value_bytes()))
            else:
                out.append((OffsetChain.encode_key(item.topic, item.partition, item.key), None))
        return out

    def fold(self, max_batches: int = CHAIN_MAX_BATCHES) -> int:
        """Fold runs of segments into chains on the target: the chains first, durably, then the
        replaced segments' tombstones. Returns how many segments were folded."""
        with self._write_lock:
            with self._lock:
                # Applied step by step below, as the topic comes to say it.
                folds = self.map.fold(max_batches, apply=False)
            if not folds:
                return 0
            if self._producer is None:
                from sparkmirror.kafka.factory import new_producer

                self._producer = new_producer({**self.clients.internal_producer, "linger.ms": "5"})
            now = int(time.time() * 1000)
            chains = [f.chain.to_record(now) for f in folds if f.chain is not None]
            produce_durably(
                self._producer,
                self.topic,
                ((rec.key_bytes(), rec.value_bytes()) for rec in chains),
                what=f"flow={self.flow.name}: offset map chains",
            )
            with self._lock:
                for fold in folds:
                    self.map.apply_fold(fold, chain_only=True)
            replaced = [s for f in folds for s in f.replaced]
            produce_durably(
                self._producer,
                self.topic,
                ((OffsetSegment.encode_key(s.topic, s.partition, s.upstream_start), None) for s in replaced),
                what=f"flow={self.flow.name}: tombstones of offset map segments folded into chains",
            )
            with self._lock:
                for fold in folds:
                    self.map.apply_fold(fold)
        log.debug("flow=%s folded %d offset-map segments into %d chains", self.flow.name, len(replaced), len(chains))
        return len(replaced)

    def forget_topic(self, topic: str) -> int:
        """Drop every segment of source ``topic`` (it was re-created: its old offsets mean nothing for the
        new one), with tombstones on the target; returns how many."""
        with self._write_lock:
            with self._lock:
                removed = [
                    seg for t, p in self.map.partitions() if t == topic for seg in self.map.prune(t, p, 2**63 - 1)
                ]
                records = self._changed_records(removed)
            if not removed:
                return 0
            if self._producer is None:
                from sparkmirror.kafka.factory import new_producer

                self._producer = new_producer(self.clients.internal_producer)
            produce_durably(
                self._producer,
                self.topic,
                iter(records),
                what=f"flow={self.flow.name}: offset map tombstones of {topic}",
            )
        log.info("flow=%s forgot %d offset-map segments of re-created topic %s", self.flow.name, len(removed), topic)
        return len(removed)

    def translate(self, topic: str, partition: int, group_offset: int) -> Translation:
        with self._lock:
            return self.map.translate(topic, partition, group_offset)

    def reverse_translate(self, topic: str, partition: int, downstream_offset: int) -> Translation:
        with self._lock:
            return self.map.reverse_translate(topic, partition, downstream_offset)

    def close(self) -> None:
        if self._producer is not None and self._producer.flush(10):
            log.warning("flow=%s records for %s were not delivered before shutdown", self.flow.name, self.topic)
        self._producer = None  # the last reference: librdkafka destroys it now
