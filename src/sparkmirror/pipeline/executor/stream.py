"""The streaming engine's task: one long-running Spark task copying its source partitions as records arrive.

A task owns a set of source partitions for the life of the job (the driver's assignment), reads
them with one consumer (``read_committed``) and hands every record to the sink (:mod:`.sink`) as
soon as the consumer has it, so a record waits for no batch. Delivery reports are served between
reads. Every ``sparkmirror.commit.interval.ms`` the task's commit makes what it wrote final (at
least once: every record acknowledged, then the offset-map segments, then the progress; exactly
once: one transaction per transaction group), then reports the interval to the driver
(:mod:`sparkmirror.pipeline.reports`), which answers whether to stop.

Where a task starts: each partition's start from the driver, raised to the progress committed on
the target (the commit's floors), so a task that Spark retries resumes where its failed attempt's
last commit left off: at least once, a failure copies at most one commit interval again.

Flow control (:mod:`sparkmirror.core.control`): the driver's answers say which source topics are
paused (their partitions are paused on the consumer, and resumed at the next offset to copy) and
how many bytes per second the task may copy (a :class:`~sparkmirror.core.control.TokenBucket`: the
task waits before a read while its budget is spent, serving delivery reports and committing as
usual meanwhile, and takes no more records at once than the budget has room for).

What it must never do: report progress past a record the target has not acknowledged, or jump over
offsets the source no longer holds (the consumer's ``auto.offset.reset = error`` fails the task, and
the driver's restart reports the loss before anything past it is copied).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from typing import TYPE_CHECKING

from sparkmirror.core.control import TokenBucket
from sparkmirror.core.ranges import OPEN_END, SourceRange
from sparkmirror.kafka.factory import close_within
from sparkmirror.logs import worker_logging
from sparkmirror.pipeline.exceptions import WriteError
from sparkmirror.pipeline.executor import clients
from sparkmirror.pipeline.executor.commit import commit_for, finish_threads
from sparkmirror.pipeline.executor.plan import PartitionKey, WritePlan
from sparkmirror.pipeline.executor.results import PartitionResult
from sparkmirror.pipeline.executor.sink import Sink
from sparkmirror.pipeline.executor.tasks import collector_paused, keep_zip_directories
from sparkmirror.pipeline.reports import Answer, Position, Report, ReportClient

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError

log = logging.getLogger(__name__)

#: Most messages taken from the consumer's queue at once (after the first, without waiting).
_DRAIN = 10_000
#: Longest wait for the first record of a read: how often an idle task looks at its clock.
_IDLE_WAIT_S = 0.5
#: Longest wait for a record while the interval is due but the one before it is still finishing.
_BUSY_WAIT_S = 0.05
#: Longest wait for a record while a record written is not yet reported delivered: its report is
#: served between reads, and the metrics take a record's latency when it is.
_SERVE_WAIT_S = 0.02
#: Longest wait, exactly once, of a failed task for its other groups' finishes before it aborts what is open.
_ABANDON_WAIT_S = 30.0
#: Seconds between two reports of an idle task: how soon it learns of a stop, and the driver of its lag.
_HEARTBEAT_S = 1.0
#: Seconds between two looks at every partition's positions (between them, a report looks at those the
#: consumer touched or whose end rose); either way only those that changed since last sent are sent.
_ALL_POSITIONS_S = 10.0
#: Seconds between two collections of what the task made since the last one while the collector is
#: paused, and how many of those between two collections of the worker's whole heap (25 ms each in an
#: idle worker: docs/performance.md, an idle flow).
_COLLECT_EVERY_S = 60.0
_FULL_COLLECT_EVERY = 10


def stream_partitions(
    assignments: Iterable[tuple[int, list[SourceRange]]], plan: WritePlan
) -> Iterator[PartitionResult]:
    """``mapPartitions`` body: run the task's assignment until the driver stops it (or ``--once`` ends)."""
    keep_zip_directories()
    worker_logging()
    for task, ranges in assignments:
        yield from StreamTask(plan, task, ranges).run()


