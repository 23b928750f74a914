"""The streaming job: one Spark Structured Streaming query per enabled flow.

A :class:`FlowRunner` owns one flow A->B. It makes the remote topics ready on
the target, subscribes Spark's Kafka source to the source topics the flow
mirrors, and hands every micro-batch to the writer. It restarts the query when
the set of source topics changes (new topics are picked up within
``refresh.topics.interval.seconds``) and after retriable failures; it stops the
whole run on a terminal one (a record the target refuses for good).

:class:`Mirror` runs the flows of one configuration in one Spark session and
stops them cleanly on request.

Invariants: a micro-batch is committed by Spark only when ``foreachBatch``
returns, and it returns only after the writer saw every record acknowledged;
a stop request never lets a batch return early.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkmirror.checkpoints.emitter import CheckpointEmitter
from sparkmirror.core.naming import offset_map_topic, progress_group
from sparkmirror.core.offsetmap import Segment
from sparkmirror.core.ranges import SourceRange, check_disjoint, share_out, task_count
from sparkmirror.errors import ConfigError, SparkMirrorError
from sparkmirror.heartbeats.emitter import HeartbeatEmitter
from sparkmirror.kafka.flowclients import ClusterClients, FlowClients
from sparkmirror.kafka.groups import committed_offsets
from sparkmirror.kafka.retry import retry_kafka
from sparkmirror.kafka.topics import TopicSync
from sparkmirror.offsets.store import OffsetMapStore
from sparkmirror.offsets.syncs import OffsetSyncWriter
from sparkmirror.pipeline.copier import copy_task
from sparkmirror.pipeline.ranges import planned_ranges
from sparkmirror.pipeline.writer import (
    INPUT_COLUMNS,
    RESULT_SCHEMA,
    TERMINAL_MARKER,
    WriteError,
    WritePlan,
    write_arrow_batches,
)

log = logging.getLogger(__name__)

_RESTART_BACKOFF_S = (1, 2, 5, 10, 30, 60)


class FlowFailed(SparkMirrorError):
    """A flow stopped on an error that retrying cannot fix."""


class _StopRequested(Exception):
    """Raised inside foreachBatch to abandon (not commit) a batch on stop."""


@dataclass
class FlowProgress:
    """What a flow has done; updated from Spark's stream thread."""

    flow: str
    records: int = 0
    bytes: int = 0
    batches: int = 0
    dead_lettered: int = 0
    lag: int | None = None
    restarts: int = 0
    lost_on_source: int = 0
    per_topic: dict[str, int] = field(default_factory=dict)
    #: How the last batch was read: "direct" (the tasks read Spark's planned ranges) or "spark".
    reader: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _last_report: tuple[float, int] = (0.0, 0)

    def add_batch(self, rows: Sequence[Any]) -> None:
        with self._lock:
            self.batches += 1
            for r in rows:
                self.records += r["records"]
                self.bytes += r["bytes"]
                self.dead_lettered += r["dead_lettered"]
                self.per_topic[r["topic"]] = self.per_topic.get(r["topic"], 0) + r["records"]

    def rate(self) -> float:
        now = time.monotonic()
        with self._lock:
            t0, n0 = self._last_report
            self._last_report = (now, self.records)
        return 0.0 if t0 == 0.0 else (self.records - n0) / max(now - t0, 1e-6)


def lag_from_progress(progress: dict[str, Any] | None) -> int | None:
    """Records on the source not yet processed, from a StreamingQueryProgress."""
    if not progress or not progress.get("sources"):
        return None
    total = 0
    for src in progress["sources"]:
        latest = _offsets(src.get("latestOffset"))
        done = _offsets(src.get("endOffset"))
        if latest is None or done is None:
            return None
        for topic, parts in latest.items():
            for p, off in parts.items():
                total += max(0, int(off) - int(done.get(topic, {}).get(p, 0)))
    return total


def last_progress(query: Any) -> dict[str, Any] | None:
    """The query's last progress as a dict, in two Py4J calls.

    pyspark's ``StreamingQuery.lastProgress`` converts the Java object field by field, one
    Py4J round trip per key; polled twice a second that kept the driver's gateway and the JVM
    busy while micro-batches ran. Spark's own JSON of the same object is one call.
    """
    jprogress = query._jsq.lastProgress()
    if jprogress is None:
        return None
    parsed = json.loads(jprogress.json())
    return parsed if isinstance(parsed, dict) else None


