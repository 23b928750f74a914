"""The scale scenario of issue 16: many topics and partitions, many consumer groups.

``bench/run.py --scenario scale`` runs this instead of the one-topic benchmark.
On two fresh local clusters:

- ``--scale-topics`` (200) topics of ``--scale-partitions`` (5) partitions on A
  hold ``--records`` records of ``--size`` bytes; the first ``--scale-hot`` (4)
  topics are hot: they hold half of the records, the others share the rest.
  Keys are ``b"%012d" % seq`` per topic, written to partition ``seq % P``, so a
  record's offset on A is ``seq // P`` and B can be checked record by record.
- ``--scale-groups`` (1,000) consumer groups are committed on A, each at
  random positions on 1 to 3 partitions of one random topic.

Then for each system (``--systems``), on the same brokers and data, with B
emptied before each (its remote topics created with ``LogAppendTime``):

1. **Throughput**: records/s from the first to the last append on B; CPU and
   peak RSS of the system's process tree; records lost (B read back with
   read_committed, key by key).
2. **Checkpoint freshness** (mm2, sparkmirror): with the system running and
   the data mirrored, every group commits a new position on A; the time from
   each group's commit to the checkpoint on B that carries it
   (``A.checkpoints.internal``, the record's timestamp), p50/p99/max, and the
   groups whose checkpoint did not come within the wait.
3. **Re-reads after failover** for every group: each group's last checkpoint
   on B (what Kafka's ``RemoteClusterUtils.translateOffsets`` returns) against
   the records on B: records at or after the translated offset that the group
   had already read on A are re-reads; records it had not read that lie before
   it are skipped.

4. **Latency** (``--latency-seconds``, 0 to skip), after every system's other
   phases (the load it appends to A would be copied by the next throughput
   run): B emptied, the system started and caught up with A, then a paced
   producer offers ``--rate`` records/s round robin over every partition
   (``--warmup-seconds`` of it not measured);
   latency = append time on B - the record's timestamp on A, p50/p99/max.

The limit loop (``bench/jvm/CopyLoop.java``) copies every topic in one JVM.
Results: ``bench/results/<date>-scale.json`` (``<date>-scale-spark-cluster.json`` when sparkmirror
ran on a Spark cluster, ``--spark-cluster`` or ``--spark-master``; its executors' CPU and peak RSS
are then sampled from the workers' process trees, ``bench/sparkcluster.py``); a summary per system
is logged.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import NewTopic, OffsetSpec

import replicators as rep
import workload as wl
from sparkmirror.core.formats import Checkpoint

log = logging.getLogger("bench.scale")

PREFIX = "scale-"
CHECKPOINTS = f"{rep.SOURCE}.checkpoints.internal"
#: A throughput window shorter than this is reported as too short to quote.
MIN_WINDOW_S = 30.0


@dataclass(frozen=True)
class Scale:
    topics: int
    partitions: int
    hot: int
    groups: int
    #: Seconds to wait for the checkpoints of re-committed groups, beyond the checkpoint interval.
    freshness_wait_s: int = 120
    #: Topic names start with it; the replicators' topic pattern is ``<prefix>.*``.
    prefix: str = PREFIX

    def names(self) -> list[str]:
        return [f"{self.prefix}{i:03d}" for i in range(self.topics)]

    @property
    def total_partitions(self) -> int:
        return self.topics * self.partitions

    def sweep_point(self, partitions: int) -> Scale:
        """The layout of ``partitions`` partitions for the throughput sweep, on topics of its own:
        topics of ``self.partitions`` partitions where that divides it (100 -> 20 x 5), else one topic
        (8 -> 1 x 8); the same share of hot topics, no groups."""
        if partitions % self.partitions == 0 and partitions >= self.partitions:
            topics, per_topic = partitions // self.partitions, self.partitions
        else:
            topics, per_topic = 1, partitions
        return dataclasses.replace(
            self, topics=topics, partitions=per_topic, hot=min(self.hot, topics), groups=0, prefix=f"sweep{partitions}-"
        )

    def spec(self, system: rep.Replicator) -> str:
        """What a replicator is told to mirror: the limit loop a list of topics, the others a pattern."""
        return ",".join(self.names()) if system.name == "limit" else f"{self.prefix}.*"

    def records_per_topic(self, records: int) -> dict[str, int]:
        """Half of the records in the hot topics, the other half spread over the rest."""
        names = self.names()
        hot = names[: self.hot] if self.hot < len(names) else names
        cold = names[len(hot) :]
        out = dict.fromkeys(names, 0)
        hot_total = records // 2 if cold else records
        for i, t in enumerate(hot):
            out[t] = hot_total // len(hot) + (1 if i < hot_total % len(hot) else 0)
        rest = records - hot_total
        for i, t in enumerate(cold):
            out[t] = rest // len(cold) + (1 if i < rest % len(cold) else 0)
        return out


# -- topics on a cluster, many at once ------------------------------------------


def create_topics(bootstrap: str, topics: dict[str, int], config: dict[str, str] | None = None) -> None:
    """Create many topics in one request; retry those whose deletion has not finished; wait for their metadata."""
    client = wl.admin(bootstrap)
    pending = dict(topics)
    deadline = time.monotonic() + 300
    while pending:
        futures = client.create_topics(
            [NewTopic(t, n, 1, config=config or {}) for t, n in pending.items()], operation_timeout=120
        )
        for name, fut in futures.items():
            try:
                fut.result()
                del pending[name]
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc) or time.monotonic() > deadline:
                    raise
        if pending:
            time.sleep(1)
    # The topics answer once every partition has a leader in the metadata (a watermark request on a
    # partition not yet known fails with "Local: Unknown partition").
    while True:
        md = client.list_topics(timeout=30).topics
        missing = [
            t
            for t, n in topics.items()
            if t not in md
            or md[t].error is not None
            or len(md[t].partitions) < n
            or any(p.leader < 0 for p in md[t].partitions.values())
        ]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(missing)} topics without leaders after creation, e.g. {missing[:3]}")
        time.sleep(0.5)


def end_offsets(bootstrap: str, topics: dict[str, int], *, committed: bool = False) -> dict[tuple[str, int], int]:
    """High watermarks of every partition of ``topics`` in one admin request (retried while leaders settle);
    ``committed``: last stable offsets instead (what a read_committed consumer sees the end at)."""
    from confluent_kafka import IsolationLevel

    client = wl.admin(bootstrap)
    request = {TopicPartition(t, p): OffsetSpec.latest() for t, n in topics.items() for p in range(n)}
    isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    deadline = time.monotonic() + 60
    while True:
        try:
            futures = client.list_offsets(request, isolation_level=isolation, request_timeout=60)
            return {(tp.topic, tp.partition): fut.result().offset for tp, fut in futures.items()}
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def record_counts(bootstrap: str, topics: dict[str, int]) -> int:
    """Records held by ``topics`` (high watermark - log start, summed over every partition)."""
    client = wl.admin(bootstrap)
    parts = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
    low = client.list_offsets({tp: OffsetSpec.earliest() for tp in parts}, request_timeout=60)
    high = client.list_offsets({tp: OffsetSpec.latest() for tp in parts}, request_timeout=60)
    return sum(high[tp].result().offset - low[tp].result().offset for tp in parts)


def truncate(bootstrap: str, topics: dict[str, int]) -> None:
    """Delete every record of ``topics`` (``delete_records`` up to the high watermark).

    Before the latency phases: a system started on an empty B then has nothing to catch up
    with, instead of copying the whole workload again before the paced load can begin.
    """
    client = wl.admin(bootstrap)
    ends = end_offsets(bootstrap, topics)
    futures = client.delete_records([TopicPartition(t, p, o) for (t, p), o in ends.items() if o > 0],
                                    request_timeout=120, operation_timeout=120)  # fmt: skip
    for fut in futures.values():
        fut.result()


# -- the data --------------------------------------------------------------------


def load(bootstrap: str, per_topic: dict[str, int], partitions: int, size: int, seed: int) -> None:
    rnd = random.Random(seed)
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer: Producer = wl._producer(bootstrap)
    value = rnd.randbytes(size)
    n = 0
    for topic, count in per_topic.items():
        for seq in range(count):
            wl._produce(
                producer,
                topic,
                key=b"%012d" % seq,
                value=value,
                partition=seq % partitions,
                headers=wl.HEADERS,
                on_delivery=on_delivery,
            )
            n += 1
            if n % 10_000 == 0:
                producer.poll(0)
    producer.flush(300)
    if errors:
        raise RuntimeError(f"loading: {len(errors)} records failed, first: {errors[0]}")


Positions = dict[str, dict[tuple[str, int], int]]


def choose_positions(
    rnd: random.Random, scale: Scale, ends: dict[tuple[str, int], int], earlier: Positions | None = None
) -> Positions:
    """Each group on 1-3 partitions of one topic, at a random position (past its earlier one, if any)."""
    out: Positions = {}
    names = scale.names()
    for i in range(scale.groups):
        group = f"bench-group-{i:05d}"
        if earlier is not None:
            # Strictly past the earlier position (which lies below the end), so each group moves.
            out[group] = {tp: rnd.randrange(o + 1, ends[tp] + 1) for tp, o in earlier[group].items()}
            continue
        topic = rnd.choice(names)
        parts = [p for p in range(scale.partitions) if ends[(topic, p)] >= 2]
        chosen = rnd.sample(parts, k=min(len(parts), rnd.randint(1, 3)))
        out[group] = {(topic, p): rnd.randrange(1, ends[(topic, p)]) for p in chosen}
    return out


def commit_groups(bootstrap: str, positions: Positions) -> dict[str, float]:
    """Commit every group's positions on A (8 at a time); returns each group's commit time (epoch s)."""
    from sparkmirror.kafka.groups import commit_offsets

    def one(item: tuple[str, dict[tuple[str, int], int]]) -> tuple[str, float]:
        group, offsets = item
        commit_offsets({"bootstrap.servers": bootstrap, "log_level": "3"}, group, offsets)
        return group, time.time()

    with ThreadPoolExecutor(8) as pool:
        return dict(pool.map(one, positions.items()))


@dataclass
class Found:
    """Every remote partition on B read back with read_committed."""

    records: int = 0
    distinct: int = 0
    first_append_ms: int | None = None
    last_append_ms: int | None = None
    not_append_time: int = 0
    #: (remote topic, partition) -> downstream offsets and the source sequence number at each.
    offsets: dict[tuple[str, int], array[int]] = field(default_factory=dict)
    seqs: dict[tuple[str, int], array[int]] = field(default_factory=dict)
    #: Records of the latency load, and their latency (B's append time - A's timestamp), in ms.
    latency_records: int = 0
    latencies_ms: array[int] = field(default_factory=lambda: array("q"))


def read_back(
    bootstrap: str, ends: dict[tuple[str, int], int], *, group: str, timeout_s: float = 900
) -> Iterator[Message]:
    """Every record of the partitions of ``ends`` (:func:`end_offsets`) from the start to their end
    (read_committed); an error other than a partition's end raises."""
    todo = {tp for tp, end in ends.items() if end > 0}
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    c.assign([TopicPartition(t, p, 0) for t, p in todo])
    deadline = time.monotonic() + timeout_s
    try:
        while todo:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {bootstrap} back: {len(todo)} partitions not at their end")
            for m in c.consume(10_000, 1.0):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        todo.discard((m.topic() or "", m.partition() or 0))
                        continue
                    raise KafkaException(err)
                yield m
    finally:
        c.close()