class StreamTask:
    """One task's partitions, from their start until the driver says stop."""

    def __init__(self, plan: WritePlan, task: int, ranges: list[SourceRange]) -> None:
        self.plan = plan
        self.task = task
        self.ranges = {(r.topic, r.partition): r for r in ranges}
        #: Next source offset to copy, per partition.
        self.next: dict[PartitionKey, int] = {}
        #: Partitions copied to their range's end (``--once``).
        self.done: set[PartitionKey] = set()
        #: Partitions paused on the consumer (flow control), and the byte budget.
        self.paused: set[PartitionKey] = set()
        self.budget = TokenBucket()
        #: Key and value bytes read since the last report, and the budget's held seconds then.
        self._copied = 0
        self._held_reported = 0.0
        self._answers_applied = 0
        #: The version of the flow control followed (reported back to the driver).
        self._control_version = 0
        #: The source's end of each partition as last seen by the consumer: kept, because the consumer
        #: forgets it once the topic is deleted, and that end is what proves a deleted topic was mirrored.
        self._ends: dict[PartitionKey, int] = {}
        #: Partitions whose positions may have changed since they were last reported: every one at the
        #: start, then those the consumer handed a record or an event of (an error; an end reached only
        #: with ``--once``: :attr:`has_ends`), whose end rose, or that flow control paused or resumed.
        self._touched: set[PartitionKey] = set(self.ranges)
        #: What the driver was last told of each partition (next offset, end, read up to): a position
        #: looked at again and found the same is not sent again.
        self._reported: dict[PartitionKey, tuple[int, int, int]] = {}
        #: The intervals finishing beside the reads, by group (:meth:`_copy`).
        self._finishing: dict[str | None, Future[list[PartitionResult]]] = {}

    def run(self) -> list[PartitionResult]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        attempt = ctx.attemptNumber() if ctx is not None else 0
        plan = self.plan
        sink = Sink(plan, commit_for(plan, len(self.ranges)))
        consumer: Consumer | None = None
        channel = ReportClient(plan.report_address, plan.report_token)
        # Intervals are finished beside the reads: at least once in one thread (one at a time), exactly
        # once each transaction group's on its own.
        finisher = ThreadPoolExecutor(
            max_workers=finish_threads(plan, self.ranges), thread_name_prefix=f"sparkmirror-commit-{self.task}"
        )
        try:
            # Exactly-once: fences earlier writers; both modes: every partition's progress in one request.
            floors = sink.open(list(self.ranges))
            for key, r in self.ranges.items():
                self.next[key] = max(r.start, floors[key])
                if self.next[key] >= r.until:
                    self.done.add(key)
            # Before any read, also of a retried attempt: a topic re-created since the job began is not read.
            self._check_topic_ids()
            consumer = clients.source_consumer(plan, partition_eof=self.has_ends)
            self._assign(consumer)
            # The flow control of the job's start, then the driver's as of now before the first read: a
            # pause or a limit set since the job started (a retried task) holds from the first record.
            self._follow(consumer, plan.start_control)
            channel.send(Report(self.task, attempt, control_version=self._control_version))
            self._answers_applied = channel.answers
            self._follow(consumer, channel.answer)
            with collector_paused():
                results = self._copy(sink, consumer, channel, attempt, finisher)
            finisher.shutdown()
            return results
        except BaseException:
            # An interval still finishing makes only what it acknowledged durable. At least once it is not
            # waited for. Exactly once the other groups' finishes are, for a while: each holds its group's
            # producer, which the abort below must not use at the same time (a finish that ends commits its
            # own transaction whole; one that does not is fenced by the next attempt's init_transactions).
            finisher.shutdown(wait=False, cancel_futures=True)
            if plan.exactly_once and self._finishing:
                futures_wait(list(self._finishing.values()), timeout=_ABANDON_WAIT_S)
            sink.abandon()
            if consumer is not None:
                clients.discard_consumer(consumer)
            raise
        finally:
            channel.close()

    def _copy(
        self, sink: Sink, consumer: Consumer, channel: ReportClient, attempt: int, finisher: ThreadPoolExecutor
    ) -> list[PartitionResult]:
        """Read, write, and every interval seal what was written and finish it beside the reads,
        reporting each finished interval, until told to stop.

        At least once an interval is finished whole, one at a time, while its producers take the next
        interval's records. Exactly once each transaction group is finished on its own
        (:meth:`Sink.seal_groups`): a group's transaction must end before its next begins, so the records
        read for its partitions meanwhile are held until it has, while every other group's go on."""
        plan = self.plan
        exactly_once = plan.exactly_once
        interval_s = plan.commit_interval_ms / 1000
        # Records a crash may leave written but not durable, at least once: the interval finishing and the
        # one being written, so each takes at most half of ``sparkmirror.batch.max.records``. Exactly once
        # nothing unfinished is ever durable; what a finishing group holds is bounded by the same number.
        most = max(1, plan.interval_max_records if exactly_once else plan.interval_max_records // 2)
        next_commit = time.monotonic() + interval_s
        next_collect = time.monotonic() + _COLLECT_EVERY_S
        collections = 0
        next_report = 0.0  # a task reports (and learns of a stop) at least this often
        next_all = 0.0  # every partition's positions at least this often
        handed = 0  # records handed to the sink since the last seal (and written: not held)
        unread = False  # a read was left out since the last report (the last interval still finishing)
        stopping = False
        refused = False
        #: Each finishing group's finish (at least once the one group ``None``); :meth:`run` waits for
        #: them before it aborts.
        finishing = self._finishing
        last_report = time.monotonic()
        while True:
            if channel.answers != self._answers_applied:
                self._answers_applied = channel.answers
                self._follow(consumer, channel.answer)
            now = time.monotonic()
            due = now >= next_commit or handed >= most
            # Exactly once, a finishing group's records are held: with those written since the last seal,
            # at most ``most`` of them (an interval's limit, whenever they are written).
            pending = handed + sink.held
            if len(self.done) < len(self.ranges) and not stopping and not refused and pending < most:
                if not sink.written and not finishing:
                    wait = _IDLE_WAIT_S  # nothing written: nothing to commit until a record comes
                elif not due:
                    wait = min(_IDLE_WAIT_S, next_commit - now)
                    if wait > _SERVE_WAIT_S and (sink.unserved() or (exactly_once and finishing)):
                        # A delivery report is served (its latency taken) as it comes; exactly once, a
                        # group's held records are written as soon as its finish ends.
                        wait = _SERVE_WAIT_S
                elif finishing and not exactly_once:
                    wait = _BUSY_WAIT_S  # due, the last interval still finishing: look again soon
                else:
                    wait = 0.0  # due: take what is there, then seal
                hold = self.budget.wait_s(now)
                if hold > 0:  # throttled: no read until the budget allows one (commits and reports go on)
                    hold = min(hold, max(wait, 0.001))
                    time.sleep(hold)
                    self.budget.held(hold)
                else:
                    room = self.budget.room(now, most - pending)
                    held_before = sink.held
                    taken, records, nbytes = self._read(consumer, sink, wait, room)
                    handed += taken - (sink.held - held_before)  # the held ones count once written
                    self._copied += nbytes
                    self.budget.take(nbytes, records, time.monotonic())
            elif finishing:
                unread = True  # the consumer fetches ahead meanwhile: ends it hands no record of
                futures_wait(list(finishing.values()), timeout=_IDLE_WAIT_S, return_when=FIRST_COMPLETED)
            sink.serve()
            stopping = stopping or channel.stop_requested  # told to stop: finish what was written, then end
            results: list[PartitionResult] = []
            for group, future in list(finishing.items()):
                if future.done():
                    del finishing[group]
                    done = future.result()  # the interval's failure fails the task
                    results += done
                    if any(r.error for r in done):
                        refused = True  # nothing more commits: the flow stops
                    elif exactly_once and not refused:
                        handed += sink.release_group(group)  # what was held for it, in its next transaction
            now = time.monotonic()
            ended = len(self.done) == len(self.ranges)
            seal = not refused and (now >= next_commit or handed >= most or stopping or ended)
            if seal and (exactly_once or not finishing):
                handed = 0
                next_commit = now + interval_s
                if exactly_once:
                    for group, parts in sink.seal_groups().items():
                        finishing[group] = finisher.submit(sink.finish, parts)
                else:
                    sealed = sink.seal()
                    if sealed:
                        finishing[None] = finisher.submit(sink.finish, sealed)
            settled = not finishing and not sink.written and not sink.held
            # Told to stop: all finished. Refused: the other groups' finishes end first, nothing more sealed.
            final = (refused and not finishing) or (ended and settled) or (stopping and settled)
            beat = now >= next_report  # positions and a sign of life at least this often, the driver's answer too
            if not results and not final and not beat:
                continue
            if beat:
                next_report = now + _HEARTBEAT_S
            rows = [r.as_row() for r in results]
            every = final or (beat and now >= next_all)
            if every:
                next_all = now + _ALL_POSITIONS_S
            copied, held = self._window()
            positions: list[Position] = []
            if beat or final:
                # Every end while the budget or a finishing interval holds the reads back: the consumer
                # learns ends it hands no record of.
                ends = every or held > 0 or unread or self.budget.rate is not None
                positions = self._positions(consumer, every=every, ends=ends)
                unread = False
            report = Report(
                self.task, attempt, rows, positions, final=final,
                copied_bytes=copied, window_s=now - last_report, held_s=held,
                control_version=self._control_version,
            )  # fmt: skip
            last_report = now
            if final:
                channel.send(report)  # the last one: waits for the driver to have it
                if refused and exactly_once:
                    sink.abandon()  # groups written since the refusal abort: nothing past it commits
                else:
                    sink.release()
                return results
            channel.post(report)
            if plan.producer_idle_close_ms:
                rested = sink.rest_idle(plan.producer_idle_close_ms / 1000)
                if rested:
                    log.debug("flow=%s task %d: %d idle producers closed", plan.flow, self.task, rested)
            if now >= next_collect:
                next_collect = now + _COLLECT_EVERY_S
                collections += 1
                # The young generations: a cycle that outlived one collection waits for the whole heap's.
                gc.collect(2 if collections % _FULL_COLLECT_EVERY == 0 else 1)

    @property
    def has_ends(self) -> bool:
        """Whether a partition's range ends (``--once``): only then is a partition's end reached news."""
        return any(r.until != OPEN_END for r in self.ranges.values())

    def _check_topic_ids(self) -> None:
        """Before the first read: fail the task when a source topic now has another id than the job began
        with (deleted and re-created): its records are not the old topic's continuation. Every retry fails
        here before it reads, so the job fails and the flow's restart stops it (exit 7, ``run
        --reset-topic``). A topic that is gone (not re-created) is the driver's to find, and so is a topic
        re-created while the task runs (its answers say so: :meth:`_follow`). If the source does not
        answer, the reads say so."""
        from sparkmirror.kafka.topicids import recreated_topics, source_topic_ids

        expected = {t: self.plan.topic_ids[t] for t, _p in self.ranges if t in self.plan.topic_ids}
        if not expected:
            return
        # An admin client for this look only (an idle one wakes every second for the task's life), dropped
        # in a thread of its own: librdkafka's destroy can wait on a lost broker.
        admin = []
        try:
            admin.append(clients.source_admin(self.plan))
            current = source_topic_ids(admin[0], expected)
        except Exception as exc:  # noqa: BLE001 - the source is unreachable: the reads say so
            log.info("flow=%s task %d: source topic ids not checked: %s", self.plan.flow, self.task, exc)
            return
        finally:
            close_within(admin.clear, 5.0, f"source admin client of flow {self.plan.flow}")
        self._fail_if_recreated(recreated_topics(expected, current))

    def _fail_if_recreated(self, recreated: Iterable[tuple[str, str, str]]) -> None:
        """Fail the task if one of its source topics is among ``recreated`` ((topic, id then, id now))."""
        mine = {t for t, _p in self.ranges}
        changed = sorted(r for r in recreated if r[0] in mine)
        if changed:
            raise WriteError(
                f"flow={self.plan.flow} source topic {', '.join(t for t, _w, _n in changed)} was deleted and "
                f"re-created while the copy ran (topic id was {', '.join(w for _t, w, _n in changed)}, is now "
                f"{', '.join(n for _t, _w, n in changed)}): nothing more of it is copied; the flow stops at "
                "its restart",
                terminal=False,
            )

    def _window(self) -> tuple[int, float]:
        """Key and value bytes read and seconds held back by the budget since the last report (then reset)."""
        held = self.budget.held_s - self._held_reported
        self._held_reported = self.budget.held_s
        copied, self._copied = self._copied, 0
        return copied, held

    def _follow(self, consumer: Consumer, answer: Answer) -> None:
        """The driver's flow control: the byte rate from now on, and which partitions not to read; and
        whether one of the task's topics was deleted and re-created (the task fails)."""
        from confluent_kafka import TopicPartition

        self._fail_if_recreated(answer.recreated)
        self._control_version = answer.version
        self.budget.set_rate(answer.rate, time.monotonic())
        topics = set(answer.paused)
        paused = {k for k in self.ranges if k[0] in topics and k not in self.done} if topics else set()
        stop, go = sorted(paused - self.paused), sorted((self.paused - paused) - self.done)
        if stop:
            consumer.pause([TopicPartition(t, p) for t, p in stop])
            log.info("flow=%s task %d paused %d partitions", self.plan.flow, self.task, len(stop))
        if go:
            # Resumed where the task stands: records the consumer fetched before the pause may be gone.
            consumer.resume([TopicPartition(t, p) for t, p in go])
            for t, p in go:
                consumer.seek(TopicPartition(t, p, self.next[(t, p)]))
            log.info("flow=%s task %d resumed %d partitions", self.plan.flow, self.task, len(go))
        self._touched.update(stop)
        self._touched.update(go)
        self.paused = paused

    def _assign(self, consumer: Consumer) -> None:
        from confluent_kafka import TopicPartition

        todo = [TopicPartition(t, p, self.next[(t, p)]) for (t, p) in self.ranges if (t, p) not in self.done]
        if todo:
            consumer.assign(todo)

    def _read(self, consumer: Consumer, sink: Sink, wait_s: float, room: int) -> tuple[int, int, int]:
        """Hand what the consumer holds to the sink: wait up to ``wait_s`` for the first record or event,
        then take what is already there (at most ``room`` of them) without waiting: a record never waits
        for a batch to fill. Returns how many records and events were taken, how many records of them
        were handed to the sink, and their key and value bytes.

        A read comes grouped by partition, each partition's records in offset order (:func:`.clients.take`),
        and each partition's run is checked as a whole: what it skips at its start (records before the
        next offset to copy, fetched before a seek) and at its end (past the range's end)."""
        runs, events, taken = clients.take(consumer, wait_s, min(_DRAIN, max(1, room)))
        ended: list[PartitionKey] = []
        for m in events:
            key: PartitionKey = (m.topic(), m.partition())  # type: ignore[assignment]
            self._touched.add(key)  # an end reached (--once: its position past markers too), an error
            r = self.ranges.get(key)
            self._error(m.error(), key, r)  # type: ignore[arg-type]
            # The partition's end, at or past the range's (a paused partition's skipped records may
            # have moved its fetch there: its end is taken once it is read again).
            if r is not None and key not in self.paused and (m.offset() or 0) >= r.until:
                ended.append(key)
        self._touched.update(runs)
        nbytes = records = 0
        stale: list[PartitionKey] = []  # partitions read past the end last noted
        for key, run in runs.items():
            r = self.ranges.get(key)
            if r is None or key in self.done or key in self.paused:
                continue  # a paused partition's records fetched before the pause: read again on resume
            nxt = self.next[key]
            if run[0][0] < nxt:
                run = [rec for rec in run if rec[0] >= nxt]
            if run and run[-1][0] >= r.until - 1:
                ended.append(key)
                run = [rec for rec in run if rec[0] < r.until]
            if not run:
                continue
            nxt = self.next[key] = max(nxt, run[-1][0] + 1)
            if nxt > self._ends.get(key, -1):
                stale.append(key)
            records += len(run)
            nbytes += sink.write(key, run)
        if stale:
            # The end as the fetch that brought these records left it, noted now: a topic deleted right after
            # its last record is proven mirrored only by an end noted before the consumer forgets the topic
            # (within a fetch of the deletion), whatever the commit interval (docs/decisions.md).
            self._note_ends(consumer, stale)
        if ended:
            from confluent_kafka import TopicPartition

            # Once each: a partition's last record and its end can come in the same read, and librdkafka
            # aborts the process on a partition unassigned twice (rd_kafka_assignment_subtract).
            fresh = sorted({k for k in ended if k not in self.done})
            self.done.update(fresh)
            if fresh:
                consumer.incremental_unassign([TopicPartition(t, p) for t, p in fresh])
        return taken, records, nbytes

    def _error(self, err: KafkaError, key: PartitionKey, r: SourceRange | None) -> None:
        """A consumer error: a partition's end is news (``--once``); a position the source no longer has,
        or a fatal error, fails the task; others are said and waited out."""
        from confluent_kafka import KafkaError

        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            return
        where = f"{key[0]}[{key[1]}] offset={self.next.get(key, -1)}" if r is not None else "the source consumer"
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE) or r is not None:
            raise WriteError(
                f"flow={self.plan.flow} {where}: reading the source failed ({err.name()}: {err.str()}); "
                "the task is restarted from the progress on the target",
                terminal=False,
            )
        check_client_error(self.plan.flow, err, "the task is restarted")

    def _positions(self, consumer: Consumer | None, *, every: bool = False, ends: bool = True) -> list[Position]:
        """The next offset to copy, the source's end as the consumer last saw it (-1: not seen yet), and
        how far the task has read it: the consumer's position, which passes transaction markers and
        aborted records the task never sees (the next offset for a paused partition, whose position may
        be past records it skipped); of ``every`` partition, else of those touched since the last report
        and those whose end rose; of these, those that changed since the task last reported them. The
        driver keeps the others': their positions have not changed (reports are never lost: a failed
        channel fails the task, and a new attempt reports every partition's first). The first report
        has every partition's (none was reported).

        The ends are looked at in the consumer's cache (no request): of every partition if ``ends`` (a
        task whose reads were held back, by the byte budget or by a full interval still finishing, has
        a consumer that learns ends it hands no record of), else of the touched ones. A task that read
        all along hands a committed record as soon as the consumer has it, so an end seen without one
        is of records it is not to copy (an open or aborted source transaction's, or a paused
        partition's, which the consumer does not fetch): reported with the next ``every``.
        Looking at 500 ends each second was half an idle task's CPU (docs/performance.md)."""
        from confluent_kafka import TopicPartition

        if consumer is not None:
            self._touched.update(self._note_ends(consumer, list(self.next) if ends else list(self._touched)))
        keys = list(self.next) if every else [k for k in self.next if k in self._touched]
        self._touched.clear()
        read: dict[PartitionKey, int] = {}
        if consumer is not None and keys:
            skip = self.paused | self.done
            live = [TopicPartition(t, p) for (t, p) in keys if (t, p) not in skip]
            try:
                for tp in consumer.position(live) if live else []:
                    if tp.error is None and tp.offset is not None and tp.offset >= 0:
                        read[(tp.topic, tp.partition)] = int(tp.offset)
            except Exception:  # noqa: BLE001 - positions without how far they were read are still worth reporting
                read = {}
        out = []
        for t, p in keys:
            nxt = self.next[(t, p)]
            now = (nxt, self._ends.get((t, p), -1), max(nxt, read.get((t, p), nxt)))
            if self._reported.get((t, p)) != now:
                self._reported[(t, p)] = now
                out.append((t, p, *now))
        return out

    def _note_ends(self, consumer: Consumer, keys: list[PartitionKey]) -> list[PartitionKey]:
        """Keep the source's end of ``keys`` as the consumer saw it last (its cached high watermark: no
        request); a partition whose end it no longer knows keeps the one seen before. Returns the keys
        whose kept end rose."""
        ends = self._ends
        risen = []
        for key, high in clients.cached_ends(consumer, keys):
            if high > ends.get(key, -1):
                ends[key] = high
                risen.append(key)
        return risen


def check_client_error(flow: str, err: KafkaError, then: str) -> None:
    """An error of a source consumer as a whole (connection, authentication), not of one partition:
    a fatal one fails the task (a retriable :class:`WriteError` ending in ``then``), any other is
    logged and waited out."""
    from confluent_kafka import KafkaError

    fatal = {
        KafkaError._AUTHENTICATION,
        KafkaError._SSL,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
    if err.fatal() or err.code() in fatal:
        raise WriteError(f"flow={flow}: the source consumer failed ({err.name()}: {err.str()}); {then}", terminal=False)
    log.warning("flow=%s source consumer: %s: %s", flow, err.name(), err.str())
