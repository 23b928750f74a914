"""One flow A->B on the driver: its parts wired together, its copy, its chores.

:class:`Flow` owns what the flow needs (client settings, remote topics, offset map, MM2 offset
syncs, checkpoints, the target's preparation, the record of what was copied, the scheduler) and
knows how to start its copy (:class:`~.stream.StreamingCopy`) and how to finish. Starting,
restarting and stopping it is the supervisor's (:mod:`.supervisor`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sparkmirror.checkpoints.emitter import CheckpointEmitter
from sparkmirror.config.model import FlowConfig
from sparkmirror.control.store import ControlWatcher
from sparkmirror.core.adoption import (
    HANDED_BACK,
    ExistingRecords,
    PartitionState,
    conflict_message,
    own_next,
    plan_first_start,
)
from sparkmirror.core.checkpoints import CheckpointPass
from sparkmirror.core.connect_offsets import offsets_topic
from sparkmirror.core.control import FlowControl
from sparkmirror.core.naming import lease_group, offset_map_topic, progress_group, topic_ids_group
from sparkmirror.core.policy import IdentityReplicationPolicy
from sparkmirror.core.ranges import OPEN_END, SourceRange
from sparkmirror.core.status import State
from sparkmirror.core.transactions import PER_PARTITION, default_transaction_groups
from sparkmirror.errors import SparkMirrorError
from sparkmirror.kafka.access import AccessDenied, classify, denied, principal
from sparkmirror.kafka.acls import AclSync
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.groups import commit_offsets, committed_offsets, committed_positions
from sparkmirror.kafka.lag import first_records, list_offsets, log_bounds
from sparkmirror.kafka.lease import FlowLease, LeaseHeld, LeaseRefused
from sparkmirror.kafka.mm2offsets import mm2_positions
from sparkmirror.kafka.topicids import TopicIdLook, TopicIds, TopicRecreated, recreated_topics, source_topic_ids
from sparkmirror.kafka.topics import TopicSync
from sparkmirror.offsets.store import OffsetMapStore
from sparkmirror.offsets.syncs import OffsetSyncWriter
from sparkmirror.pipeline.driver.control import FlowThrottle, TargetShares
from sparkmirror.pipeline.driver.deletions import TopicDeletions
from sparkmirror.pipeline.driver.progress import (
    FlowProgress,
    lag_from_progress,
    last_progress,
    partition_lags,
)
from sparkmirror.pipeline.driver.recorder import CopyRecorder
from sparkmirror.pipeline.driver.scheduler import Scheduler
from sparkmirror.pipeline.driver.stream import StreamingCopy
from sparkmirror.pipeline.driver.target import TargetPreparer
from sparkmirror.pipeline.exceptions import (
    ExistingRecordsError,
    InstanceConflict,
    TopicRecreatedError,
)
from sparkmirror.pipeline.executor.plan import JAVA_READS, JAVA_WRITES, WritePlan
from sparkmirror.status.reporter import StatusReporter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkmirror.metrics.exporter import MirrorMetrics

log = logging.getLogger(__name__)

#: Where each partition of each topic starts: topic -> partition (as text) -> offset (-2: the log start).
StartingOffsets = dict[str, dict[str, int]]

#: Chore names (the supervisor postpones some of them after a failure).
REFRESH, CHECKPOINTS, GROUP_SYNC, CONFIG_SYNC = "topic refresh", "checkpoints", "group sync", "topic config sync"
ACL_SYNC = "topic ACL sync"
STATUS = "status"
TX_LAYOUTS = "exactly-once layout record"
#: How often the record of the exactly-once layout in use is renewed (offsets expire after days).
_RENEW_LAYOUTS_S = 3600
OFFSET_MAP_FOLD = "offset map fold"
TOPIC_IDS = "source topic ids"
#: How often the driver looks for a source topic deleted and re-created under its name while the copy
#: runs (its tasks stop copying it at their next answer), how often it reads a look's answer (a look
#: is never waited for), and how long the source has to answer one. Each look is at the topics the
#: tasks read more of since the last one and the paused ones; every topic is looked at every
#: :data:`TOPIC_IDS_ALL_EVERY_S`.
TOPIC_IDS_EVERY_S = 5.0
TOPIC_IDS_ALL_EVERY_S = 60.0
_TOPIC_IDS_TURN_S = 1.0
_TOPIC_IDS_WAIT_S = 30.0

#: How often the driver folds the offset map's new segments into chains. Between two folds a
#: partition gains one segment per exactly-once commit interval that wrote to it, and those are what
#: a start loads one record each: at 1,000 partitions and an interval a second, 10 s leaves at most
#: 10,000 (at the default 200 ms interval, 50,000).
FOLD_INTERVAL_S = 10.0
#: Least seconds between two prunes of the offset map below the target's log starts (each asks the target
#: for every remote partition's log start, and walks every partition's map): the default checkpoint
#: interval (``emit.checkpoints.interval.seconds``), so a flow checkpointing more often does not prune more
#: often. At every pass of 5 s (the benchmark's) a prune was about half the driver's CPU at 1,000 partitions
#: (docs/performance.md), and found nothing new most times: a broker moves a log start by retention at most
#: once per ``log.retention.check.interval.ms`` (5 minutes by default). Until a segment is pruned, an offset
#: below the target's log start translates to a record the target no longer holds, not "below the history".
PRUNE_EVERY_S = 60.0


def write_plan(clients: FlowClients) -> WritePlan:
    """The flow's write plan before the target's limits and the fencing are known."""
    flow = clients.flow
    return WritePlan(
        flow=flow.name,
        source_alias=flow.source,
        target_alias=flow.target,
        policy=flow.policy,
        producer_config=clients.target_producer,
        errors_tolerance=flow.errors_tolerance,
        dead_letter_topic=flow.dead_letter_topic,
        exactly_once=flow.exactly_once,
        offset_map_topic=offset_map_topic(flow.source),
        progress_group=progress_group(flow.source, flow.target),
        consumer_config=clients.target_consumer,
        source_consumer_config=clients.source_consumer,
        transport=flow.spark.transport,
        java_source_consumer_config=clients.java_source_consumer if flow.spark.transport in JAVA_READS else {},
        java_producer_config=clients.java_target_producer if flow.spark.transport in JAVA_WRITES else {},
        source_admin_config=clients.source_admin_config,
        transaction_timeout_ms=flow.spark.transaction_timeout_ms,
        test_fail_after_records=int(os.environ.get("SPARKMIRROR_TEST_FAIL_AFTER_RECORDS", "0")),
    )


def take_lease(clients: FlowClients) -> FlowLease:
    """The flow's lease on the target (one instance per flow); :class:`InstanceConflict` names the holder.

    Its group's member owns the offset-map topic's partition, so that topic is made first.
    """
    flow = clients.flow
    try:
        OffsetMapStore(clients).ensure_topic()
    except Exception as exc:
        found = classify(str(exc))
        if found is None:
            raise
        raise denied(
            *found,
            flow=flow.name,
            cluster=flow.target,
            who=principal(clients.target_admin_config),
            operation="create the internal topics",
        ) from None
    lease = FlowLease(
        clients.target_consumer,
        flow=flow.name,
        group=lease_group(flow.source, flow.target),
        topic=offset_map_topic(flow.source),
    )
    try:
        lease.acquire(clients.target_admin_config)
    except LeaseHeld as exc:
        raise InstanceConflict(str(exc)) from None
    except LeaseRefused as exc:
        raise denied(
            exc.kind,
            exc.detail,
            flow=flow.name,
            cluster=flow.target,
            who=principal(clients.target_consumer),
            operation=f"join the flow's lease group {lease.group} (consumer group, topic {lease.topic})",
        ) from None
    return lease


class Flow:
    """The parts of one flow, its copy on Spark and its periodic chores."""

    def __init__(
        self,
        spark: SparkSession,
        flow: FlowConfig,
        *,
        once: bool,
        reset_topics: frozenset[str] = frozenset(),
        lease: FlowLease | None = None,
        metrics: MirrorMetrics | None = None,
        flow_count: int = 1,
        existing_records: ExistingRecords = "refuse",
        mm2_offsets_topic: str = "",
        target_shares: TargetShares | None = None,
    ) -> None:
        self.spark = spark
        self.flow = flow
        #: Flows in this Spark application: the streaming engine gives each its share of the cores.
        self.flow_count = max(1, flow_count)
        self.once = once
        #: ``run --reset-topic``: re-created source topics to mirror from their beginning (first start only).
        self.reset_topics = reset_topics
        #: ``run --existing-records``: a first start over remote records of unknown origin (core.adoption).
        self.existing_records: ExistingRecords = existing_records
        #: Connect's offsets topic MirrorMaker 2 kept this flow's position in (``run --mm2-offsets-topic``,
        #: ``offset.storage.topic``, MM2's dedicated-mode name).
        self.mm2_offsets_topic = offsets_topic(flow.source, mm2_offsets_topic or flow.mm2_offsets_topic)
        #: Set on a stop request: the copy is not started again.
        self.stop_requested = threading.Event()
        self.progress = FlowProgress(flow.name)
        self.clients = clients = FlowClients(flow)
        self.topics = TopicSync(clients)
        self.acls = AclSync(clients)
        self.store = OffsetMapStore(clients)
        self.syncs = OffsetSyncWriter(clients)
        self.checkpoints = CheckpointEmitter(
            clients, self.store, internal_groups=frozenset({progress_group(flow.source, flow.target)})
        )
        self.topic_ids = TopicIds(
            flow=flow.name,
            consumer_conf=clients.target_consumer,
            group=topic_ids_group(flow.source, flow.target),
            remote_name=self.topics.remote_name,
        )
        self.target = TargetPreparer(clients, self.topics, self.store, self.syncs, self.checkpoints)
        self.recorder = CopyRecorder(
            clients, write_plan(clients), store=self.store, syncs=self.syncs, progress=self.progress
        )
        self.metrics = metrics.flow(flow.source, flow.target, self.topics.remote_name) if metrics else None
        self.recorder.metrics = self.metrics
        self.status = StatusReporter(clients, flow.spark.progress_interval_seconds, self.metrics)
        #: Flow control: the operator's record on the target, and the limit the tasks share.
        self.control = ControlWatcher(clients)
        self.throttle = FlowThrottle(
            flow.name, flow.target, configured=flow.spark.throttle_bytes_per_second, targets=target_shares
        )
        self._held_counted = 0.0
        self._held_seen = (time.monotonic(), 0.0)
        self._reported_control: tuple[FlowControl, tuple[str, ...]] = self.throttle.in_effect
        self.deletions = TopicDeletions(
            clients, self.store, self.topics.remote_name, sync=flow.spark.sync_topic_deletions, metrics=self.metrics
        )
        self.scheduler = Scheduler()
        #: The checkpoint pass under way (its slices are spread over the interval).
        self._pass: CheckpointPass | None = None
        #: When the offset map was last pruned (monotonic s; none yet).
        self._pruned_at: float | None = None
        #: (source or target, operation): what the flow does now (named when a cluster refuses it).
        self.step: tuple[str, str] = ("source", "start")
        self.copy_job: StreamingCopy | None = None
        #: The driver's look at the running copy's source topic ids, and when the next is due.
        self._ids_look: tuple[StreamingCopy, TopicIdLook] | None = None
        self._ids_next = 0.0
        self._ids_all_next = 0.0
        #: Topics a look was to see but did not (not answered, or not asked): in the next one.
        self._ids_unseen: set[str] = set()
        #: The copy ended without error (``--once``), or stopped on request.
        self.finished = False
        #: The terminal error that stopped this flow (the other flows go on); ``None`` while it runs.
        self.failure: SparkMirrorError | None = None
        #: The flow's lease on the target, held from the first start to close.
        self.lease: FlowLease | None = lease
        self._prepared = False
        #: The id of each source topic as last checked (:meth:`check_topic_ids`).
        self.source_ids: dict[str, str] = {}

    @property
    def subscribed(self) -> dict[str, int]:
        """Source topics of the running copy and their partition counts."""
        return self.recorder.subscribed

    def start(self) -> None:
        """Prepare the target and start the copy; called again on every restart."""
        flow = self.flow
        if not self._prepared:
            self._step("source", "describe the cluster")
            self._check_authentication("source")
            self._step("target", "describe the cluster")
            self._check_authentication("target")
            # First on the target, so that what stops or delays the flow from here on is reported
            # to `sparkmirror status` (not the previous run's state).
            self._step("target", "create the status topic")
            self.status.ensure_topic()
            self.control.start()  # before the copy: a flow paused before it starts copies nothing
            self._follow(self.control.control, said=False)
            self._step("target", "create the internal topics")
            self.target.internal_topics()
            if flow.emit_checkpoints_enabled or flow.sync_group_offsets_enabled:
                self._step("target", "read the checkpoints topic")
                self.checkpoints.restore()
            self._prepared = True
        self._hold_lease()  # before the fencing: a second instance must not fence the first
        self._step("source", "list and describe the source topics")
        topics = self.topics.source_topics()
        if flow.exactly_once:
            self._step("target", "fence the transactional producers")
            self._fence(self.transaction_groups(topics), topics)
        # (Re)load on every start: a failed task may have committed segments that never reached this
        # process.
        self._step("target", "read the offset map topic")
        self.store.load()
        self._step("target", "create or alter the remote topics")
        self.target.remote_topics(topics, configs=flow.sync_topic_configs_enabled)
        self.check_topic_ids(topics)  # recorded on the remote topics: after they exist
        if self.once and flow.sync_topic_acls_enabled:
            self.acls.sync()  # --once schedules no chores: the ACLs are copied once, here
        self._step("source", "read the source topics")
        self._start_copy(topics)
        self._schedule()
        self.report("running")

    def transaction_groups(self, topics: dict[str, int]) -> int:
        """Exactly-once: the transaction groups of this start (``sparkmirror.exactly.once.transactions``)."""
        configured = self.flow.spark.exactly_once_transactions
        if configured >= 0:
            return configured
        return default_transaction_groups(self._task_count(), sum(topics.values()))

    def _task_count(self) -> int:
        """The flow's copy tasks: its share of Spark's default parallelism (the cores) among the run's flows."""
        return max(1, max(1, int(self.spark.sparkContext.defaultParallelism)) // self.flow_count)

    def _fence(self, groups: int, topics: dict[str, int]) -> WritePlan:
        """Fence every id that may hold a transaction, then write with ``groups`` groups (exactly-once)."""
        plan = dataclasses.replace(self.recorder.plan, transaction_groups=groups)
        self.target.fence(plan, topics)
        # Producers cached in the executors are fenced now: make them new.
        self.recorder.plan = dataclasses.replace(plan, producer_generation=uuid.uuid4().hex)
        log.info(
            "flow=%s exactly-once: %s",
            self.flow.name,
            "one transaction per source partition" if groups == PER_PARTITION else f"{groups} transaction groups",
        )
        return self.recorder.plan

    def _renew_layouts(self) -> None:
        """Exactly-once: renew the record of the layout in use (an empty group's offsets expire)."""
        self.target.record_layouts(self.recorder.plan, {self.recorder.plan.transaction_groups})

    def report(self, state: State, error: str | None = None) -> None:
        """Say the flow's state on its target (and in the metrics); a running flow the operator paused
        whole is ``paused`` once every task follows the pause (flow control in effect, not just asked)."""
        p = self.progress
        control, paused = self.throttle.in_effect
        if state == "running" and control.paused:
            state = "paused"
        limit = self.throttle.limit()
        self._reported_control = (control, paused)
        self.status.report(
            state,
            error=error,
            records=p.records,
            restarts=p.restarts,
            paused_topics=paused,
            throttle=None if limit is None else int(limit),
            throttled_ratio=self._held_ratio(),
        )

    def _held_ratio(self) -> float:
        """The share of the time since the last call that the flow's tasks waited for the byte limit."""
        now, held = time.monotonic(), self.throttle.held_s
        last_at, last_held = self._held_seen
        self._held_seen = (now, held)
        return 0.0 if now <= last_at else min(1.0, max(0.0, (held - last_held) / (now - last_at)))

    def _follow(self, control: FlowControl, *, said: bool = True) -> None:
        """The operator's record from now on: said in the log, handed to the tasks with their next answer."""
        self.throttle.follow(control, self.subscribed or self.topics.source_topics())
        if not said:
            if control != FlowControl(self.flow.name):
                log.warning("flow=%s starts under flow control: %s", self.flow.name, self._control_line(control))
            return
        log.warning("flow=%s flow control changed: %s", self.flow.name, self._control_line(control))
        if self.once and self.throttle.paused_topics:
            log.warning(
                "flow=%s run --once ends only once its paused topics are resumed (sparkmirror resume) and copied",
                self.flow.name,
            )

    def _control_line(self, control: FlowControl) -> str:
        paused = self.throttle.paused_topics
        limit = control.limit(self.flow.spark.throttle_bytes_per_second)
        parts = [
            "the whole flow paused" if control.paused else
            f"paused topics {', '.join(paused) or '(none now)'} (by {', '.join(control.paused_topics)})"
            if control.paused_topics else "not paused",
            f"at most {limit:,} bytes/s" if limit else "no byte limit",
        ]  # fmt: skip
        return "; ".join(parts) + (f" (by {control.by})" if control.by else "")

    def check_topic_ids(self, topics: Iterable[str]) -> None:
        """Stop the flow (:class:`TopicRecreatedError`) if a source topic is not the one mirrored so far;
        on the first start, ``--reset-topic`` makes a re-created topic start again from its beginning."""
        current = source_topic_ids(self.clients.source_admin, topics)
        if self.reset_topics:
            self._reset(current)
        try:
            self.topic_ids.check(current)
        except TopicRecreated as exc:
            raise TopicRecreatedError(str(exc)) from None
        self.source_ids.update(current)  # the ids the next job's tasks hold their topics to

    def _reset(self, current: dict[str, str]) -> None:
        """Forget the old topics' positions (offset map, progress) and record the new ids: the next copy
        reads those topics from their beginning, the others from what the target says was mirrored."""
        requested, self.reset_topics = self.reset_topics, frozenset()
        recorded = self.topic_ids.recorded(requested & set(current))
        reset = {t: current[t] for t in sorted(requested) if t in recorded and recorded[t] != current[t]}
        for topic in sorted(requested - set(reset)):
            log.warning(
                "flow=%s --reset-topic %s: not a re-created topic of this flow; nothing reset", self.flow.name, topic
            )
        if not reset:
            return
        for topic, topic_id in reset.items():
            self.store.forget_topic(topic)
            # The progress group (a start is claimed there: core.adoption).
            md = self.clients.source_admin.list_topics(topic, timeout=30).topics[topic]
            remote = self.topics.remote_name(topic)
            commit_offsets(
                self.recorder.plan.consumer_config,
                self.recorder.plan.progress_group,
                {(remote, p): 0 for p in md.partitions},
            )
            self.topic_ids.record({topic: topic_id})
            log.warning(
                "flow=%s --reset-topic %s: the re-created topic (id %s) is mirrored from its beginning into %s, "
                "after the old topic's records",
                self.flow.name,
                topic,
                topic_id,
                self.topics.remote_name(topic),
            )

    def _first_start(self, topics: dict[str, int]) -> None:
        """Partitions sparkmirror has no state of its own for (no progress, no segment): adopt MirrorMaker
        2's position, or claim their start in the progress group before any record is copied, or refuse
        records on the target that nothing explains; and partitions handed back to MM2 that MM2 copied
        since: adopt again (:mod:`sparkmirror.core.adoption`)."""
        flow, plan = self.flow, self.recorder.plan
        remote = {t: self.topics.remote_name(t) for t in topics}
        positions = committed_positions(
            plan.consumer_config, plan.progress_group, [(remote[t], p) for t, n in topics.items() for p in range(n)]
        )
        tails = self.store.tails()
        looked = {
            t: n
            for t, n in topics.items()
            if any((remote[t], p) not in positions or positions[(remote[t], p)][1] == HANDED_BACK for p in range(n))
        }
        if not looked:
            return
        mm2 = (
            mm2_positions(self.clients.target_consumer, self.mm2_offsets_topic, flow.source)
            if flow.spark.adopt_mm2
            else {}
        )
        source = log_bounds(self.clients.source_admin, looked)
        target = log_bounds(self.clients.target_admin, {remote[t]: n for t, n in looked.items()})
        states = {}
        for t, n in looked.items():
            for p in range(n):
                low, high = target[(remote[t], p)]
                at = mm2.get((t, p))
                tail = tails.get((t, p))
                progress = positions.get((remote[t], p))
                states[(t, p)] = PartitionState(
                    own_next=own_next(progress[0] if progress else None, tail),
                    own_written_end=tail[1] + tail[2] if tail else None,
                    handed_back=progress is not None and progress[1] == HANDED_BACK,
                    mm2_next=at.next_offset if at is not None else None,
                    source_start=source[(t, p)][0],
                    source_end=source[(t, p)][1],
                    remote_records=high - low,
                    remote_end=high,
                )
        # Aborted records and transaction markers fill offsets but are no records a reader sees (an earlier
        # version's aborted transaction, a fenced zombie's): a partition counts as holding records only
        # when a read_committed reader finds one.
        unexplained = {
            (remote[t], p): target[(remote[t], p)][0]
            for (t, p), st in states.items()
            if st.own_next is None and st.mm2_next is None and st.remote_records > 0
        }
        if unexplained:
            seen = first_records(self.clients.target_consumer, unexplained, timeout_s=30)
            for (t, p), st in states.items():
                if (remote[t], p) in unexplained and (remote[t], p) not in seen:
                    states[(t, p)] = dataclasses.replace(st, remote_records=0)
        decided = plan_first_start(
            states,
            adopt=flow.spark.adopt_mm2,
            existing=self.existing_records,
            shared_target=isinstance(flow.policy, IdentityReplicationPolicy),
        )
        for (t, p), why in decided.unusable.items():
            log.warning(
                "flow=%s %s[%d]: %s (Connect's offsets topic %s on %s); not adopted",
                flow.name,
                t,
                p,
                why,
                self.mm2_offsets_topic,
                flow.target,
            )
        if decided.conflicts:
            raise ExistingRecordsError(
                conflict_message(flow.name, flow.target, decided, remote, self.mm2_offsets_topic)
            )
        commit_offsets(
            plan.consumer_config, plan.progress_group, {(remote[t], p): o for (t, p), o in decided.starts.items()}
        )
        self.existing_records = "refuse"  # the operator's choice was for this start: the claims now say it
        if decided.adopted:
            shown = ", ".join(f"{t}[{p}] from offset {o}" for (t, p), o in list(decided.adopted.items())[:10])
            more = f" and {len(decided.adopted) - 10} more" if len(decided.adopted) > 10 else ""
            copied = sum(states[k].remote_end for k in decided.adopted)
            log.warning(
                "flow=%s adopted MirrorMaker 2's position from Connect's offsets topic %s on %s: %d partitions "
                "of %d topics (%s%s); MM2 had copied %s records into them; recorded as the flow's progress "
                "(group %s), so a restart resumes from it and adopts nothing again",
                flow.name,
                self.mm2_offsets_topic,
                flow.target,
                len(decided.adopted),
                len({t for t, _ in decided.adopted}),
                shown,
                more,
                f"{copied:,}",
                plan.progress_group,
            )
        chosen = {k: o for k, o in decided.claimed.items() if states[k].remote_records > 0}
        if chosen:
            log.warning(
                "flow=%s run --existing-records %s: %d partitions whose remote partitions already hold records "
                "start at %s",
                flow.name,
                self.existing_records,
                len(chosen),
                ", ".join(f"{t}[{p}] offset {o}" for (t, p), o in list(chosen.items())[:10]),
            )

    def _hold_lease(self) -> None:
        """Take the flow's lease once (one instance per flow); refuse, naming the holder, if another has it."""
        if self.lease is None:
            self.lease = take_lease(self.clients)

    # -- access ---------------------------------------------------------------
    def _step(self, side: str, operation: str) -> None:
        """What the flow is doing now, on which cluster: named if that cluster refuses it."""
        self.step = (side, operation)

    def _check_authentication(self, side: str) -> None:
        """Fail at once, in one line, when a cluster refuses our credentials (librdkafka would
        otherwise only time out, and the supervisor would retry for ever)."""
        admin = self.clients.source_admin if side == "source" else self.clients.target_admin
        deadline = time.monotonic() + 15
        while True:
            try:
                admin.list_topics(timeout=2)
                return
            except Exception:  # noqa: BLE001 - unreachable is handled by the caller's retry; refused is not
                denied = self.access_denied("")
                if denied is not None:
                    raise denied from None
                if time.monotonic() >= deadline:
                    raise

    def access_denied(self, text: str, *, copying: bool = False) -> AccessDenied | None:
        """The error that stops this flow when ``text`` (or an admin client's report) says a cluster
        refused its principal or an operation; None for any other failure. ``copying``: the text is
        the copy's error (its tasks read the source)."""
        side, operation = ("source", "read the source topics") if copying else self.step
        found = self.clients.authentication_failure()
        if found is not None:
            side, detail = found
            kind = "authentication"
        else:
            classified = classify(text)
            if classified is None:
                return None
            kind, detail = classified
        flow, clients = self.flow, self.clients
        alias, conf = (
            (flow.source, clients.source_admin_config)
            if side == "source"
            else (flow.target, clients.target_admin_config)
        )
        return denied(kind, detail, flow=flow.name, cluster=alias, who=principal(conf), operation=operation)

    def _schedule(self) -> None:
        """The chores, added on the first start; a restart moves only the topic refresh and config sync
        one interval on (checkpoints and group sync keep their turn, as a crash loop must not multiply
        them)."""
        flow, s = self.flow, self.scheduler
        running = self._running
        if TOPIC_IDS not in s.chores:  # ``--once`` too: its copy may run for long
            s.every(TOPIC_IDS, _TOPIC_IDS_TURN_S, self._watch_topic_ids, when=running)
        if self.once:
            return
        if REFRESH in s.chores:
            s.restart(REFRESH, CONFIG_SYNC)
            return
        s.every(REFRESH, flow.refresh_topics_interval_seconds, self._refresh_topics)
        s.every(CHECKPOINTS, flow.emit_checkpoints_interval_seconds, self._checkpoint_pass, now=True, when=running)
        if flow.sync_group_offsets_enabled:
            s.every(GROUP_SYNC, flow.sync_group_offsets_interval_seconds, self._sync_groups, now=True, when=running)
        if flow.sync_topic_configs_enabled:
            s.every(CONFIG_SYNC, flow.sync_topic_configs_interval_seconds, self._sync_configs, when=running)
        if flow.sync_topic_acls_enabled:
            # After the remote topics exist (MM2 runs it at start, then every interval).
            s.every(ACL_SYNC, flow.sync_topic_acls_interval_seconds, self.acls.sync, now=True)
        s.every(STATUS, flow.spark.progress_interval_seconds, self._report_running, when=running)
        if flow.exactly_once:
            s.every(TX_LAYOUTS, _RENEW_LAYOUTS_S, self._renew_layouts, when=running)
        s.every(OFFSET_MAP_FOLD, FOLD_INTERVAL_S, self._fold_offset_map)

    def _report_running(self) -> None:
        self.report("running")
        if self.copy_job is not None:
            self._keep_positions(self.copy_job)
        if self.metrics is not None:
            total = self.throttle.held_s  # read once: the tasks' reports add to it meanwhile
            held, self._held_counted = total - self._held_counted, total
            limit = self.throttle.limit()
            self.metrics.throttle(held, limit)
        if self.metrics is not None and self.copy_job is not None:
            try:
                self.metrics.lag(partition_lags(self.clients, last_progress(self.copy_job)))
            except Exception as exc:  # noqa: BLE001 - metrics must not stop the flow (a topic deleted meanwhile)
                log.info("flow=%s lag metrics not refreshed this interval: %s", self.flow.name, exc)

    def _running(self) -> bool:
        return self.copy_job is not None

    def _watch_topic_ids(self) -> None:
        """A source topic deleted and re-created under its name since the copy began is another topic: its
        tasks are told at their next answer and fail before they copy more of it; their restart finds it
        and the flow stops (exit 7, ``run --reset-topic``). One look for the flow every
        :data:`TOPIC_IDS_EVERY_S` (each task used to ask for its own, an idle cost per task:
        docs/performance.md), read at the first turn after it is answered: never waited for, so a source
        that does not answer holds up no other chore or flow.

        A look is at the topics whose positions the tasks' reports moved since the last look (a record
        of a re-created topic reaches the target only through a read, and every read is reported within
        a second), the paused ones (found before a resume reads them), and those the last look had no
        answer for (a topic the source says is unknown, deleted and not re-created, is not: it is read
        again only once re-created); every topic every :data:`TOPIC_IDS_ALL_EVERY_S`. A flow whose
        topics are idle makes no look in between: a look at 1,000 partitions costs the driver 18 ms of
        CPU (docs/performance.md, an idle flow)."""
        job = self.copy_job
        if job is None or job.recreated or not job.plan.topic_ids:
            self._ids_look = None
            return
        expected = job.plan.topic_ids
        now = time.monotonic()
        if self._ids_look is not None and self._ids_look[0] is job:
            look = self._ids_look[1]
            if not look.done():
                return  # the source has until the look's request timeout to answer
            self._ids_look = None
            current, failed = look.ids()
            self._ids_unseen |= set(failed)
            if failed and not current:
                why = next(iter(failed.values()))
                log.info("flow=%s source topic ids not looked at this turn: %s", self.flow.name, why)
            changed = recreated_topics(expected, current)
            if changed:
                log.error(
                    "flow=%s source topic %s deleted and re-created while the copy ran; its tasks stop copying it",
                    self.flow.name,
                    ", ".join(t for t, _was, _now in changed),
                )
                job.topics_recreated(changed)
                return
        if now < self._ids_next:
            return
        self._ids_next = now + TOPIC_IDS_EVERY_S
        moved, self._ids_unseen = job.take_moved() | self._ids_unseen, set()
        if now >= self._ids_all_next:
            self._ids_all_next = now + TOPIC_IDS_ALL_EVERY_S
            topics = set(expected)
        else:
            topics = (moved | set(job.throttle.paused_topics)) & set(expected)
        if not topics:
            return
        try:
            self._ids_look = (job, TopicIdLook(self.clients.source_admin, topics, timeout_s=_TOPIC_IDS_WAIT_S))
        except Exception as exc:  # noqa: BLE001 - the source is unreachable: the tasks' reads say so
            self._ids_unseen = topics
            log.info("flow=%s source topic ids not looked at this turn: %s", self.flow.name, exc)

    def poll(self) -> None:
        """While the copy runs: its lag, and the chores that are due."""
        if self.lease is not None and self.lease.lost.is_set():
            raise InstanceConflict(
                f"flow={self.flow.name} lost its lease (group {self.lease.group} on {self.flow.target}): it was cut "
                "off from the target longer than the lease's session and another instance may run the flow now"
            )
        job = self.copy_job
        if job is not None:
            self.progress.lag = job.lag
            job.check_started()  # said once if a task has waited a minute for a slot (``--once`` too)
        changed = self.control.poll()
        if changed is not None:
            self._follow(changed)
        if self.copy_job is not None and self.throttle.in_effect != self._reported_control:
            self.report("running")  # paused (or running again) as soon as every task follows it
        self.syncs.tick()  # held offset syncs of partitions that went quiet
        self.scheduler.run_due()

    # -- the copy -----------------------------------------------------------
    def _start_copy(self, topics: dict[str, int]) -> None:
        self.deletions.check(topics, self.recorder.subscribed)  # topics mirrored so far, gone from the source
        self.recorder.subscribed = dict(topics)
        if not topics:
            log.info(
                "flow=%s no source topic matches yet; looking again in %ss",
                self.flow.name,
                self.flow.refresh_topics_interval_seconds,
            )
            if self.once:
                self.finished = True
            return
        self._step("target", "read where the flow's partitions stand")
        self._first_start(topics)  # on every start, and for topics and partitions found later
        self.recorder.plan = self.target.fit_writer(self.recorder.plan, topics)
        self.copy_job = self._start_streaming(topics)
        log.info(
            "flow=%s mirroring %d topics (%s) into %s",
            self.flow.name,
            len(topics),
            ", ".join(topics),
            ", ".join(self.topics.remote_name(t) for t in topics),
        )

    def _start_streaming(self, topics: dict[str, int]) -> StreamingCopy:
        """The streaming engine's job, each partition started from what the target holds.

        Where a partition starts: the progress committed on the target (exactly-once: only it; at
        least once: the later of it and the offset map's end), else the source's log start. Records
        between that and the source's log start expired before they were mirrored: reported (or,
        with ``sparkmirror.source.loss = fail``, the flow stops) before any task starts.
        """
        flow = self.flow
        progress = self._resume_offsets(topics)
        bounds = log_bounds(self.clients.source_admin, topics)
        plan = dataclasses.replace(
            self.recorder.plan,
            commit_interval_ms=flow.commit_interval_ms,
            interval_max_records=flow.spark.batch_max_records,
            partitions_per_producer=flow.spark.partitions_per_producer,
            producer_idle_close_ms=flow.spark.producer_idle_close_ms,
            tails=self.store.tails(),
            # Each job's producers are new (the previous job's, fenced by them, may still be cached).
            producer_generation=uuid.uuid4().hex,
            topic_ids={t: self.source_ids[t] for t in topics if t in self.source_ids},
        )
        resumed = [
            SourceRange(t, int(p), o, OPEN_END) for t, parts in progress.items() for p, o in parts.items() if o >= 0
        ]
        self.recorder.check_source_loss(resumed)  # sparkmirror.source.loss = fail: the flow stops here
        ranges = []
        for t, parts in progress.items():
            for p, offset in parts.items():
                start, end = bounds[(t, int(p))]
                begin = max(offset, start)  # -2 (nothing mirrored yet): the log start
                ranges.append(SourceRange(t, int(p), begin, end if self.once else OPEN_END))
        if self.once:
            ranges = [r for r in ranges if r.until > r.start]
        tasks = self._task_count()
        self.throttle.follow(self.throttle.control, topics)
        return StreamingCopy(self.spark, self.recorder, plan, ranges, tasks=tasks, throttle=self.throttle)

    def _resume_offsets(self, topics: dict[str, int]) -> StartingOffsets:
        """Where each partition resumes by what the target holds (:func:`~sparkmirror.core.adoption.own_next`:
        the later of the progress, a start claimed or adopted from MM2 on the first start, and the offset
        map's end); -2: nothing (the log start)."""
        plan = self.recorder.plan
        remote = {self.topics.remote_name(t): t for t in topics}
        partitions = [(r, p) for r, t in remote.items() for p in range(topics[t])]
        committed = committed_offsets(plan.consumer_config, plan.progress_group, partitions)
        tails = self.store.tails()
        out: StartingOffsets = {t: {} for t in topics}
        for r, t in remote.items():
            for p in range(topics[t]):
                at = own_next(committed.get((r, p)), tails.get((t, p)))
                out[t][str(p)] = -2 if at is None else at
        return out

    def request_copy_stop(self) -> None:
        """Tell the copy's tasks to stop after their interval, without waiting (:meth:`stop_copy` waits)."""
        if self.copy_job is not None:
            self.copy_job.request_stop()

    def stop_copy(self) -> None:
        """Stop the copy: every task after its current interval (:meth:`StreamingCopy.stop`)."""
        q = self.copy_job
        if q is None:
            return
        try:
            q.stop()
        except Exception as exc:  # noqa: BLE001 - stopping a copy that just failed
            log.debug("flow=%s stopping the copy: %s", self.flow.name, exc)
        self._keep_positions(q)
        self.copy_job = None
        self._ids_look = None  # the ended job's look, if any, is not read
        self.throttle.stopped()

    def _keep_positions(self, copy_job: StreamingCopy) -> None:
        """The copy's positions and the source ends it saw, kept for deleted topics (the end of a deleted
        topic is unknowable afterwards)."""
        self.deletions.positions(copy_job.read_positions())

    def take_ended_copy(self) -> BaseException | None:
        """The copy has ended: forget it; returns its error (``None``: it ended normally)."""
        assert self.copy_job is not None
        error = self.copy_job.exception()
        self.progress.lag = lag_from_progress(last_progress(self.copy_job))
        self._keep_positions(self.copy_job)
        self.copy_job = None
        self._ids_look = None  # the ended job's look, if any, is not read
        self.throttle.stopped()
        return error

    # -- chores --------------------------------------------------------------
    def _refresh_topics(self) -> None:
        """Start the copy once a source topic matches; restart it when the topics or partitions changed; delete
        the remote topics of deleted source topics once that is safe (``sparkmirror.sync.topic.deletions``)."""
        if self.deletions.pending:
            self.deletions.sync()
        if self.copy_job is None:
            topics = self.topics.source_topics()
            if topics:
                self.target.remote_topics(topics, configs=self.flow.sync_topic_configs_enabled)
                self.check_topic_ids(topics)
                self._start_copy(topics)
            return
        if not self.flow.refresh_topics_enabled:
            return
        topics = self.topics.source_topics()
        self._keep_source_ends(topics)
        self.check_topic_ids(set(topics) & set(self.subscribed))
        # The tasks own a fixed set of partitions: new ones restart the copy.
        grown = sorted(t for t, n in topics.items() if n > self.subscribed.get(t, n))
        if set(topics) == set(self.subscribed) and not grown:
            return
        added = sorted(set(topics) - set(self.subscribed))
        removed = sorted(set(self.subscribed) - set(topics))
        log.info(
            "flow=%s source topics changed (added: %s; removed: %s; partitions added: %s); restarting the %s",
            self.flow.name,
            ", ".join(added) or "-",
            ", ".join(removed) or "-",
            ", ".join(f"{t} ({self.subscribed[t]} -> {topics[t]})" for t in grown) or "-",
            "streaming tasks",
        )
        self.target.remote_topics(topics, configs=self.flow.sync_topic_configs_enabled)
        self.check_topic_ids(added)
        self.stop_copy()
        self._start_copy(topics)

    def _keep_source_ends(self, topics: dict[str, int]) -> None:
        """With deletion sync: the source's ends as of now (a topic deleted later is deleted on the target
        only once its records up to there, and up to what the copy saw after, were mirrored). Best effort:
        the copy's own view of the ends is the other source of them."""
        if not self.flow.spark.sync_topic_deletions or not topics:
            return
        try:
            bounds = log_bounds(self.clients.source_admin, topics)
        except Exception as exc:  # noqa: BLE001 - a topic deleted meanwhile: its end is the copy's
            log.debug("flow=%s source ends not read: %s", self.flow.name, exc)
            return
        self.deletions.source_ends({k: end for k, (_start, end) in bounds.items()})

    def _checkpoint_pass(self) -> None:
        """One slice of the current checkpoint pass (:class:`~sparkmirror.core.checkpoints.CheckpointPass`);
        the chore is next due at the next slice's turn, or the next pass's once this one is complete."""
        if not self.flow.emit_checkpoints_enabled:
            self._prune_offset_map()
            return
        current = self._pass
        if current is None:
            interval = self.flow.emit_checkpoints_interval_seconds
            current = self._pass = CheckpointPass(self.checkpoints.begin_pass(), interval, time.monotonic())
        started = time.monotonic()
        try:
            written = self.checkpoints.emit_groups(dict(self.subscribed), current.next_slice())
        except BaseException:
            # The next try starts a whole pass again, soon: the groups of the slices not read yet
            # must not wait for the interval after this one.
            self._pass = None
            self.scheduler.due_in(min(5.0, current.interval_s), CHECKPOINTS)
            raise
        current.slice_done(time.monotonic() - started, written)
        if current.done:
            self._pass = None
            self.progress.last_checkpoint_at = time.time()
            if self.metrics is not None:
                self.metrics.checkpoint_cycle(
                    current.longest_s * 1000, current.written, time.time(), self.checkpoints.confirmed
                )
            self._prune_offset_map()
        self.scheduler.due_in(max(0.0, current.next_due() - time.monotonic()), CHECKPOINTS)

    def emit_checkpoints(self) -> int:
        """Translate the source groups' positions and write checkpoints."""
        return self.checkpoints.emit(dict(self.subscribed))

    def _sync_groups(self) -> None:
        if not self.flow.emit_checkpoints_enabled:
            self.checkpoints.emit(dict(self.subscribed), write=False)
        self.checkpoints.sync_group_offsets()

    def _sync_configs(self) -> None:
        self.topics.sync(self.subscribed, configs=True)
        self.recorder.plan = self.target.fit_writer(self.recorder.plan, self.subscribed)

    def _prune_offset_map(self) -> None:
        """Drop the offset map's segments below the remote partitions' log starts, at most every
        :data:`PRUNE_EVERY_S`."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        now = time.monotonic()
        if self._pruned_at is not None and now - self._pruned_at < PRUNE_EVERY_S:
            return
        request = {
            TopicPartition(self.topics.remote_name(t), p): OffsetSpec.earliest()
            for t, n in self.subscribed.items()
            for p in range(n)
        }
        if not request:
            return
        source_of = {self.topics.remote_name(t): t for t in self.subscribed}
        found = list_offsets(self.clients.target_admin, request)
        self.store.prune({(source_of[topic], partition): start for (topic, partition), start in found.items()})
        self._pruned_at = now

    def _fold_offset_map(self) -> None:
        """Fold the offset map's settled segments into chains (:meth:`OffsetMapStore.fold`). A failure
        loses nothing (segments stay until their chain is durable): said, and tried at the next turn."""
        try:
            self.store.fold()
        except Exception as exc:  # noqa: BLE001 - an optimisation of the map's storage; the next turn retries
            log.warning(
                "flow=%s folding the offset map into chains failed (tried again later): %s", self.flow.name, exc
            )

    def finish(self) -> None:
        """After a ``--once`` run: leave checkpoints (and synced groups) as of its end, the offset map
        folded into chains."""
        self.finished = True
        self._fold_offset_map()
        if self.flow.emit_checkpoints_enabled:
            self.emit_checkpoints()
        if self.flow.sync_group_offsets_enabled:
            self._sync_groups()

    def close(self) -> None:
        """Stop the copy and let go of every Kafka client of the flow.

        Spark may keep this flow's parts referenced until the session ends (the copy's closures);
        clients let go of here are destroyed now, not when the process exits (their threads
        would log refused connections once the clusters are gone).
        """
        self.stop_requested.set()
        self.stop_copy()
        if self.lease is not None:
            self.lease.release()
            self.lease = None
        if self.status.state != "failed":
            self.report("stopped")
        self.status.close()
        self.control.close()
        self.throttle.close()
        self.store.close()
        self.syncs.close()
        self.checkpoints.close()
        self.clients.close()

    def report_line(self) -> str:
        return self.progress.report_line()