def scan(bootstrap: str, topics: dict[str, int], *, latency_from: int = 0, timeout_s: float = 900) -> Found:
    ends = end_offsets(bootstrap, topics)
    out = Found(
        offsets={tp: array("q") for tp in ends},
        seqs={tp: array("q") for tp in ends},
    )
    seen: set[tuple[str, int]] = set()
    for m in read_back(bootstrap, ends, group="bench-scan", timeout_s=timeout_s):
        topic, p, key = m.topic() or "", m.partition() or 0, m.key() or b""
        ts_type, ts = m.timestamp()
        if key[:1] == b"L":  # the latency load: B's append time - the source timestamp in the value
            if int(key[1:]) < latency_from:
                continue  # an earlier system's load
            out.latency_records += 1
            out.latencies_ms.append(ts - wl._TS.unpack_from(m.value() or bytes(8))[0])
            continue
        seq = int(key)
        out.offsets[(topic, p)].append(m.offset() or 0)
        out.seqs[(topic, p)].append(seq)
        out.records += 1
        if (topic, seq) not in seen:
            seen.add((topic, seq))
            out.distinct += 1
        if ts_type != wl.TIMESTAMP_LOG_APPEND_TIME:
            out.not_append_time += 1
        out.first_append_ms = ts if out.first_append_ms is None else min(out.first_append_ms, ts)
        out.last_append_ms = ts if out.last_append_ms is None else max(out.last_append_ms, ts)
    return out