def _offsets(raw: Any) -> dict[str, dict[str, int]] | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    return raw if isinstance(raw, dict) else None


def terminal_message(error_text: str) -> str | None:
    """Our terminal error's own sentence out of a Spark/Py4J error dump."""
    idx = error_text.find(TERMINAL_MARKER)
    if idx < 0:
        return None
    line = error_text[idx + len(TERMINAL_MARKER) :].splitlines()[0]
    return line.strip()


class FlowRunner:
    """Runs one flow as a Spark streaming query and supervises it."""

    def __init__(self, spark: Any, flow: Any, *, once: bool = False) -> None:
        self.spark = spark
        self.flow = flow
        self.once = once
        self.progress = FlowProgress(flow.name)
        self.clients = clients = FlowClients(flow)
        self.source_admin = clients.source_admin
        self.target_admin = clients.target_admin
        self.topics = TopicSync(clients)
        self.base_producer_config = clients.target_producer
        self.plan = WritePlan(
            flow=flow.name,
            source_alias=flow.source,
            policy=flow.policy,
            producer_config=self.base_producer_config,
            errors_tolerance=flow.errors_tolerance,
            dead_letter_topic=flow.dead_letter_topic,
            exactly_once=flow.exactly_once,
            offset_map_topic=offset_map_topic(flow.source),
            progress_group=progress_group(flow.source, flow.target),
            transactional_id_prefix=f"sparkmirror-{flow.source}-{flow.target}-",
            consumer_config=clients.target_consumer,
            source_consumer_config=clients.source_consumer if flow.spark.source_reader == "direct" else {},
            transaction_timeout_ms=flow.spark.transaction_timeout_ms,
            test_fail_after_records=int(os.environ.get("SPARKMIRROR_TEST_FAIL_AFTER_RECORDS", "0")),
        )
        self.store = OffsetMapStore(clients)
        self.syncs = OffsetSyncWriter(clients)
        self.checkpoints = CheckpointEmitter(clients, self.store)
        self._next_checkpoint = 0.0
        self._next_group_sync = 0.0
        self._internal_ready = False
        self.query: Any = None
        self.subscribed: dict[str, int] = {}
        self._stop = threading.Event()
        self._next_refresh = 0.0
        self._next_config_sync = 0.0
        self._restart_at: float | None = None
        self._failures = 0
        self._next_offset: dict[tuple[str, int], int] = {}
        self._identity_checked = False
        self._direct_unavailable_logged = False
        #: Exactly-once: which Python worker wrote each source partition last (WritePlan.writers).
        self._writers: dict[tuple[str, int], str] = {}
        self.finished = False

    @property
    def checkpoint_dir(self) -> str:
        base = Path(self.flow.spark.checkpoint_location)
        return str((base / f"{self.flow.source}-to-{self.flow.target}").absolute())

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> None:
        if not self._identity_checked:
            self._check_checkpoint_identity()
            self._identity_checked = True
        if not self._internal_ready:
            self.store.ensure_topic()
            self.syncs.ensure_topic()
            if self.flow.emit_checkpoints_enabled or self.flow.sync_group_offsets_enabled:
                self.checkpoints.ensure_topic()
                self.checkpoints.restore()
            self._internal_ready = True
        topics = self.topics.source_topics()
        if self.flow.exactly_once:
            self._abort_open_transactions(topics)
            # Producers cached in the executors are fenced now: make them new.
            self.plan = dataclasses.replace(self.plan, producer_generation=uuid.uuid4().hex)
            self._writers = {}
        # (Re)load on every start: a failed batch may have committed segments
        # (exactly-once) that never reached this process.
        self.store.load()
        self._ready_target(topics, configs=self.flow.sync_topic_configs_enabled)
        self._start_query(topics)
        now = time.monotonic()
        self._next_refresh = now + self.flow.refresh_topics_interval_seconds
        self._next_config_sync = now + self.flow.sync_topic_configs_interval_seconds

    def _abort_open_transactions(self, topics: dict[str, int]) -> None:
        """Fence earlier writers of every partition, aborting their open transactions.

        A killed run leaves transactions open until ``transaction.timeout.ms``;
        while one is open, read_committed readers (the offset map's loader)
        cannot see past it. ``init_transactions`` with each partition's
        transactional.id aborts them now.
        """
        from confluent_kafka import Producer

        from sparkmirror.pipeline.transactional import transactional_id

        for topic, partitions in topics.items():
            for p in range(partitions):
                conf = {
                    "enable.sparse.connections": "false",  # see _tx_producer: init_transactions at once
                    **self.plan.producer_config,
                    "transactional.id": transactional_id(self.plan, topic, p),
                    "transaction.timeout.ms": str(self.plan.transaction_timeout_ms),
                }
                producer: Any = Producer(conf)
                retry_kafka(functools.partial(producer.init_transactions, 60), what=f"fencing {topic}[{p}]")
                producer.flush(0)

    def _check_checkpoint_identity(self) -> None:
        """Refuse a checkpoint written for other clusters.

        Spark's checkpoint holds source offsets and nothing else: pointed at a
        rebuilt source cluster with the same alias, it would silently skip
        that many records of every partition. A small file beside it records
        the cluster ids it belongs to.
        """
        location = self.checkpoint_dir
        if "://" in location and not location.startswith("file:"):
            log.info("flow=%s checkpoint %s (not local: cluster identity not checked)", self.flow.name, location)
            return
        path = Path(location.removeprefix("file:"))
        ident = path.with_name(path.name + ".clusters.json")
        src = retry_kafka(
            lambda: self.source_admin.describe_cluster(request_timeout=30).result(),
            what="describe source cluster",
        ).cluster_id
        tgt = retry_kafka(
            lambda: self.target_admin.describe_cluster(request_timeout=30).result(),
            what="describe target cluster",
        ).cluster_id
        current = {
            "source": {"alias": self.flow.source, "cluster_id": src},
            "target": {"alias": self.flow.target, "cluster_id": tgt},
        }
        if path.exists() and ident.exists():
            stored = json.loads(ident.read_text())
            for side in ("source", "target"):
                was, now = stored.get(side, {}).get("cluster_id"), current[side]["cluster_id"]
                if was != now:
                    raise FlowFailed(
                        f"flow={self.flow.name}: the checkpoint {path} was written for {side} cluster id "
                        f"{was} but {current[side]['alias']} is cluster id {now}; "
                        "resuming would skip or repeat records. Use another "
                        "sparkmirror.checkpoint.location, or delete the checkpoint to mirror from the start"
                    )
        path.parent.mkdir(parents=True, exist_ok=True)
        ident.write_text(json.dumps(current, indent=2) + "\n")
        log.info("flow=%s checkpoint %s (source cluster %s, target cluster %s)", self.flow.name, path, src, tgt)

    def _ready_target(self, topics: dict[str, int], *, configs: bool) -> None:
        if self.flow.errors_tolerance == "all" and self.flow.dead_letter_topic:
            self._ensure_dead_letter_topic()
        self.topics.sync(topics, configs=configs)

    def _ensure_dead_letter_topic(self) -> None:
        from confluent_kafka.admin import NewTopic

        name = self.flow.dead_letter_topic
        if name in self.target_admin.list_topics(timeout=30).topics:
            return
        futures = self.target_admin.create_topics(
            [NewTopic(name, num_partitions=1, replication_factor=int(self.flow.replication_factor))]
        )
        for fut in futures.values():
            try:
                fut.result()
            except Exception as exc:  # noqa: BLE001
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise FlowFailed(f"flow={self.flow.name} cannot create dead-letter topic {name}: {exc}") from None
        log.info("flow=%s created dead-letter topic %s", self.flow.name, name)

    def _start_query(self, topics: dict[str, int]) -> None:
        self.subscribed = dict(topics)
        if not topics:
            log.info(
                "flow=%s no source topic matches yet; looking again in %ss",
                self.flow.name,
                self.flow.refresh_topics_interval_seconds,
            )
            if self.once:
                self.finished = True
            return
        self._fit_writer_to_target(topics)
        reader = self.spark.readStream.format("kafka")
        for k, v in self.clients.spark_source_options().items():
            reader = reader.option(k, v)
        reader = (
            reader.option("subscribe", ",".join(topics))
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .option("kafka.isolation.level", "read_committed")
            # Loss on the source is detected and reported by the runner
            # (_check_source_loss); Spark's check would also stop the flow on
            # deleted or newly matched topics, forever.
            .option("failOnDataLoss", "false")
        )
        if self.flow.exactly_once:
            # Used only when there is no checkpoint: the target's progress,
            # not Spark's checkpoint, says where the flow stands.
            reader = reader.option("startingOffsets", json.dumps(self._progress_offsets(topics)))
        if self.flow.spark.batch_max_records:
            reader = reader.option("maxOffsetsPerTrigger", str(self.flow.spark.batch_max_records))
        df = reader.load()
        writer = (
            df.writeStream.queryName(f"sparkmirror {self.flow.name}")
            .option("checkpointLocation", self.checkpoint_dir)
            .foreachBatch(self._make_batch_fn())
        )
        if self.once:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.flow.spark.trigger_interval_ms} milliseconds")
        self.query = writer.start()
        log.info(
            "flow=%s mirroring %d topics (%s) into %s",
            self.flow.name,
            len(topics),
            ", ".join(topics),
            ", ".join(self.topics.remote_name(t) for t in topics),
        )

    def _progress_offsets(self, topics: dict[str, int]) -> dict[str, dict[str, int]]:
        """Spark ``startingOffsets`` from the progress committed on the target (-2: earliest)."""
        remote = {self.topics.remote_name(t): t for t in topics}
        partitions = [(r, p) for r, t in remote.items() for p in range(topics[t])]
        committed = committed_offsets(self.plan.consumer_config, self.plan.progress_group, partitions)
        out: dict[str, dict[str, int]] = {t: {str(p): -2 for p in range(n)} for t, n in topics.items()}
        for (r, p), offset in committed.items():
            out[remote[r]][str(p)] = offset
        return out

    def _fit_writer_to_target(self, topics: dict[str, int]) -> None:
        """Size the producer's batches to what the remote topics accept.

        A batch larger than a topic's ``max.message.bytes`` is refused whole,
        small records included; so batches stay below the smallest limit and
        a single record above its topic's limit is settled on its own.
        """
        limits = self.topics.max_message_bytes(topics)
        conf = dict(self.base_producer_config)
        if limits:
            conf["batch.size"] = str(min(int(conf.get("batch.size", "1000000")), min(limits.values())))
            conf["message.max.bytes"] = str(
                max(int(conf.get("message.max.bytes", "1000000")), max(limits.values()) + 1024)
            )
        self.plan = dataclasses.replace(self.plan, producer_config=conf, max_record_bytes=limits)

    def _make_batch_fn(self) -> Callable[[Any, int], None]:
        stop = self._stop

        def process(batch_df: Any, batch_id: int) -> None:
            if stop.is_set():
                raise _StopRequested(f"flow={self.flow.name} batch {batch_id} abandoned: stop requested")
            started = time.monotonic()
            self._ensure_partitions()
            # Read per batch: topic limits may have changed, and the writer
            # extends each partition's last segment.
            plan = dataclasses.replace(self.plan, tails=self.store.tails(), writers=dict(self._writers))
            prepared = time.monotonic()
            rows = self._copy_direct(batch_df, plan) if self.flow.spark.source_reader == "direct" else None
            self.progress.reader = "direct" if rows is not None else "spark"
            if rows is None:

                def write(batches: Iterator[Any]) -> Iterator[Any]:
                    return write_arrow_batches(batches, plan)

                selected = batch_df.selectExpr(*INPUT_COLUMNS)
                rows = [r.asDict() for r in selected.mapInArrow(write, RESULT_SCHEMA).collect()]
            written = time.monotonic()
            refusals = sorted(r["error"] for r in rows if r["error"])
            if refusals:
                # Not committed: raising here fails the batch; the marker makes it terminal.
                raise WriteError(refusals[0], terminal=True)
            segments = [
                Segment(r["topic"], r["partition"], g["u"], g["d"], g["n"]) for r in rows for g in r["segments"] or []
            ]
            if plan.exactly_once:
                self.store.apply(segments)  # already committed with the data
                self.syncs.emit(segments)
            else:
                self.syncs.emit(segments)
                self.store.write(segments)  # durable before Spark commits the batch
            copied = time.monotonic()
            self._writers.update({(r["topic"], r["partition"]): r["writer"] for r in rows})
            self._check_source_loss(rows)
            self.progress.add_batch(rows)
            self._failures = 0
            finished = time.monotonic()
            log.debug(
                "flow=%s batch %d: %d records from %d partitions in %.0f ms (prepare %.0f, copy %.0f, "
                "offset map %.0f, after %.0f)",
                self.flow.name,
                batch_id,
                sum(r["records"] for r in rows),
                len(rows),
                (finished - started) * 1000,
                (prepared - started) * 1000,
                (written - prepared) * 1000,
                (copied - written) * 1000,
                (finished - copied) * 1000,
            )

        return process

    def _copy_direct(self, batch_df: Any, plan: WritePlan) -> list[dict[str, Any]] | None:
        """Copy the batch's planned ranges in at most one task per core; ``None`` if Spark's plan cannot be read."""
        ranges = planned_ranges(batch_df)
        if ranges is None:
            if not self._direct_unavailable_logged:
                self._direct_unavailable_logged = True
                log.warning(
                    "flow=%s this Spark (%s) does not expose the planned offset ranges; reading through "
                    "Spark's Kafka source instead (as sparkmirror.source.reader = spark)",
                    self.flow.name,
                    self.spark.version,
                )
            return None
        cores = max(1, int(self.spark.sparkContext.defaultParallelism))
        records = sum(r.size for r in ranges)
        tasks = task_count(records, cores, exactly_once=plan.exactly_once)
        groups = share_out(ranges, tasks)
        if not groups:
            return []
        check_disjoint(groups)

        def copy(items: Iterator[list[SourceRange]]) -> Iterator[dict[str, Any]]:
            return copy_task(items, plan)

        sc = self.spark.sparkContext
        sc.setJobDescription(f"sparkmirror {self.flow.name}: copy {records:,} records")
        try:
            return list(sc.parallelize(groups, len(groups)).mapPartitions(copy).collect())
        finally:
            sc.setJobDescription(None)

    def _check_source_loss(self, rows: list[dict[str, Any]]) -> None:
        """Say loudly when records expired on the source before they were mirrored.

        Spark's own check (``failOnDataLoss``) is off because it also fires on
        normal events (a topic deleted or newly matched with a log start above
        0) and would then fail the query on every restart. Here a gap between
        the last batch's end and this batch's first offset counts as loss only
        when the source's log start offset has moved past the gap's start;
        gaps from transaction markers and aborted records are not loss.
        """
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        gaps = []
        for r in rows:
            key = (r["topic"], r["partition"])
            expected = self._next_offset.get(key)
            if r["last_offset"] >= 0:
                self._next_offset[key] = r["last_offset"] + 1
            if expected is not None and r["first_offset"] > expected:
                gaps.append((r["topic"], r["partition"], expected, r["first_offset"]))
        if not gaps:
            return
        request = {TopicPartition(t, p): OffsetSpec.earliest() for t, p, _e, _f in gaps}
        try:
            result = self.source_admin.list_offsets(request, request_timeout=30)
            earliest = {(tp.topic, tp.partition): fut.result().offset for tp, fut in result.items()}
        except Exception as exc:  # noqa: BLE001 - the check is best effort, the data path is not
            log.warning("flow=%s cannot check source log start offsets: %s", self.flow.name, exc)
            return
        for topic, partition, expected, first in gaps:
            start = earliest.get((topic, partition), -1)
            if start > expected:
                lost = min(start, first) - expected
                self.progress.lost_on_source += lost
                log.error(
                    "flow=%s %s[%d] offsets %d..%d were deleted on the source (retention) before they were "
                    "mirrored: %d records lost; raise the source's retention or the mirror's throughput",
                    self.flow.name,
                    topic,
                    partition,
                    expected,
                    min(start, first) - 1,
                    lost,
                )

    def _ensure_partitions(self) -> None:
        """Grow remote topics before a batch that may hold new source partitions.

        Spark plans a batch before calling foreachBatch, so every partition in
        it exists on the source by now; one metadata request tells them all.
        """
        md = self.source_admin.list_topics(timeout=30).topics
        current = {t: len(md[t].partitions) for t in self.subscribed if t in md and md[t].error is None}
        grown = {t: n for t, n in current.items() if n > self.subscribed.get(t, 0)}
        if grown:
            self.topics.sync(grown, configs=False)
            self.subscribed.update(grown)

    # -- supervision --------------------------------------------------------
    def poll(self) -> None:
        """Called periodically from the main thread; raises FlowFailed only.

        A cluster that cannot be reached (admin requests time out) is not a
        reason to stop mirroring: the step is retried with back-off.
        """
        try:
            self._poll()
        except (FlowFailed, ConfigError):
            raise
        except Exception as exc:  # noqa: BLE001 - transient by assumption; logged each time
            self._failures += 1
            delay = _RESTART_BACKOFF_S[min(self._failures - 1, len(_RESTART_BACKOFF_S) - 1)]
            log.warning(
                "flow=%s %s: %s; trying again in %ds",
                self.flow.name,
                type(exc).__name__,
                _first_line(str(exc)),
                delay,
            )
            if self.once and self._failures >= _ONCE_MAX_FAILURES:
                raise FlowFailed(f"flow={self.flow.name} failed {self._failures} times in a row: {exc}") from None
            if self.query is None:
                self._restart_at = time.monotonic() + delay
            else:
                self._next_refresh = self._next_config_sync = time.monotonic() + delay

    def _poll(self) -> None:
        now = time.monotonic()
        if self._restart_at is not None:
            if now >= self._restart_at and not self._stop.is_set():
                self._restart_at = None
                self.progress.restarts += 1
                self.start()
            return
        if self.query is None:
            if not self.once and now >= self._next_refresh:
                self._next_refresh = now + self.flow.refresh_topics_interval_seconds
                topics = self.topics.source_topics()
                if topics:
                    self._ready_target(topics, configs=self.flow.sync_topic_configs_enabled)
                    self._start_query(topics)
            return
        if not self.query.isActive:
            self._on_query_end()
            return
        self.progress.lag = lag_from_progress(last_progress(self.query))
        if self.once:
            return
        if self.flow.refresh_topics_enabled and now >= self._next_refresh:
            self._next_refresh = now + self.flow.refresh_topics_interval_seconds
            self._refresh_topics()
        if now >= self._next_checkpoint:
            self._next_checkpoint = now + self.flow.emit_checkpoints_interval_seconds
            if self.flow.emit_checkpoints_enabled:
                self.emit_checkpoints()
            self._prune_offset_map()
        if self.flow.sync_group_offsets_enabled and now >= self._next_group_sync:
            self._next_group_sync = now + self.flow.sync_group_offsets_interval_seconds
            if not self.flow.emit_checkpoints_enabled:
                self.checkpoints.emit(dict(self.subscribed), write=False)
            self.checkpoints.sync_group_offsets()
        if self.flow.sync_topic_configs_enabled and now >= self._next_config_sync:
            self._next_config_sync = now + self.flow.sync_topic_configs_interval_seconds
            self.topics.sync(self.subscribed, configs=True)
            self._fit_writer_to_target(self.subscribed)

    def emit_checkpoints(self) -> int:
        """Translate the source groups' positions and write checkpoints."""
        return self.checkpoints.emit(dict(self.subscribed))

    def _prune_offset_map(self) -> None:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        request = {
            TopicPartition(self.topics.remote_name(t), p): OffsetSpec.earliest()
            for t, n in self.subscribed.items()
            for p in range(n)
        }
        if not request:
            return
        source_of = {self.topics.remote_name(t): t for t in self.subscribed}
        res = self.target_admin.list_offsets(request, request_timeout=30)
        starts = {(source_of[tp.topic], tp.partition): fut.result().offset for tp, fut in res.items()}
        self.store.prune(starts)

    def _refresh_topics(self) -> None:
        topics = self.topics.source_topics()
        if set(topics) == set(self.subscribed):
            return
        added = sorted(set(topics) - set(self.subscribed))
        removed = sorted(set(self.subscribed) - set(topics))
        log.info(
            "flow=%s source topics changed (added: %s; removed: %s); restarting the query",
            self.flow.name,
            ", ".join(added) or "-",
            ", ".join(removed) or "-",
        )
        self._ready_target(topics, configs=self.flow.sync_topic_configs_enabled)
        self._stop_query()
        self._start_query(topics)

    def _on_query_end(self) -> None:
        exc = self.query.exception()
        self.progress.lag = lag_from_progress(last_progress(self.query))
        self.query = None
        if exc is None:
            self.finished = True
            # A --once run leaves checkpoints (and synced groups) as of its end.
            if self.flow.emit_checkpoints_enabled:
                self.emit_checkpoints()
            if self.flow.sync_group_offsets_enabled:
                if not self.flow.emit_checkpoints_enabled:
                    self.checkpoints.emit(dict(self.subscribed), write=False)
                self.checkpoints.sync_group_offsets()
            return
        text = str(exc)
        if self._stop.is_set() and "_StopRequested" in text:
            self.finished = True
            return
        terminal = terminal_message(text)
        if terminal is not None:
            raise FlowFailed(terminal)
        broken = _environment_error(text)
        if broken is not None:
            raise FlowFailed(f"flow={self.flow.name} cannot run: {broken}")
        self._failures += 1
        if self.once and self._failures >= _ONCE_MAX_FAILURES:
            last = _first_line(text)
            raise FlowFailed(f"flow={self.flow.name} failed {self._failures} times in a row: {last}")
        delay = _RESTART_BACKOFF_S[min(self._failures - 1, len(_RESTART_BACKOFF_S) - 1)]
        log.warning(
            "flow=%s query failed (%s); replaying from the last committed batch in %ds",
            self.flow.name,
            _first_line(text),
            delay,
        )
        self._restart_at = time.monotonic() + delay

    def request_stop(self) -> None:
        self._stop.set()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop after the batch in flight (if any) has finished or timed out."""
        self._stop.set()
        self._stop_query(timeout_s)

    def _stop_query(self, timeout_s: float = 30.0) -> None:
        q = self.query
        if q is None:
            return
        deadline = time.monotonic() + timeout_s
        while q.isActive and q.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.2)
        try:
            q.stop()
        except Exception as exc:  # noqa: BLE001 - stopping a query that just failed
            log.debug("flow=%s stopping query: %s", self.flow.name, exc)
        self.query = None

    def report_line(self) -> str:
        p = self.progress
        lag = "?" if p.lag is None else f"{p.lag:,}"
        extra = f" dead-lettered={p.dead_lettered:,}" if p.dead_lettered else ""
        if p.lost_on_source:
            extra += f" LOST-ON-SOURCE={p.lost_on_source:,}"
        return f"flow={p.flow} records={p.records:,} rate={p.rate():,.0f}/s lag={lag} batches={p.batches}{extra}"


# Failures that replaying cannot fix: the executors' Python lacks a module,
# or the job's code cannot be shipped. Everything else is retried.
_ENVIRONMENT_ERRORS = re.compile(r"\b(ModuleNotFoundError|ImportError|PicklingError|SyntaxError): ?([^\n]*)")
_ONCE_MAX_FAILURES = 5


def _environment_error(text: str) -> str | None:
    m = _ENVIRONMENT_ERRORS.search(text)
    return None if m is None else f"{m.group(1)}: {m.group(2).strip()}"


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ")):
            return re.sub(r"\s+", " ", line)[:300]
    return text[:300]


class Mirror:
    """All enabled flows of one configuration, in one Spark session."""

    def __init__(
        self,
        config: Any,
        *,
        once: bool = False,
        master: str | None = None,
        spark_conf: dict[str, str] | None = None,
    ) -> None:
        if not config.flows:
            raise FlowFailed("no enabled flow to run (set e.g. A->B.enabled = true)")
        self.config = config
        self.once = once
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
        self.runners: list[FlowRunner] = []
        self.spark: Any = None

    def request_stop(self) -> None:
        self._stop.set()
        for r in self.runners:
            r.request_stop()

    def run(self, *, on_progress: Callable[[list[FlowRunner]], None] | None = None) -> list[FlowRunner]:
        from sparkmirror.pipeline.session import build_session

        self.spark = build_session(self.master, self.spark_conf)
        interval = min(f.spark.progress_interval_seconds for f in self.config.flows)
        heartbeats = self._heartbeats()
        try:
            if heartbeats is not None:
                heartbeats.start()  # before the flows list topics: heartbeats are mirrored too
                heartbeats.maybe_emit()
            for flow in self.config.flows:
                mode = "exactly-once" if flow.exactly_once else "at-least-once"
                log.info("flow=%s mode=%s", flow.name, mode)
                runner = FlowRunner(self.spark, flow, once=self.once)
                self.runners.append(runner)
                runner.start()
            next_report = time.monotonic() + interval
            while not self._stop.is_set():
                if heartbeats is not None:
                    heartbeats.maybe_emit()
                for r in self.runners:
                    r.poll()
                if self.once and all(r.finished for r in self.runners):
                    break
                if time.monotonic() >= next_report:
                    next_report = time.monotonic() + interval
                    if on_progress:
                        on_progress(self.runners)
                self._stop.wait(0.5)
        finally:
            for r in self.runners:
                r.stop()
                r.store.close()
                r.syncs.close()
            if heartbeats is not None:
                heartbeats.close()
        return self.runners

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
