"""``offsets index-history``: the exact offset map of what MirrorMaker 2 copied before sparkmirror took
over a flow, rebuilt by reading each source partition beside its remote partition.

Per partition the range is the remote partition from its log start (or from where an earlier run
stopped) up to where sparkmirror's own copying began: the lowest downstream offset of the segments
the map holds at or past MM2's position (the offset sparkmirror adopted on its first start; Connect's
offsets topic still says it), or the remote partition's end when sparkmirror has written nothing
there yet. The records are matched by :class:`sparkmirror.core.history.HistoryMatcher` and its
segments written to the flow's offset-map topic by :class:`OffsetMapStore` (the writer's own record
format, one place). Only partitions the flow has taken over (its progress group holds an offset for
them, not handed back) are indexed: a partition sparkmirror has not started yet would take the
history's end as its own progress (``core.adoption``: the map's end counts as state).

Safe while the flow runs, without its lease: every history segment is keyed below MM2's position
(copies of later records are left out, sparkmirror's copies of them are later and win), so none
replaces a record sparkmirror writes (keyed at or past it) in the compacted topic, and their
downstream offsets are below everything sparkmirror wrote. The offset map takes segments that arrive
out of downstream order: such a map is re-sorted once, lazily, when loaded (``core.offsetmap``). A
running flow loaded its map at start: its checkpoints use the history from its next start on;
``offsets translate`` and failover read the map afresh.

Resumable without local state: a rerun finds the history segments already on the target (keyed
below MM2's position, below sparkmirror's range) and continues after the last one; a finished
partition is skipped. A run is closed into a segment every ``chunk`` records and segments are made
durable as they close, so an interrupted run loses at most that much work.

Reads: the remote partition ``read_committed`` (aborted records are no records: MM2 with exactly-once
writes in transactions; a transaction still open stops the partition with an error, never a short
read), the source as MM2's consumer read it: its ``isolation.level`` in the file, else Kafka's
``read_uncommitted`` (MM2 then copies aborted records too), ``--source-isolation`` to say otherwise.
Where identical records make the copy's original uncertain (an aborted transaction written again, a
producer's retry) the matcher refuses rather than guess (``core.history``).

Not yet: the stop point is MM2's position read now from Connect's offsets topic. After a hand-back
and a second take-over, or with an MM2 that was not stopped, that is not where sparkmirror's own
copies begin; index-history is meant to run after the first take-over, with MM2 stopped.

It never writes anything but offset-map segments, and never prints a secret.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Literal

from sparkmirror.config.model import FlowConfig
from sparkmirror.core.adoption import HANDED_BACK
from sparkmirror.core.connect_offsets import offsets_topic
from sparkmirror.core.history import DEFAULT_WINDOW, HistoryError, HistoryMatcher, record_digest
from sparkmirror.core.naming import progress_group
from sparkmirror.core.offsetmap import Segment
from sparkmirror.errors import SparkMirrorError
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.offsets.store import OffsetMapStore

if TYPE_CHECKING:
    from confluent_kafka import Consumer

log = logging.getLogger(__name__)

#: Records per segment at most: the work an interrupted run loses (a few seconds of it).
DEFAULT_CHUNK = 1_000_000
#: Segments made durable together.
_WRITE_BATCH = 1000
#: Seconds without a record before a read that has not reached its end is given up.
_STALL_S = 60.0

Status = Literal["indexed", "done", "skipped", "refused"]


class HistoryReadError(SparkMirrorError):
    """A partition could not be read to where its history ends (exit 1; retrying may help)."""

    retriable = True


@dataclass
class PartitionHistory:
    """What index-history did for one partition."""

    source_topic: str
    partition: int
    remote_topic: str
    status: Status
    #: Why it was skipped or refused, or what it found.
    detail: str = ""
    #: The remote offsets read this run: [remote_from, remote_to).
    remote_from: int = 0
    remote_to: int = 0
    #: MM2's position (where sparkmirror started copying upstream).
    mm2_next: int | None = None
    records: int = 0
    segments: int = 0
    replayed: int = 0
    gone: int = 0
    beyond: int = 0
    source_skipped: int = 0
    source_first: int | None = None
    source_last: int | None = None
    #: Records read from both partitions, and their bytes (keys, values, headers).
    records_read: int = 0
    bytes_read: int = 0
    seconds: float = 0.0


@dataclass
class HistoryReport:
    """What index-history did for one flow."""

    flow: str
    offset_map_topic: str
    mm2_offsets_topic: str
    partitions: list[PartitionHistory] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def refused(self) -> list[PartitionHistory]:
        return [p for p in self.partitions if p.status == "refused"]

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class _Plan:
    source_topic: str
    partition: int
    remote_topic: str
    mm2_next: int
    remote_from: int
    remote_to: int
    #: Resume: the next source offset the last history segment expects; None: from the source's start.
    expected: int | None
    source_start: int
    source_end: int


class _Counter:
    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0


def _read(
    consumer: Consumer,
    topic: str,
    partition: int,
    start: int,
    end: int,
    counter: _Counter,
    what: str,
    timestamps: bool = True,
) -> Generator[tuple[int, bytes], None, None]:
    """``(offset, digest)`` of the records of ``topic[partition]`` in [start, end), in big batches
    (without their timestamps in the digest unless ``timestamps``)."""
    from confluent_kafka import KafkaError, TopicPartition

    if start >= end:
        return
    consumer.assign([TopicPartition(topic, partition, start)])
    last = time.monotonic()
    n = nbytes = 0  # counted here, added to ``counter`` per batch: this loop runs once per record
    try:
        while True:
            # consume() waits its whole timeout unless the batch fills: take what is queued, and wait
            # (for one record) only when nothing is.
            batch = consumer.consume(10_000, 0) or consumer.consume(1, 0.5)
            counter.records += n
            counter.bytes += nbytes
            n = nbytes = 0
            if not batch:
                if time.monotonic() - last > _STALL_S:
                    raise HistoryReadError(
                        f"{topic}[{partition}]: no record for {_STALL_S:.0f}s before offset {end} ({what})"
                    )
                continue
            last = time.monotonic()
            for msg in batch:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        # read_committed stops at the last stable offset: below ``end``, a transaction is
                        # open there, and what follows it cannot be read (nor matched) yet.
                        (tp,) = consumer.position([TopicPartition(topic, partition)])
                        if tp.offset is not None and 0 <= tp.offset < end:
                            raise HistoryReadError(
                                f"{topic}[{partition}] ({what}): readable only up to offset {tp.offset}, not to "
                                f"{end}: a transaction is still open there (is MirrorMaker 2 still running?); "
                                "rerun once it is committed or aborted"
                            )
                        return
                    raise HistoryReadError(f"{topic}[{partition}] ({what}): {err.str()}")
                off = msg.offset()
                if off is None or off >= end:
                    return
                key, value, headers = msg.key(), msg.value(), msg.headers()
                n += 1
                nbytes += (len(key) if key else 0) + (len(value) if value else 0)
                if isinstance(headers, dict):
                    headers = list(headers.items())
                yield off, record_digest(key, value, msg.timestamp()[1] if timestamps else 0, headers)
                if off == end - 1:
                    return  # the end, without waiting for the broker to say so
    finally:
        counter.records += n
        counter.bytes += nbytes
        consumer.unassign()


def _consumer(conf: Mapping[str, str], isolation: str) -> Consumer:
    from sparkmirror.kafka.factory import new_consumer

    return new_consumer(
        {
            **conf,
            "group.id": "sparkmirror-index-history",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "max.partition.fetch.bytes": str(16 * 1024 * 1024),
            "fetch.max.bytes": str(64 * 1024 * 1024),
            # The wait for a fetch that finds nothing new: only at a partition's end here (it read 0.5 s
            # a partition at the default).
            "fetch.wait.max.ms": "20",
            # Once its queue is full the client waits this long before it fetches again (1 s by default:
            # a second's stall whenever this reader drained the queue first).
            "fetch.queue.backoff.ms": "10",
        }
    )


class HistoryIndexer:
    """index-history for one flow (see the module's docstring)."""

    def __init__(
        self,
        flow: FlowConfig,
        *,
        mm2_offsets_topic: str = "",
        window: int = DEFAULT_WINDOW,
        chunk: int = DEFAULT_CHUNK,
        shard: tuple[int, int] = (0, 1),
        timestamps: bool = True,
        source_isolation: str | None = None,
    ) -> None:
        if not 0 <= shard[0] < shard[1]:
            raise ValueError(f"shard {shard[0]}/{shard[1]}: needs 0 <= I < N")
        self.flow = flow
        self.shard = shard
        self.clients = FlowClients(flow)
        self.mm2_offsets_topic = offsets_topic(flow.source, mm2_offsets_topic.strip() or flow.mm2_offsets_topic)
        self.window = window
        self.chunk = chunk
        #: False: records are matched on key, value and headers only (a remote topic with LogAppendTime).
        self.timestamps = timestamps
        #: How the source is read: as MirrorMaker 2's consumer read it (its isolation.level in the file,
        #: the Kafka consumer's default read_uncommitted), so that aborted records count as MM2 counted them.
        self.source_isolation = source_isolation or str(
            flow.source_consumer_props().get("isolation.level", "read_uncommitted")
        )
        self.store = OffsetMapStore(self.clients)

    def plan(self) -> tuple[list[_Plan], list[PartitionHistory]]:
        """The partitions to index, and those skipped (with why)."""
        from sparkmirror.kafka.groups import committed_positions
        from sparkmirror.kafka.lag import log_bounds
        from sparkmirror.kafka.mm2offsets import mm2_positions
        from sparkmirror.kafka.topics import TopicSync

        flow, clients = self.flow, self.clients
        sync = TopicSync(clients)
        sources = sync.source_topics()
        remote = {t: sync.remote_name(t) for t in sources}
        group = progress_group(flow.source, flow.target)
        progress = committed_positions(
            clients.target_consumer, group, [(remote[t], p) for t, n in sources.items() for p in range(n)]
        )
        mm2 = mm2_positions(clients.target_consumer, self.mm2_offsets_topic, flow.source)
        self.store.load()
        source_bounds = log_bounds(clients.source_admin, sources)
        target_md = clients.target_admin.list_topics(timeout=30).topics
        present = {t: n for t, n in sources.items() if remote[t] in target_md}
        remote_bounds = log_bounds(clients.target_admin, {remote[t]: n for t, n in present.items()})
        plans: list[_Plan] = []
        skipped: list[PartitionHistory] = []
        mine = [(t, p) for t, n in sources.items() for p in range(n)][self.shard[0] :: self.shard[1]]
        for t, p in mine:

            def skip(why: str, status: Status = "skipped", t: str = t, p: int = p) -> None:
                skipped.append(PartitionHistory(t, p, remote[t], status, why))

            at = mm2.get((t, p))
            a = at.next_offset if at is not None else None
            if a is None:
                skip(f"MirrorMaker 2 has no position for it in {self.mm2_offsets_topic}: nothing of MM2's to index")
                continue
            if t not in present:
                skip(f"{remote[t]} does not exist on {flow.target}")
                continue
            own = progress.get((remote[t], p))
            if own is None:
                skip(
                    f"sparkmirror has not started it (no offset in its progress group {group}): run "
                    "sparkmirror first, then index what MM2 copied before it"
                )
                continue
            if own[1] == HANDED_BACK:
                skip("handed back to MirrorMaker 2 (handback mm2): MM2 may be copying into it")
                continue
            low, high = remote_bounds[(remote[t], p)]
            pm = self.store.map.partition(t, p)
            segments = pm.segments() if pm is not None else []
            ours = [s.downstream_start for s in segments if s.upstream_start >= a]
            end = min(ours) if ours else high
            done = [s for s in segments if s.upstream_start < a and s.downstream_start < end]
            last = max(done, key=lambda s: (s.downstream_end, s.downstream_start)) if done else None
            start = max(low, last.downstream_end) if last is not None else low
            if start >= end:
                what = "already indexed" if last is not None else "MM2 copied nothing that is still on the target"
                skipped.append(
                    PartitionHistory(t, p, remote[t], "done", what, remote_from=start, remote_to=end, mm2_next=a)
                )
                continue
            s_low, s_high = source_bounds[(t, p)]
            plans.append(
                _Plan(
                    t,
                    p,
                    remote[t],
                    a,
                    start,
                    end,
                    last.upstream_end if last is not None else None,
                    s_low,
                    s_high,
                )
            )
        return plans, skipped

    def run(
        self,
        progress: Callable[[str, int], None] | None = None,
        total: Callable[[int], None] | None = None,
    ) -> HistoryReport:
        """Index every partition of :meth:`plan`: ``total(remote offsets to read)`` once planned, then
        ``progress(partition, remote offsets read since the last call)`` as it goes."""
        t0 = time.monotonic()
        plans, skipped = self.plan()
        if total is not None:
            total(sum(p.remote_to - p.remote_from for p in plans))
        report = HistoryReport(self.flow.name, self.store.topic, self.mm2_offsets_topic, list(skipped))
        if plans:
            self.store.ensure_topic()  # made by the flow's first start; not there if it ran elsewhere
            remote_c = _consumer(self.clients.target_consumer, "read_committed")
            source_c = _consumer(self.clients.source_consumer, self.source_isolation)
            try:
                for plan in plans:
                    report.partitions.append(self._index(plan, remote_c, source_c, progress))
            finally:
                remote_c.close()
                source_c.close()
        report.partitions.sort(key=lambda p: (p.source_topic, p.partition))
        report.seconds = time.monotonic() - t0
        return report

    def _index(
        self,
        plan: _Plan,
        remote_c: Consumer,
        source_c: Consumer,
        progress: Callable[[str, int], None] | None,
    ) -> PartitionHistory:
        t0 = time.monotonic()
        flow = self.flow.name
        name = f"{plan.source_topic}[{plan.partition}]"
        src_start = plan.source_start if plan.expected is None else max(plan.source_start, plan.expected - self.window)
        source_n, remote_n = _Counter(), _Counter()
        source = _read(
            source_c,
            plan.source_topic,
            plan.partition,
            src_start,
            plan.source_end,
            source_n,
            "the source partition",
            self.timestamps,
        )
        matcher = HistoryMatcher(
            source,
            topic=plan.source_topic,
            partition=plan.partition,
            remote_topic=plan.remote_topic,
            window=self.window,
            expected=plan.expected,
            upto=plan.mm2_next,
            max_run=self.chunk,
        )
        result = PartitionHistory(
            plan.source_topic,
            plan.partition,
            plan.remote_topic,
            "indexed",
            remote_from=plan.remote_from,
            remote_to=plan.remote_from,
            mm2_next=plan.mm2_next,
        )
        pending: list[Segment] = []
        written = 0
        reported = plan.remote_from
        log.info(
            "flow=%s %s: indexing MirrorMaker 2's copies at %s[%d] offsets %d to %d (source from offset %d%s)",
            flow,
            name,
            plan.remote_topic,
            plan.partition,
            plan.remote_from,
            plan.remote_to,
            src_start,
            "" if plan.expected is None else f", resuming at {plan.expected}",
        )
        try:
            for off, digest in _read(
                remote_c,
                plan.remote_topic,
                plan.partition,
                plan.remote_from,
                plan.remote_to,
                remote_n,
                "the remote",
                self.timestamps,
            ):
                closed = matcher.push(off, digest)
                if closed:
                    pending += closed
                    if len(pending) >= _WRITE_BATCH or closed[-1].count >= self.chunk:
                        self.store.write(pending)
                        written += len(pending)
                        pending = []
                if progress is not None and off - reported >= 10_000:
                    progress(name, off + 1 - reported)
                    reported = off + 1
                result.remote_to = off + 1
            pending += matcher.finish()
        except HistoryError as exc:
            pending += matcher.close_run()
            result.status = "refused"
            result.detail = str(exc)
            log.error("flow=%s %s: %s", flow, name, exc)
        finally:
            source.close()  # lets go of the source partition now, not when collected (after the next assign)
            if pending:
                self.store.write(pending)  # each a true statement about the records before the refusal
                written += len(pending)
        if progress is not None:
            progress(name, max(plan.remote_to - reported, 0))
        st = matcher.stats
        result.records, result.segments, result.replayed = st.matched, written, st.replayed
        result.gone, result.beyond, result.source_skipped = st.gone, st.beyond, st.source_skipped
        result.source_first, result.source_last = st.first_source, st.last_source
        result.records_read = source_n.records + remote_n.records
        result.bytes_read = source_n.bytes + remote_n.bytes
        result.seconds = time.monotonic() - t0
        if result.status == "indexed" and not st.matched and plan.expected is not None:
            # A rerun that found nothing more to map: the tail it read copies records from MM2's position
            # on (sparkmirror's copies count), read again by every rerun (at most what MM2 copied past its
            # last commit).
            result.status = "done"
        if result.status == "done":
            result.detail = f"already indexed; {st.beyond:,} copies after it of records from MM2's position on"
        elif result.status == "indexed":
            notes = []
            if st.replayed:
                notes.append(f"{st.replayed:,} copies of records MM2 had copied before (its restarts' replays)")
            if st.gone:
                notes.append(
                    f"{st.gone:,} copies at the remote's start whose source records retention removed (not mapped: "
                    "the map starts where both logs hold records)"
                )
            if st.beyond:
                notes.append(f"{st.beyond:,} copies of records from MM2's position on (sparkmirror's copies count)")
            if st.source_skipped:
                notes.append(f"{st.source_skipped:,} source records the remote does not hold, passed over")
            result.detail = "; ".join(notes)
            log.info(
                "flow=%s %s: %d records of %s[%d] offsets %d to %d mapped to source offsets %s to %s in %d "
                "segments (%.1fs)",
                flow,
                name,
                st.matched,
                plan.remote_topic,
                plan.partition,
                plan.remote_from,
                result.remote_to,
                st.first_source,
                st.last_source,
                written,
                result.seconds,
            )
        return result

    def close(self) -> None:
        self.store.close()
        self.clients.close()


def index_history(
    flow: FlowConfig,
    *,
    mm2_offsets_topic: str = "",
    window: int = DEFAULT_WINDOW,
    chunk: int = DEFAULT_CHUNK,
    shard: tuple[int, int] = (0, 1),
    timestamps: bool = True,
    source_isolation: str | None = None,
    progress: Callable[[str, int], None] | None = None,
    total: Callable[[int], None] | None = None,
) -> HistoryReport:
    """Index MirrorMaker 2's history of one flow (see the module's docstring); ``shard`` (I, N): only
    the I-th of every N of its partitions (in topic and partition order), so that N processes share it."""
    indexer = HistoryIndexer(
        flow,
        mm2_offsets_topic=mm2_offsets_topic,
        window=window,
        chunk=chunk,
        shard=shard,
        timestamps=timestamps,
        source_isolation=source_isolation,
    )
    try:
        return indexer.run(progress, total)
    finally:
        indexer.close()