def read_checkpoints(bootstrap: str) -> list[tuple[Checkpoint, int]]:
    """Every checkpoint record on B with its timestamp (ms), oldest first; empty when there is no topic."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-checkpoints",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    out: list[tuple[Checkpoint, int]] = []
    try:
        md = c.list_topics(CHECKPOINTS, timeout=10).topics.get(CHECKPOINTS)
        if md is None or md.error is not None:
            return out
        todo = set(md.partitions)
        c.assign([TopicPartition(CHECKPOINTS, p, 0) for p in todo])
        deadline = time.monotonic() + 120
        while todo and time.monotonic() < deadline:
            for m in c.consume(10_000, 1.0):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        todo.discard(m.partition() or 0)
                    continue
                if m.key() is None or m.value() is None:
                    continue
                out.append((Checkpoint.decode(m.key(), m.value()), m.timestamp()[1]))
    finally:
        c.close()
    return out


def failover(
    found: Found, positions: Positions, checkpoints: Iterable[tuple[Checkpoint, int]], partitions: int
) -> dict[str, int]:
    """Re-reads and skips of every group resuming on B at its last checkpoint."""
    last: dict[tuple[str, str, int], Checkpoint] = {}
    for cp, _ts in checkpoints:
        last[(cp.group, cp.topic, cp.partition)] = cp
    reread = skipped = untranslated = 0
    for group, offsets in positions.items():
        for (topic, p), position in offsets.items():
            remote = rep.remote(topic)
            cp = last.get((group, remote, p))
            if cp is None or cp.upstream_offset != position:
                untranslated += 1
                continue
            offs, seqs = found.offsets.get((remote, p), array("q")), found.seqs.get((remote, p), array("q"))
            idx = bisect.bisect_left(offs, cp.downstream_offset)
            reread += sum(1 for s in seqs[idx:] if s // partitions < position)
            skipped += sum(1 for s in seqs[:idx] if s // partitions >= position)
    return {"reread": reread, "skipped": skipped, "group_partitions_without_checkpoint": untranslated}


def freshness(bootstrap: str, committed_at: dict[str, float], positions: Positions, wait_s: float) -> dict[str, Any]:
    """Wait for each group's checkpoints at its new positions; commit time to checkpoint time, in s."""
    wanted = {(g, rep.remote(t), p): o for g, offs in positions.items() for (t, p), o in offs.items()}
    keys_of: dict[str, list[tuple[str, str, int]]] = {}
    for key in wanted:
        keys_of.setdefault(key[0], []).append(key)
    arrived: dict[str, float] = {}
    deadline = time.monotonic() + wait_s
    while True:
        seen: dict[tuple[str, str, int], int] = {}
        for cp, ts in read_checkpoints(bootstrap):
            key = (cp.group, cp.topic, cp.partition)
            if wanted.get(key) == cp.upstream_offset and key not in seen:
                seen[key] = ts
        for g in positions:
            keys = keys_of.get(g, []) if g not in arrived else []
            if keys and all(k in seen for k in keys):
                arrived[g] = max(seen[k] for k in keys) / 1000
        if len(arrived) == len(positions) or time.monotonic() > deadline:
            break
        time.sleep(2)
    delays = sorted(max(0.0, arrived[g] - committed_at[g]) for g in arrived)
    out: dict[str, Any] = {"groups": len(positions), "arrived": len(arrived), "missing": len(positions) - len(arrived)}
    if delays:
        out.update(
            p50_s=round(_pct(delays, 50), 2),
            p99_s=round(_pct(delays, 99), 2),
            max_s=round(delays[-1], 2),
            mean_s=round(statistics.fmean(delays), 2),
        )
    return out


def _timed(fn: Any) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def _await_checkpoints(bootstrap: str, positions: Positions, *, timeout_s: float, quiet_s: float = 30) -> int:
    """Wait until every group has a checkpoint at its position, or the time is up, or ``quiet_s``
    passed without one more (MM2 never checkpoints some groups); how many have."""
    wanted = {(g, rep.remote(t), p, o) for g, offs in positions.items() for (t, p), o in offs.items()}
    deadline = time.monotonic() + timeout_s
    last, since = -1, time.monotonic()
    while True:
        have = {(cp.group, cp.topic, cp.partition, cp.upstream_offset) for cp, _ts in read_checkpoints(bootstrap)}
        done = {g for g, _t, _p, _o in wanted} - {g for g, t, p, o in wanted if (g, t, p, o) not in have}
        if len(done) != last:
            last, since = len(done), time.monotonic()
        if len(done) == len(positions) or time.monotonic() > deadline or (done and time.monotonic() - since > quiet_s):
            return len(done)
        time.sleep(2)


