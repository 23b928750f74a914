"""How a sink's writes become final: at least once, or exactly once in transactions.

:class:`AtLeastOnce` writes each partition through one of the task's producers (one per
``sparkmirror.partitions.per.producer`` partitions); an interval is
done when the target acknowledged every record (or it was dead-lettered, or refused), then its
offset-map segments, then its progress. A failure fails the task and Spark retries it from the
progress on the target: duplicates at most, of the intervals not yet durable.

:class:`Transactional` is exactly-once (KIP-656's idea, on Spark). Source partitions fall into
transaction groups for good (:mod:`sparkmirror.core.transactions`, ``sparkmirror.exactly.once.
transactions``; or one per partition), and each group is written by a producer whose
``transactional.id`` is stable per (flow, group), so a retried, speculative or zombie attempt writing
the same partitions is fenced by ``init_transactions`` (the driver's assignment keeps a group in one
task, and the driver's start fenced every id an earlier layout wrote with). After that call the
progress committed on the target for each partition (the progress group's offset on the remote topic:
the next upstream offset still to mirror) becomes the partition's floor, and the sink skips what lies
below it, so a record a retried attempt reads again is written once. A group's records,
dead-lettered records, offset-map segments and the new progress of each of its partitions
(``send_offsets_to_transaction``) commit together, one transaction per group per interval. The
target cluster is the only record of progress. An idle group's producer rests (is closed); made again,
its ``init_transactions`` fences anew, so the task then checks on the target that its layout is still
the flow's and its partitions' progress still its own (:meth:`Transactional._still_ours`).

What it must never do: commit while a record of the group is neither acknowledged nor
dead-lettered, or commit progress past a record it did not write. Any doubt aborts and fails.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from sparkmirror.kafka.factory import close_within
from sparkmirror.pipeline.exceptions import WriteError
from sparkmirror.pipeline.executor import clients
from sparkmirror.pipeline.executor.plan import PartitionKey, WritePlan
from sparkmirror.pipeline.executor.sink import (
    Commit,
    PartitionWrite,
    await_acks,
    finish_segments,
    flush_within,
    produce_when_room,
    refused_in_transaction,
    settle_record_failures,
)
from sparkmirror.pipeline.executor.waits import call_within, retry_within, target_text

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer

log = logging.getLogger(__name__)

#: Transaction groups whose transactions one task finishes at the same time.
_MAX_COMMIT_THREADS = 8
#: All aborts of a failed task together wait at most this long (the next attempt fences anyway).
_ABORT_S = 30.0
#: librdkafka's own timeout for one ``send_offsets_to_transaction``. Unlike ``commit_transaction``,
#: the call does not resume after a timeout: one that runs out while the group's coordinator is
#: still being looked for makes the transaction abortable, so it gets more than the other steps'
#: attempts (:data:`~.waits.ATTEMPT_S`); :func:`~.waits.call_within` says every 15 s what it waits for.
_SEND_OFFSETS_ATTEMPT_S = 60.0


def commit_for(plan: WritePlan, partitions: int = 1) -> Commit:
    """The plan's commit for a task of ``partitions`` source partitions: :class:`Transactional`
    exactly-once, else :class:`AtLeastOnce`."""
    return Transactional(plan) if plan.exactly_once else AtLeastOnce(plan, plan.producers_for(partitions))


def finish_threads(plan: WritePlan, partitions: Iterable[PartitionKey]) -> int:
    """Threads a streaming task finishes its intervals in, beside its reads: at least once one (an
    interval at a time, in order); exactly once one a transaction group, at most
    :data:`_MAX_COMMIT_THREADS` (each group's intervals still one at a time: :meth:`Sink.seal_groups`)."""
    if not plan.exactly_once:
        return 1
    return max(1, min(_MAX_COMMIT_THREADS, len({plan.transactional_id(t, p) for t, p in partitions})))


class AtLeastOnce:
    """At least once, progress kept by the task: after every record of the
    partitions is acknowledged, their offset-map segments are written and acknowledged, and only then
    is each partition's next source offset committed to the progress group on the target.

    The order is the guarantee: progress never passes a record the target has not acknowledged, and
    the offset map is never behind the progress (a restart starts from either and copies no record it
    does not have to). Its floors, like exactly-once's, are the progress read when a task starts: a
    retried task starts where the last attempt's progress stands, not where the job began.

    :meth:`finish` runs beside the task's reads (:mod:`.stream`): the producers keep taking the next
    interval's records while it waits, so it waits for the sealed records' own delivery reports
    (served holding :attr:`serving`), never for a producer to be empty.

    A task of many partitions writes with ``producers`` producers, its partitions dealt out among them
    in turn, each partition to one slot for good (its records stay in order): librdkafka sends one
    partition per produce request, so one producer's partitions queue behind each other. A slot whose
    partitions went quiet rests (:meth:`rest`): its producer is closed, and the slot's next record
    makes a new one (an idle librdkafka producer wakes its threads every second: 32 of them cost an idle
    task about half a percent of a core, docs/performance.md).
    """

    def __init__(self, plan: WritePlan, producers: int = 1) -> None:
        self.plan = plan
        #: Offset-map segments and dead-lettered records go through the first, which never rests.
        self.producer = clients.producer(plan, 0)
        #: Each slot's producer; ``None`` while the slot rests.
        self.producers: list[Producer | None] = [self.producer]
        self.producers += [clients.producer(plan, slot) for slot in range(1, producers)]
        self._slots: dict[PartitionKey, int] = {}
        self.serving = threading.Lock()

    def producer_for(self, partition: PartitionKey) -> Producer:
        slot = self._slots.get(partition)
        if slot is None:
            slot = self._slots[partition] = len(self._slots) % len(self.producers)
        producer = self.producers[slot]
        if producer is None:  # the slot rested: its partition's next record makes it again
            producer = self.producers[slot] = clients.producer(self.plan, slot)
        return producer

    def group_of(self, partition: PartitionKey) -> str | None:
        """An interval is finished whole, one at a time, on producers that keep taking records."""
        return None

    def rest(self, producer: Producer) -> bool:
        """Close an idle producer, if it holds nothing (no record queued, in flight or unreported) and is
        not the first (which writes the segments). The sink calls it only between intervals, with nothing
        finishing. True if it was closed."""
        if producer is self.producer or len(producer):
            return False
        slot = next((i for i, p in enumerate(self.producers) if p is producer), None)
        if slot is None:
            return False
        self.producers[slot] = None
        _close_idle(self.plan, producer)
        return True

    def begin(self, w: PartitionWrite) -> None:
        w.begun = True

    def abandon(self, parts: Sequence[PartitionWrite]) -> None:
        # A producer that failed mid-way may hold undelivered records for the retried task to
        # duplicate needlessly; the retry starts afresh.
        for producer in self.producers:
            if producer is not None:
                clients.discard_producer(producer)

    def open(self, parts: Sequence[PartitionWrite]) -> None:
        progress = committed_progress(self.plan, [(w.remote, w.partition) for w in parts])
        for w in parts:
            w.floor = progress[(w.remote, w.partition)]

    def finish(self, parts: Sequence[PartitionWrite]) -> None:
        from confluent_kafka import TopicPartition

        plan = self.plan
        by_producer: dict[int, list[PartitionWrite]] = {}
        for w in parts:  # every sealed partition, whichever producer wrote it
            by_producer.setdefault(id(w.producer), []).append(w)
        for written in by_producer.values():
            await_acks(written[0].writer, plan, written, self.serving)
        if settle_record_failures(self.producer, plan, parts, self.serving):
            return  # a refusal: the driver stops the flow; no progress past it
        finish_segments(plan, parts)
        errors: list[str] = []
        answered: list[bool] = []

        def on_segment(err: KafkaError | None, _msg: Message) -> None:
            answered.append(True)
            if err is not None:
                errors.append(str(err))

        produced = sum(produce_segments(self.producer, plan, w, on_segment, self.serving) for w in parts)

        def segments_waiting(_held: int, waited: float) -> str:
            return (
                f"flow={plan.flow} {_ranges(parts)}: {produced - len(answered)} offset-map segments not yet "
                f"acknowledged by the target after {waited:.0f}s (giving up at {plan.flush_timeout_s:.0f}s)"
            )

        remaining = flush_within(
            self.producer, plan.flush_timeout_s, lambda: len(answered) >= produced, segments_waiting, self.serving
        )
        if remaining is not None or errors:
            raise WriteError(
                f"flow={plan.flow} {_ranges(parts)}: offset-map segments not acknowledged by the target "
                f"({'; '.join(errors[:3]) or f'{produced - len(answered)} unacknowledged'}); "
                "the records will be copied again",
                terminal=False,
            )
        positions = [TopicPartition(w.remote, w.partition, w.last_offset + 1) for w in parts]
        consumer = clients.progress_consumer(plan)
        what = f"flow={plan.flow} {_ranges(parts)}: committing the progress (group {plan.progress_group})"

        def waiting() -> str:
            return f"waiting for the coordinator of group {plan.progress_group} on the target"

        # librdkafka's synchronous commit takes no timeout: bounded by a thread of its own (:mod:`.waits`).
        deadline = time.monotonic() + plan.target_wait_s
        try:
            retry_within(
                lambda left: call_within(
                    lambda: consumer.commit(offsets=positions, asynchronous=False),
                    what=what,
                    limit_s=max(1.0, deadline - time.monotonic()),
                    detail=waiting,
                ),
                what=what,
                limit_s=plan.target_wait_s,
                detail=waiting,
            )
        except WriteError:
            clients.forget(consumer)  # its call may still be running: the next task makes a new one
            raise


def produce_segments(
    producer: Producer,
    plan: WritePlan,
    w: PartitionWrite,
    on_delivery: Callable[[KafkaError | None, Message], None] | None = None,
    serving: threading.Lock | None = None,
) -> int:
    """The offset map's segments of ``w`` to the offset-map topic (exactly-once: inside the data's
    transaction); how many. A full local queue is waited out as a record's is (:func:`produce_when_room`)."""
    if not plan.offset_map_topic:
        return 0
    topic = plan.offset_map_topic
    now = int(time.time() * 1000)
    for seg in w.segments:
        rec = seg.to_record(now)
        send = functools.partial(producer.produce, topic, key=rec.key_bytes(), value=rec.value_bytes())
        if on_delivery is not None:
            send = functools.partial(send, on_delivery=on_delivery)
        try:
            send()
        except BufferError:

            def queue_full(waited: float) -> str:
                return (
                    f"flow={plan.flow} {w.topic}[{w.partition}]: the producer's queue is full; an offset-map "
                    f"segment has waited {waited:.0f}s for {topic} ({len(producer)} in the producer)"
                )

            produce_when_room(producer, send, queue_full, plan.flush_timeout_s, serving)
    return len(w.segments)


class Transactional:
    """One transaction per transaction group per interval; records, segments and progress commit together."""

    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan
        self.serving = threading.Lock()
        #: This task's producer of each transactional id it writes with (one per group).
        self.producers: dict[str, Producer] = {}
        #: Transactional id -> its producer, while the id's transaction is open.
        self.open_tx: dict[str, Producer] = {}
        #: Each transactional id's partitions in this task, as (remote topic, partition).
        self._members: dict[str, list[tuple[str, int]]] = {}
        #: The progress this task knows on the target of each (remote topic, partition): read when it
        #: opened the partition, then each of its commits'. A producer made again after it rested finds
        #: the target's the same, or another attempt wrote the group meanwhile (:meth:`_still_ours`).
        self._progress: dict[tuple[str, int], int] = {}
        #: Ids whose producer rested (:meth:`rest`): the next record of their partitions makes it again.
        self._rested: set[str] = set()

    def producer_for(self, partition: PartitionKey) -> Producer:
        tid = self.plan.transactional_id(*partition)
        producer = self.producers.get(tid)
        if producer is None:
            # Once per task and id: the group's other partitions share it (asking the cache again
            # would replace a producer another worker fenced a second time, fencing this one).
            producer = self.producers[tid] = clients.transactional_producer(self.plan, partition)
            if tid in self._rested:
                self._rested.discard(tid)
                self._still_ours(tid)
        return producer

    def group_of(self, partition: PartitionKey) -> str | None:
        """The partition's transactional id: its group's transaction commits on its own."""
        return self.plan.transactional_id(*partition)

    def open(self, parts: Sequence[PartitionWrite]) -> None:
        """After ``init_transactions`` (fencing earlier writers): every partition's progress in one request."""
        progress = committed_progress(self.plan, [(w.remote, w.partition) for w in parts])
        for w in parts:
            where = (w.remote, w.partition)
            w.floor = self._progress[where] = progress[where]
            self._members.setdefault(self.plan.transactional_id(w.topic, w.partition), []).append(where)

    def _still_ours(self, tid: str) -> None:
        """Right after a rested id's producer was made again (its ``init_transactions`` fenced whoever
        held the id since), two looks at the target, either of which fails the task before it writes
        (its retry starts from the target):

        - The flow's exactly-once layout on record must still be this task's alone. A later start of
          the flow records its own layout, then fences every earlier layout's ids, this one's too: a
          different record means this task belongs to an earlier start, whose fence this producer has
          just undone, while the partitions are written under other ids.
        - The progress of the id's partitions must be what this task last committed or read. Anything
          else is another attempt's commit while this producer rested: this task's floors are stale.
          None at all is an idle partition's progress expired (``offsets.retention.minutes``), not a
          commit: nobody commits "none".
        """
        plan = self.plan
        layouts = _layouts_on_record(plan)
        if layouts != {plan.transaction_groups}:
            from sparkmirror.core.transactions import layout_names

            raise WriteError(
                f"flow={plan.flow} {tid}: the flow's exactly-once layout on the target is "
                f"{layout_names(layouts)}, this task writes with {layout_names({plan.transaction_groups})}: "
                "a later start of the flow took its partitions over; this task stops before it writes",
                terminal=False,
            )
        members = self._members.get(tid, [])
        now = committed_progress(plan, members)
        moved = [(t, p) for t, p in members if now[(t, p)] not in (self._progress[(t, p)], -1)]
        if moved:
            t, p = moved[0]
            raise WriteError(
                f"flow={plan.flow} {t}[{p}]: its progress on the target is {now[(t, p)]}, this task "
                f"last knew {self._progress[(t, p)]} ({len(moved)} of the {len(members)} partitions of {tid} "
                "moved): another attempt wrote them while this task's producer of the group rested; the "
                "task is retried from the progress on the target",
                terminal=False,
            )

    def begin(self, w: PartitionWrite) -> None:
        tid = self.plan.transactional_id(w.topic, w.partition)
        if tid not in self.open_tx:
            w.writer.begin_transaction()
            self.open_tx[tid] = w.writer
        w.begun = True

    def finish(self, parts: Sequence[PartitionWrite]) -> None:
        """Commit the transaction of each group ``parts`` hold, one after another. A streaming task hands
        each group over on its own, in a thread of its own (:meth:`Sink.seal_groups`,
        :func:`finish_threads`), so its groups' round trips overlap there. A failure leaves the groups
        after it open, for :meth:`abandon` to abort."""
        by_tid: dict[str, list[PartitionWrite]] = {}
        for w in parts:
            by_tid.setdefault(self.plan.transactional_id(w.topic, w.partition), []).append(w)
        for tid, ws in by_tid.items():
            self._finish_group(tid, ws)
            del self.open_tx[tid]

    def _finish_group(self, tid: str, parts: list[PartitionWrite]) -> None:
        """Add the group's new progress to its transaction, wait for its acks, settle refusals, then commit
        its records, segments and progress (or abort).

        The progress is known at the seal (each partition's last record read), so it is sent while the
        records' acknowledgements come: the round trips to the coordinators overlap the wait for the
        acknowledgements instead of following it, and the records read for the group meanwhile, held until
        the commit, wait that much less (docs/performance.md, "The progress sent beside the
        acknowledgements"). A record the target refuses makes the transaction abortable, and may fail the
        offsets call (librdkafka answers it with an error): the acknowledgements are then awaited as before
        (the queue was purged, so they come at once), and a refusal among them stops the group as it would
        have. A call the wait gave up on (:class:`WriteError`: it may still be running) is not followed by
        any other call on the producer: the task fails, and the next attempt's fence aborts the transaction."""
        from confluent_kafka import KafkaException

        producer = self.open_tx[tid]
        try:
            self._send_offsets(producer, tid, parts)
        except KafkaException:
            try:
                await_acks(producer, self.plan, parts)
            except WriteError:
                pass  # a refused batch fails what was queued behind it; the refusal is looked for below
            if not refused_in_transaction(self.plan, parts):
                raise
            producer.abort_transaction(30)
            return
        try:
            await_acks(producer, self.plan, parts)
        except WriteError:
            # A refused batch fails what the producer still held after it (librdkafka purges the queue
            # of a transaction in error): the refusal is the cause, the purged records only follow it.
            if not refused_in_transaction(self.plan, parts):
                raise
            producer.abort_transaction(30)
            return
        refused = refused_in_transaction(self.plan, parts) or settle_record_failures(producer, self.plan, parts)
        if refused:
            producer.abort_transaction(30)  # the driver stops the flow; nothing of the group's interval commits
            return
        finish_segments(self.plan, parts)
        for w in parts:
            produce_segments(producer, self.plan, w)
        self._commit(producer, tid, parts)

    def _send_offsets(self, producer: Producer, tid: str, parts: list[PartitionWrite]) -> None:
        """Add the group's new progress (each partition's next source offset) to its open transaction; every
        wait bounded (:mod:`.waits`)."""
        from confluent_kafka import TopicPartition

        plan = self.plan
        group_md = clients.progress_consumer(plan).consumer_group_metadata()
        positions = [TopicPartition(w.remote, w.partition, w.last_offset + 1) for w in parts]
        where = f"flow={plan.flow} {_ranges(parts)}"
        _fail_if_brokers_lost(producer, tid, where)
        # Any of the group's partitions tells what the producer knows of the target.
        first = parts[0]
        seen: dict[str, str] = {}

        def refresh() -> None:
            # A broker that came back is added to the producer's metadata, and librdkafka asks for
            # the group's coordinator again (see waits' module docstring).
            seen["target"] = target_text(producer, first.remote, first.partition)

        def waiting_for_group() -> str:
            return (
                f"waiting for the coordinator of group {plan.progress_group} on the target "
                f"(target: {seen.get('target') or target_text(producer, first.remote, first.partition)})"
            )

        def group_answers(timeout_s: float) -> str | None:
            # The same group's coordinator, asked by a consumer made for the question, for the same
            # partitions: an answer there while the producer has none is librdkafka's wait, not Kafka's.
            # Not the task's cached progress consumer: after the whole target was down it waited on its
            # old coordinator as long as the producer did (120 s, session 45), so it never answered.
            tps = clients.fresh_progress_committed(plan, [(w.remote, w.partition) for w in parts], timeout_s)
            if any(tp.error is not None for tp in tps):
                return None
            return f"the coordinator of group {plan.progress_group} answers a new consumer of it"

        what = f"{where}: send_offsets_to_transaction({tid}, {len(positions)} partitions)"
        # librdkafka's timeout (``left``) may never be looked at; the thread's bound is the step's.
        deadline = time.monotonic() + plan.target_wait_s
        retry_within(
            lambda left: call_within(
                lambda: producer.send_offsets_to_transaction(positions, group_md, left),
                what=what,
                limit_s=max(1.0, deadline - time.monotonic()),
                detail=waiting_for_group,
                nudge=refresh,
                probe=group_answers,
            ),
            what=what,
            limit_s=plan.target_wait_s,
            detail=waiting_for_group,
            attempt_s=_SEND_OFFSETS_ATTEMPT_S,
        )

    def _commit(self, producer: Producer, tid: str, parts: list[PartitionWrite]) -> None:
        """Commit the group's transaction: its records, segments and progress; every wait bounded (:mod:`.waits`)."""
        from confluent_kafka import KafkaException

        plan = self.plan
        where = f"flow={plan.flow} {_ranges(parts)}"
        # A loss while the acknowledgements came: the commit may wait on the coordinator known before too.
        _fail_if_brokers_lost(producer, tid, where)
        first = parts[0]

        def waiting_for_coordinator() -> str:
            return (
                f"waiting for the transaction coordinator of {tid} "
                f"(target: {target_text(producer, first.remote, first.partition)})"
            )

        try:
            retry_within(
                lambda left: producer.commit_transaction(left),
                what=f"{where}: commit_transaction({tid})",
                limit_s=plan.target_wait_s,
                detail=waiting_for_coordinator,
            )
        except KafkaException as exc:
            err = exc.args[0]
            # Kafka's rule: a retriable commit error (a timeout) is retried as is (above); one that
            # requires an abort aborts, and Spark retries the task from the progress on the target; a
            # fatal one (fenced) never commits.
            fenced = "FENCED" in err.name() or err.fatal()
            raise WriteError(
                f"{where}: transaction of {tid} not committed ({err.name()}: {err.str()}); "
                + (
                    "another writer of these partitions took over"
                    if fenced
                    else "the task is retried from the progress on the target"
                ),
                terminal=False,
            ) from None
        for w in parts:
            self._progress[(w.remote, w.partition)] = w.last_offset + 1

    def rest(self, producer: Producer) -> bool:
        """Close an idle group's producer (no transaction open, nothing held): an idle flow exactly once
        has one per transaction group, 16 at 1,000 partitions on this host's default. Made again at the
        group's next record, its ``init_transactions`` fences whichever attempt holds the id by then, so
        this task then checks that no other writer took the group over meanwhile (:meth:`_still_ours`)."""
        tid = next((t for t, p in self.producers.items() if p is producer), None)
        if tid is None or tid in self.open_tx or len(producer):
            return False
        del self.producers[tid]
        self._rested.add(tid)
        _close_idle(self.plan, producer)
        return True

    def release(self) -> None:
        """Nothing open (the streaming task's end): forget the task's producers; closed when unreferenced."""
        for producer in self.producers.values():
            clients.forget(producer)
        self.producers.clear()

    def abandon(self, parts: Sequence[PartitionWrite]) -> None:
        """Abort what is open; forget every producer of the task (the next task makes and fences anew).

        A producer still inside a call that did not answer (:mod:`.waits`) refuses the abort at once;
        the next attempt's ``init_transactions`` fences it and aborts its transaction. One that lost every
        broker of the target is not asked (:func:`~.clients.brokers_lost_at`: its abort may wait on the
        coordinator it knew before as its offsets call did, not measured); the next attempt's fence (or
        the next start's) aborts its transaction, and until then nothing else writes its partitions:
        what a ``read_committed`` reader waits for is this flow's next records, which come after that fence.
        """
        deadline = time.monotonic() + _ABORT_S
        # A snapshot: a group's finish still running in its thread (past the task's wait for it) may end
        # and leave the dict meanwhile.
        for producer in list(self.open_tx.values()):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if clients.brokers_lost_at(producer) is not None:
                continue
            try:
                producer.abort_transaction(left)
            except Exception:  # noqa: BLE001 - fatal/fenced/busy producers cannot abort; drop them
                pass
        self.open_tx.clear()
        for producer in list(self.producers.values()):
            clients.forget(producer)
        for w in parts:
            clients.forget(w.producer)


def _fail_if_brokers_lost(producer: Producer, tid: str, where: str) -> None:
    """Fail the task (retriable) if ``producer`` lost every broker of the target while its transaction
    was open or before it.

    After such a loss its offsets call waited on the coordinator librdkafka knew before, every broker
    back (the whole-target-down test, session 54): a wait on librdkafka, not on Kafka, which the probe
    of waits.call_within took 40 s to tell. The retry's ``init_transactions`` aborts this transaction."""
    lost = clients.brokers_lost_at(producer)
    if lost is None:
        return
    message = (
        f"{where}: the producer of {tid} lost every broker of the target {time.monotonic() - lost:.0f}s ago, "
        "while this transaction was open or before it; its transaction's calls would wait on the "
        "coordinators librdkafka knew before (librdkafka issue #5511), so the transaction is left "
        "open for the retry to abort and the task is retried with new clients"
    )
    log.warning("%s", message)
    raise WriteError(message, terminal=False)


def _layouts_on_record(plan: WritePlan) -> set[int] | None:
    """The exactly-once layouts the flow's last start recorded on the target (the driver's fence reads and
    writes the same record, :meth:`~sparkmirror.pipeline.driver.target.TargetPreparer.fence`); ``None``:
    none. Waits at most ``target_wait_s``, retrying what Kafka calls retriable (:mod:`.waits`)."""
    from sparkmirror.core.naming import transactions_group
    from sparkmirror.core.transactions import parse_layouts

    group = transactions_group(plan.source_alias, plan.target_alias)
    topic, partition = plan.offset_map_topic, 0
    (tp,) = retry_within(
        lambda left: clients.fresh_committed(plan, group, [(topic, partition)], left),
        what=f"flow={plan.flow} reading the exactly-once layout on record (group {group})",
        limit_s=plan.target_wait_s,
        detail=lambda: f"waiting for the coordinator of group {group} on the target",
    )
    if tp.error is not None:
        raise WriteError(
            f"flow={plan.flow} cannot read the exactly-once layout on record (group {group}): {tp.error}",
            terminal=False,
        )
    return parse_layouts(tp.metadata if tp.offset >= 0 else None)


def _close_idle(plan: WritePlan, producer: Producer) -> None:
    """An idle producer leaves the worker's cache and is closed in a thread of its own, not waited for:
    librdkafka's close can wait on a lost broker for ever (a thread left behind then), and a task may
    rest 31 producers in one turn."""
    clients.forget(producer)
    close_within(producer.close, 0.0, f"idle producer of {plan.flow}")


def _ranges(parts: Sequence[PartitionWrite], most: int = 5) -> str:
    """``topic[p] offsets a..b`` of a transaction's partitions, the first ``most`` of them."""
    text = ", ".join(f"{w.topic}[{w.partition}] offsets {w.first_offset}..{w.last_offset}" for w in parts[:most])
    return text + (f" and {len(parts) - most} more partitions" if len(parts) > most else "")


def committed_progress(plan: WritePlan, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The next upstream offset to mirror per (remote topic, partition) (-1: none yet), in one request."""
    from confluent_kafka import TopicPartition

    consumer = clients.progress_consumer(plan)
    names = ", ".join(f"{t}[{p}]" for t, p in partitions[:5]) + (" …" if len(partitions) > 5 else "")
    tps = retry_within(
        lambda left: consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=left),
        what=f"flow={plan.flow} reading the progress of {names} (group {plan.progress_group})",
        limit_s=plan.target_wait_s,
        detail=lambda: f"waiting for the coordinator of group {plan.progress_group} on the target",
    )
    out: dict[tuple[str, int], int] = {}
    for tp in tps:
        if tp.error is not None:
            # Never read an error as "no progress": that would write the range again.
            raise WriteError(
                f"flow={plan.flow} cannot read progress of {tp.topic}[{tp.partition}]: {tp.error}", terminal=False
            )
        out[(tp.topic, tp.partition)] = int(tp.offset) if tp.offset >= 0 else -1
    return out