def _pct(values: Sequence[float], q: float) -> float:
    rank = max(1, min(len(values), round(q / 100 * len(values) + 0.5)))
    return values[rank - 1]


def offer(
    bootstrap: str, topics: list[str], partitions: int, size: int, *, first_seq: int, rate: float, seconds: float
) -> int:
    """Produce ``rate`` records/s for ``seconds`` round robin over every partition of every topic, on librdkafka.

    Keys ``b"L%011d"``; the value starts with the record's timestamp (ms), as in the default
    scenario's latency load. Records go out late when the machine starves the loop, never early.
    librdkafka sends one partition per produce request: at 1,000 partitions its own queue is most
    of the measured latency, which is why the scenario's load comes from :class:`JavaLoad`.
    """
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer = wl._producer(bootstrap)
    targets = [(t, p) for p in range(partitions) for t in topics]
    filler = bytes(max(size - 8, 0))
    total = int(rate * seconds)
    start = time.monotonic()
    sent = 0
    while sent < total:
        due = min(total, int((time.monotonic() - start) * rate) + 1)
        while sent < due:
            topic, p = targets[sent % len(targets)]
            ts = int(time.time() * 1000)
            wl._produce(
                producer,
                topic,
                key=b"L%011d" % (first_seq + sent),
                value=wl._TS.pack(ts) + filler,
                partition=p,
                timestamp=ts,
                headers=wl.HEADERS,
                on_delivery=on_delivery,
            )
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    producer.flush(120)
    if errors:
        raise RuntimeError(f"offering load: {len(errors)} records failed, first: {errors[0]}")
    return sent


def measure_latency(
    run_mod: Any,
    system: rep.Replicator,
    run_dir: Path,
    boots: dict[str, str],
    topics: dict[str, int],
    s: Any,
) -> dict[str, Any]:
    """B emptied, the system started and caught up with A, then the paced load; latency of each record.

    Run after every system's other phases: the load it appends to A would otherwise be copied
    (and counted) by the next system's throughput run.
    """
    b = boots["B"]
    remotes = {rep.remote(t): n for t, n in topics.items()}
    wl.delete_topics(b)
    wl.delete_groups(b)
    create_topics(b, remotes, run_mod.APPEND_TIME)
    spec = ",".join(topics) if system.name == "limit" else f"{PREFIX}.*"
    # A fresh start (sparkmirror: a new Spark checkpoint; it would resume where its last run stopped).
    run_dir = run_dir / "latency"
    run_dir.mkdir(parents=True, exist_ok=True)
    tree = run_mod.Tree(system.command(run_dir, spec, count=None), run_dir, "latency")
    try:
        on_a = record_counts(boots["A"], topics)  # 0 after truncate(): the warm-up is the start-up check
        last, since = -1, time.monotonic()
        while True:  # caught up: B holds at least what A holds, and stopped growing
            have = sum(end_offsets(b, remotes).values())
            if have != last:
                last, since = have, time.monotonic()
            if have >= on_a and time.monotonic() - since > 2:
                break
            if not tree.running() or time.monotonic() - since > s.stall_timeout_s:
                raise RuntimeError(f"{system.name} did not catch up with A ({have} of {on_a}):\n{tree.tail()}")
            time.sleep(1)
        out = latency(
            boots,
            topics,
            s.size,
            s.rate,
            s.latency_seconds,
            s.stall_timeout_s,
            s.warmup_seconds,
            warmup_committed=getattr(s, "warmup_committed", False),
            jvm=system.jvm if getattr(s, "scale_generator", "java") == "java" else None,
            generator_producers=getattr(s, "scale_generator_producers", 1),
        )
    finally:
        stats = tree.stop()
        log.info(
            "%s latency phase: cpu %.1fs, peak rss %s MB",
            system.name,
            stats.get("cpu_s") or 0,
            stats.get("peak_rss_mb"),
        )
    out.update(cpu_s_total=stats.get("cpu_s"), cpu_s_auto_reaped=stats.get("cpu_s_auto_reaped"),
               peak_rss_mb=stats.get("peak_rss_mb"),
               peak_rss_mb_by_role=stats.get("peak_rss_mb_by_role"))  # fmt: skip
    return out


class JavaLoad:
    """The latency load on Java's producer (``bench/jvm/PacedLoad.java``), one JVM for every phase.

    The same records as :func:`offer`; Java's producer puts every ready partition of a broker in one
    produce request, so the load generator's own queue stays out of the measured latency.
    """

    def __init__(
        self, jvm: rep.Jvm, bootstrap: str, topics: list[str], partitions: int, size: int, producers: int = 1
    ) -> None:
        self._stderr = tempfile.TemporaryFile(mode="w+")
        cmd = jvm.command("PacedLoad", bootstrap, ",".join(topics), str(partitions), str(size), str(producers),
                          heap=("-Xmx256m",), log_level="WARN")  # fmt: skip
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                      text=True)  # fmt: skip
        self._answer("ready")

    def _answer(self, expected: str) -> str:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.startswith(expected):
            self.close()
            self._stderr.seek(0)
            raise RuntimeError(
                f"offering load: PacedLoad exited {self._proc.returncode}: {self._stderr.read()[-2000:]}"
            )
        return line

    def offer(self, *, first_seq: int, rate: float, seconds: float) -> int:
        """One paced phase; returns once every record of it is acknowledged."""
        assert self._proc.stdin is not None
        self._proc.stdin.write(f"{first_seq} {rate} {seconds}\n")
        self._proc.stdin.flush()
        answer = self._answer("sent").split()
        log.info("PacedLoad: %s", " ".join(answer))
        return int(answer[1])

    def close(self) -> None:
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        try:
            self._proc.wait(60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _wait_until_b_holds(count: Callable[[], int], want: int, patience_s: float, failure: str) -> None:
    """Poll ``count`` every 0.5 s until it reaches ``want``; fail with ``failure`` after ``patience_s`` of no growth."""
    last, since = -1, time.monotonic()
    while True:
        have = count()
        if have != last:
            last, since = have, time.monotonic()
        if have >= want:
            return
        if time.monotonic() - since > patience_s:
            raise RuntimeError(f"{failure} ({have} of {want} records)")
        time.sleep(0.5)


class _FirstGrowth:
    """When a count first rose above ``base``: polled every 0.5 s in a thread of its own, beside a load
    that blocks."""

    def __init__(self, count: Callable[[], int], base: int) -> None:
        self._count, self._base = count, base
        self._first: float | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="first-growth", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.is_set():
            try:
                if self._count() > self._base:
                    self._first = time.monotonic()
                    return
            except Exception:  # noqa: BLE001 - a failed poll is tried again
                pass
            self._done.wait(0.5)

    def seconds(self) -> float:
        """Seconds since the first growth (0 before it)."""
        return 0.0 if self._first is None else time.monotonic() - self._first

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def latency(
    boots: dict[str, str],
    topics: dict[str, int],
    size: int,
    rate: float,
    seconds: float,
    stall_s: float,
    warmup_s: float = 5,
    warmup_committed: bool = False,
    jvm: rep.Jvm | None = None,
    generator_producers: int = 1,
) -> dict[str, Any]:
    """Offer the latency load to A while the system runs; latency of each record on B.

    ``warmup_committed``: the measured load starts only once B's last stable offsets hold the
    warm-up too (its transactions committed and their markers written), and the wait is reported
    (``warmup_commit_wait_ms``): an exactly-once writer's first commit over fresh target partitions
    costs the broker a one-time stall (docs/performance.md) that would otherwise fall in the window.
    """
    partitions = next(iter(topics.values()))
    java = JavaLoad(jvm, boots["A"], list(topics), partitions, size, generator_producers) if jvm is not None else None
    try:

        def load(first_seq: int, phase_s: float) -> int:
            if java is not None:
                return java.offer(first_seq=first_seq, rate=rate, seconds=phase_s)
            return offer(boots["A"], list(topics), partitions, size, first_seq=first_seq, rate=rate, seconds=phase_s)

        remotes = {rep.remote(t): n for t, n in topics.items()}
        before = sum(end_offsets(boots["B"], remotes).values())
        before_committed = sum(end_offsets(boots["B"], remotes, committed=True).values())
        # Keys past every record on A: the records of earlier systems' loads are told apart.
        start = sum(end_offsets(boots["A"], topics).values())
        # A warm-up at the same rate, not measured, that B must hold before the measured load starts, and
        # that lasts until the system has been copying for ``warmup_s``: a system that takes longer to start
        # (Spark's start is most of a 30 s warm-up) is then past its start too, and past broker B's first
        # writes to its fresh topics (the kernel zero-fills each new index file at its first page fault:
        # seconds of B's time at 1,000 partitions; docs/performance.md, "The stall at the load's start").
        patience = max(stall_s, 240)

        def on_b() -> int:
            return sum(end_offsets(boots["B"], remotes).values())

        copying = _FirstGrowth(on_b, before)
        warm, phase_s = 0, warmup_s
        try:
            while True:
                warm += load(start + warm, phase_s)
                _wait_until_b_holds(lambda: on_b() - before, warm, patience, "the warm-up load did not reach B")
                copied_s = copying.seconds()
                if copied_s + 1 >= warmup_s:  # a second short of it is not worth another phase
                    break
                phase_s = max(1.0, warmup_s - copied_s)
        finally:
            copying.stop()
        commit_wait_ms = None
        if warmup_committed:
            waited = time.monotonic()
            _wait_until_b_holds(
                lambda: sum(end_offsets(boots["B"], remotes, committed=True).values()) - before_committed,
                warm, patience, "the warm-up was not committed on B",
            )  # fmt: skip
            commit_wait_ms = round((time.monotonic() - waited) * 1000)
        first_seq = start + warm
        t0 = time.monotonic()
        offered = load(first_seq, seconds)
        offered_rate = offered / (time.monotonic() - t0)
        offered += warm
        # Every offered record on B (high watermarks count transaction markers too: the read-back decides).
        last, since = -1, time.monotonic()
        while True:
            have = on_b() - before
            if have != last:
                last, since = have, time.monotonic()
            if have >= offered and time.monotonic() - since > 2:
                break
            if time.monotonic() - since > stall_s:
                break
            time.sleep(1)
        found = scan(boots["B"], remotes, latency_from=first_seq)
        lat = sorted(found.latencies_ms)
        out: dict[str, Any] = {
            "offered": offered - warm,
            "warmup_records": warm,
            "copying_before_load_s": round(copied_s, 1),
            "warmup_commit_wait_ms": commit_wait_ms,
            "rate": rate,
            "offered_rate": round(offered_rate, 1),
            "partitions": sum(topics.values()),
            "seconds": seconds,
            "on_target": found.latency_records,
        }
        if lat:
            out.update(
                p50_ms=_pct(lat, 50), p99_ms=_pct(lat, 99), max_ms=lat[-1], mean_ms=round(statistics.fmean(lat), 1)
            )
        return out

    finally:
        if java is not None:
            java.close()


# -- one system ------------------------------------------------------------------


def measure(
    run_mod: Any,
    system: rep.Replicator,
    run_dir: Path,
    boots: dict[str, str],
    scale: Scale,
    per_topic: dict[str, int],
    positions: Positions,
    seed: int,
    common: rep.Common,
    stall_s: float,
    *,
    checkpoints: bool = True,
) -> dict[str, Any]:
    """One system on one layout: throughput, then (``checkpoints``, for systems that translate) the
    checkpoint freshness and failover phases with the system running."""
    a, b = boots["A"], boots["B"]
    topics = dict.fromkeys(per_topic, scale.partitions)
    remotes = {rep.remote(t): scale.partitions for t in topics}
    total = sum(per_topic.values())
    wl.delete_topics(b)
    wl.delete_groups(b)
    create_topics(b, remotes, run_mod.APPEND_TIME)
    spec = scale.spec(system)
    if positions:
        commit_groups(a, positions)  # every system starts from the groups' first positions
    result: dict[str, Any] = {"ok": True, "failures": [], "partitions": scale.total_partitions, "records": total}
    Tree = run_mod.Tree
    tree = Tree(system.command(run_dir, spec, count=total), run_dir, "throughput")
    if system.exits_when_done:
        stats = tree.wait(timeout_s=max(1800.0, total / 200))
    else:
        # MM2: until B holds every record, then the checkpoint phases in the same process.
        stats = None
        last, since = -1, time.monotonic()
        while True:
            have = sum(end_offsets(b, remotes).values())
            if have != last:
                last, since = have, time.monotonic()
            if have >= total or not tree.running() or time.monotonic() - since > stall_s:
                break
            time.sleep(1)
    found = scan(b, remotes)
    result.update(
        on_target=found.records,
        distinct=found.distinct,
        duplicates=found.records - found.distinct,
        lost=total - found.distinct,
        not_append_time=found.not_append_time,
    )
    first, last_ms = found.first_append_ms, found.last_append_ms
    if first is not None and last_ms is not None and last_ms > first and result["lost"] == 0:
        result.update(
            transfer_s=round((last_ms - first) / 1000, 3),
            records_per_s=round(total / ((last_ms - first) / 1000), 1),
            window_too_short=(last_ms - first) / 1000 < MIN_WINDOW_S,
        )
    if system.translates and not checkpoints and stats is None:
        stats = tree.stop()  # MM2 in the sweep: throughput only
    if system.translates and checkpoints:
        if system.exits_when_done:
            # sparkmirror: a running mirror for the checkpoint phases.
            tree = Tree(system.command(run_dir, spec, count=None), run_dir, "checkpoints")
        # Running and checkpointing (not still starting): a probe group new to it is checkpointed.
        probe = {f"bench-probe-{system.name}": {(next(iter(topics)), 0): 1}}
        commit_groups(a, probe)
        result["start_to_first_checkpoint_s"] = round(
            _timed(lambda: _await_checkpoints(b, probe, timeout_s=300, quiet_s=300)), 1
        )
        # Its passes over the groups: every group checkpointed at its first position.
        initial = _await_checkpoints(b, positions, timeout_s=240)
        result["groups_checkpointed_before_moving"] = initial
        # The same moves for every system (its own generator, the same seed).
        moved = choose_positions(random.Random(seed), scale, end_offsets(a, topics), earlier=positions)
        committed_at = commit_groups(a, moved)
        result["checkpoint_freshness"] = freshness(
            b, committed_at, moved, common.checkpoint_interval_s + scale.freshness_wait_s
        )
        result["failover"] = failover(found, moved, read_checkpoints(b), scale.partitions)
        stats_cp = tree.stop()
        result["checkpoint_phase_peak_rss_mb"] = stats_cp.get("peak_rss_mb")
        result["checkpoint_phase_peak_rss_mb_by_role"] = stats_cp.get("peak_rss_mb_by_role")
        if stats is None:
            stats = stats_cp
    assert stats is not None
    result.update(
        cpu_s_total=stats.get("cpu_s"),
        cpu_s_auto_reaped=stats.get("cpu_s_auto_reaped"),
        peak_rss_mb=stats.get("peak_rss_mb"),
        peak_rss_mb_by_role=stats.get("peak_rss_mb_by_role"),
        exit_code=stats.get("exit_code"),
    )
    samples = stats.get("samples") or []
    if first is not None and last_ms is not None and samples:
        # From the system's start to the first record appended on B; CPU of the tree over the transfer.
        result["first_record_s"] = round(first / 1000 - stats["start"], 2)
        cpu_first, cpu_last = run_mod.at(samples, first / 1000, 1), run_mod.at(samples, last_ms / 1000, 1)
        result["cpu_s_transfer"] = round(cpu_last - cpu_first, 2)
        if result.get("records_per_s"):
            result["cpu_us_per_record"] = round((cpu_last - cpu_first) / total * 1e6, 1)
    if result["lost"]:
        result["failures"].append(f"lost {result['lost']} records")
    if result["not_append_time"]:
        result["failures"].append(f"{result['not_append_time']} records on B without LogAppendTime")
    result["ok"] = not result["failures"]
    return result


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return None if not present else statistics.median(present)


def _driver_mb(by_role: dict[str, float] | None) -> float | None:
    """The driver's peak: the sparkmirror process (and its helpers) plus Spark's JVM, which in
    ``local[*]`` mode holds the driver and runs the executors' tasks (sum of the two peaks)."""
    if not by_role or "driver" not in by_role:
        return None  # a JVM alone (MM2, the limit loop): no driver apart from it
    return round(by_role.get("driver", 0.0) + by_role.get("jvm", 0.0), 1)


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A system's figures over its runs (medians); a run that lost records or failed fails the system."""

    def get(r: dict[str, Any], *path: str) -> Any:
        cur: Any = r
        for key in path:
            cur = (cur or {}).get(key)
        return cur

    def med(*path: str) -> float | None:
        return _median(get(r, *path) for r in runs)

    failed = not runs or any(not r.get("ok") for r in runs)
    roles = [r.get("peak_rss_mb_by_role") for r in runs] + [r.get("checkpoint_phase_peak_rss_mb_by_role")
                                                            for r in runs]  # fmt: skip
    out: dict[str, Any] = {
        "failed": failed,
        "failures": [f for r in runs for f in r.get("failures", [])],
        "runs": len(runs),
        "records_per_s": None if failed else med("records_per_s"),
        "transfer_s": med("transfer_s"),
        "window_too_short": any(r.get("window_too_short") for r in runs),
        "first_record_s": med("first_record_s"),
        "cpu_s_transfer": med("cpu_s_transfer"),
        "cpu_us_per_record": med("cpu_us_per_record"),
        "cpu_s_total": med("cpu_s_total"),
        "peak_rss_mb": max((r.get("peak_rss_mb") or 0 for r in runs), default=None),
        "peak_rss_mb_driver": max((_driver_mb(x) or 0 for x in roles), default=None) or None,
        "peak_rss_mb_python_workers": max(((x or {}).get("python_workers") or 0 for x in roles), default=None) or None,
        "lost": max((r.get("lost") or 0 for r in runs), default=0),
        "duplicates": max((r.get("duplicates") or 0 for r in runs), default=0),
        "latency_p50_ms": med("latency", "p50_ms"),
        "latency_p99_ms": med("latency", "p99_ms"),
        "latency_rate": med("latency", "offered_rate"),
        "latency_peak_rss_mb": max((get(r, "latency", "peak_rss_mb") or 0 for r in runs), default=None) or None,
        "freshness_p50_s": med("checkpoint_freshness", "p50_s"),
        "freshness_p99_s": med("checkpoint_freshness", "p99_s"),
        "freshness_groups": med("checkpoint_freshness", "groups"),
        "freshness_arrived": med("checkpoint_freshness", "arrived"),
        "reread_after_failover": med("failover", "reread"),
        "skipped_after_failover": med("failover", "skipped"),
        "group_partitions_without_checkpoint": med("failover", "group_partitions_without_checkpoint"),
        "start_to_first_checkpoint_s": med("start_to_first_checkpoint_s"),
    }
    return out


def result_path(results: Path, day: str, name: str = "scale") -> Path:
    """``<day>-<name>.json``, or ``<day>-<name>-<n>.json`` when earlier runs of the day are there (kept).
    ``name``: ``scale``, or ``scale-spark-cluster`` for a run on a Spark cluster (a file of its own)."""
    path, n = results / f"{day}-{name}.json", 1
    while path.exists():
        n += 1
        path = results / f"{day}-{name}-{n}.json"
    return path


def settle(seconds: float) -> None:
    """Written pages to disk, then a pause, before each system: the workload's load (gigabytes at the
    issue's size) and the previous system's copy are written back now, not during the next system's
    measurement. Without it, sparkmirror measured 2 s after a 10 M load copied its first two batches
    at about half the rate of its last three (docs/performance.md)."""
    os.sync()
    time.sleep(seconds)


def run_systems(
    run_mod: Any,
    systems: list[rep.Replicator],
    workdir: Path,
    boots: dict[str, str],
    scale: Scale,
    per_topic: dict[str, int],
    positions: Positions,
    s: Any,
    common: rep.Common,
    *,
    checkpoints: bool,
    label: str,
    into: dict[str, list[dict[str, Any]]],
    after_each: Any,
    spark_cluster: Any = None,
) -> None:
    """Every system ``s.runs`` times on one layout; each result goes into ``into``, then ``after_each()``.
    On a Spark standalone cluster (``spark_cluster``) sparkmirror's executors are sampled apart."""
    results = into
    for run in range(1, s.runs + 1):
        for system in systems:
            run_dir = workdir / f"{label}-run{run}-{system.name}"
            run_dir.mkdir(parents=True)
            log.info("%s run %d/%d: %s", label, run, s.runs, system.name)
            settle(s.settle_seconds)
            sampler = None
            if spark_cluster is not None and isinstance(system, rep.Sparkmirror):
                from sparkcluster import ExecutorSampler

                state = spark_cluster.status()
                sampler = ExecutorSampler([w.pid for w in state.workers if w.pid]).start()
            try:
                r = measure(run_mod, system, run_dir, boots, scale, per_topic, positions, s.seed + 1, common,
                            s.stall_timeout_s, checkpoints=checkpoints)  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - one system's failure must not end the benchmark
                log.exception("%s failed", system.name)
                r = {"ok": False, "failures": [f"{type(exc).__name__}: {exc}"[:2000]]}
            finally:
                run_mod.Tree.stop_all()
                if sampler is not None:
                    sampler.stop()
            if sampler is not None:
                # The executors are not in the driver's process tree (cpu_s_total, peak_rss_mb).
                r["spark_executors"] = sampler.result()
            r["run"] = run
            results[system.name].append(r)
            log.info("%s run %d %s: %s", label, run, system.name, json.dumps(r))
            after_each()


def main(
    run_mod: Any, s: Any, scale: Scale, workdir: Path, boots: dict[str, str], jvm: rep.Jvm, spark_cluster: Any = None
) -> Path:
    """``spark_cluster``: the Spark standalone cluster sparkmirror runs on (``--spark-cluster``), whose
    executors are measured beside the driver's process tree; None when there is none to measure."""
    a = boots["A"]
    started = time.monotonic()
    per_topic = scale.records_per_topic(s.records)
    topics = dict.fromkeys(per_topic, scale.partitions)
    t0 = time.monotonic()
    create_topics(a, topics)
    load(a, per_topic, scale.partitions, s.size, s.seed)
    ends = end_offsets(a, topics)
    rnd = random.Random(s.seed)
    positions = choose_positions(rnd, scale, ends)
    commit_groups(a, positions)
    log.info(
        "scale: %d topics x %d partitions, %d records (%d hot topics), %d groups, loaded in %.1fs",
        scale.topics,
        scale.partitions,
        s.records,
        scale.hot,
        scale.groups,
        time.monotonic() - t0,
    )
    common = rep.Common(
        bootstraps=boots,
        partitions=scale.partitions,
        linger_ms=s.linger_ms,
        batch_size=s.batch_size,
        compression=s.compression,
        tasks_max=s.tasks_max,
        limit_threads=s.limit_threads,
        mm2_extra=run_mod._props(s.mm2_props),
        sparkmirror_extra=run_mod._props(s.sparkmirror_props),
        sparkmirror_debug=s.sparkmirror_debug,
        spark_master=s.spark_master,
    )
    systems = [r for r in rep.all_replicators(common, jvm) if r.name in s.systems]
    load_before = run_mod.concurrent_load()
    run_mod.RESULTS.mkdir(exist_ok=True)
    name = "scale-spark-cluster" if s.spark_master else "scale"
    path = result_path(run_mod.RESULTS, dt.date.today().isoformat(), name)
    versions = run_mod.versions(jvm)
    results: dict[str, list[dict[str, Any]]] = {r.name: [] for r in systems}
    sweep: dict[str, dict[str, Any]] = {}

    def save(phase: str) -> None:
        """Write what is measured so far (``complete`` once every phase ran): a run cut short
        still leaves its figures."""
        summary = {name: summarise(runs) for name, runs in results.items() if runs}
        points = {
            **sweep,
            str(scale.total_partitions): {
                "topics": scale.topics,
                "partitions_per_topic": scale.partitions,
                "records": s.records,
                "summary": summary,
                "main": True,
            },
        }
        out = {
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": "bench/run.py " + " ".join(sys.argv[1:]),
            "scenario": "scale",
            "complete": phase == "complete",
            "phase": phase,
            "scale": dataclasses.asdict(scale),
            "settings": {k: v for k, v in dataclasses.asdict(s).items() if k not in ("base_port", "keep")},
            "records_per_topic": {"hot": per_topic[scale.names()[0]], "cold": per_topic[scale.names()[-1]]},
            "min_window_s": MIN_WINDOW_S,
            "machine": run_mod.machine(),
            "machine_load": {"before": load_before, "after": run_mod.concurrent_load()},
            "versions": versions,
            "sparkmirror_code": run_mod.source_state(),
            "checkpoint_interval_s": common.checkpoint_interval_s,
            "sparkmirror_spark_master": s.spark_master or "local[*]",
            "systems": results,
            "summary": summary,
            "sweep": dict(sorted(points.items(), key=lambda kv: int(kv[0]))),
            "elapsed_s": round(time.monotonic() - started, 1),
        }
        path.write_text(json.dumps(out, indent=2) + "\n")
        log.info("wrote %s (%s)", path, phase)

    run_systems(run_mod, systems, workdir, boots, scale, per_topic, positions, s, common, checkpoints=True,
                label="scale", into=results, after_each=lambda: save("main phases"),
                spark_cluster=spark_cluster)  # fmt: skip
    if s.latency_seconds > 0:
        truncate(a, topics)
        for run in range(1, s.runs + 1):
            for system in systems:
                run_dir = workdir / f"scale-run{run}-{system.name}"
                log.info("scale run %d/%d: %s latency", run, s.runs, system.name)
                target = results[system.name][run - 1]
                try:
                    target["latency"] = measure_latency(run_mod, system, run_dir, boots, topics, s)
                except Exception as exc:  # noqa: BLE001 - reported with the run
                    log.exception("%s latency failed", system.name)
                    target.setdefault("failures", []).append(f"latency: {type(exc).__name__}: {exc}"[:2000])
                    target["ok"] = False
                finally:
                    run_mod.Tree.stop_all()
                log.info("scale run %d %s latency: %s", run, system.name, json.dumps(target.get("latency")))
                save("latency")
    # The throughput sweep: the same systems on layouts of other partition counts, topics of their own.
    for n in sorted(set(s.partitions_sweep) - {scale.total_partitions}):
        point = scale.sweep_point(n)
        point_records = point.records_per_topic(s.sweep_records or s.records)
        point_topics = dict.fromkeys(point_records, point.partitions)
        create_topics(a, point_topics)
        load(a, point_records, point.partitions, s.size, s.seed)
        log.info("sweep: %d partitions (%d x %d), %d records", n, point.topics, point.partitions,
                 sum(point_records.values()))  # fmt: skip
        point_runs: dict[str, list[dict[str, Any]]] = {r.name: [] for r in systems}
        entry = sweep[str(n)] = {
            "topics": point.topics,
            "partitions_per_topic": point.partitions,
            "records": sum(point_records.values()),
            "systems": point_runs,
            "summary": {},
        }

        def point_done(
            runs: dict[str, list[dict[str, Any]]] = point_runs, e: dict[str, Any] = entry, n: int = n
        ) -> None:
            e["summary"] = {name: summarise(r) for name, r in runs.items() if r}
            save(f"sweep {n}")

        run_systems(run_mod, systems, workdir, boots, point, point_records, {}, s, common, checkpoints=False,
                    label=f"sweep{n}", into=point_runs, after_each=point_done, spark_cluster=spark_cluster)  # fmt: skip
        wl.delete_topics(a, keep=list(topics))
    save("complete")
    return path
