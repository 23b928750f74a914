"""The streaming engine (``sparkmirror.engine = streaming``): long-running tasks copy as records arrive.

Every field arrives on B; the offset map pairs each source offset with its target offset, across
runs; the progress on the target is each partition's next source offset (at least once and exactly
once); a running flow copies records produced while it runs, and stops on request; a task that
fails is retried by Spark from the progress on the target, copying at most a commit interval again.
"""

from __future__ import annotations

import os
import signal
import statistics
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafka_helpers import (
    Rec,
    create_topics,
    produce,
    read_partition,
    run_cli,
    running_mirror,
    unique,
    wait_for,
    write_config,
)
from kafka_helpers import varied_records as _records
from sparkmirror.config import load_config
from sparkmirror.core.naming import progress_group
from sparkmirror.core.offsetmap import Method
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.groups import committed_offsets
from sparkmirror.offsets.store import read_offset_map
from sparkmirror.pipeline.driver.mirror import Mirror

EXACTLY_ONCE = "exactly.once.source.support = enabled\n"


def _config(bootstraps, tmp_path: Path, topic: str, extra: str = "") -> Path:
    return write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=f"A->B.topics = {topic}\nsparkmirror.commit.interval.ms = 100\n"
        f"sync.topic.configs.enabled = false\n{extra}",
    )


def _check_copied(bootstraps, cfg: Path, topic: str, sent: dict[int, list[Rec]], *, exactly_once: bool = False) -> None:
    """B holds exactly ``sent`` (once each, in order); the offset map and the progress say so."""
    remote = f"A.{topic}"
    flow = load_config(cfg).flows[0]
    omap = read_offset_map(FlowClients(flow).target_consumer, flow)
    progress = committed_offsets(
        {"bootstrap.servers": bootstraps["B"]}, progress_group("A", "B"), [(remote, p) for p in sent]
    )
    for p, recs in sent.items():
        got = read_partition(bootstraps["B"], remote, p)
        assert [(r.key, r.value, tuple(r.headers), r.timestamp) for r in got] == [
            (r.key, r.value, tuple(r.headers), r.timestamp) for r in recs
        ], f"{remote}[{p}]"
        for upstream in (0, len(recs) // 2, len(recs) - 1):
            found = omap.translate(topic, p, upstream)
            assert found.method == Method.EXACT, found
            if not exactly_once:  # exactly once, transaction markers sit between the records on B
                assert found.downstream_offset == upstream, f"{topic}[{p}] offset {upstream}"
        assert progress[(remote, p)] == len(recs)


#: At least once, a task writes with one producer per so many partitions: here each its own.
PRODUCER_PER_PARTITION = "sparkmirror.partitions.per.producer = 1\n"
#: The tasks read and write with Kafka's Java clients, in the executor's transport JVM.
JAVA_TRANSPORT = "sparkmirror.transport = java\n"
#: Each test of a task's reads and writes, with each transport.
TRANSPORTS = pytest.mark.parametrize("transport", ["", JAVA_TRANSPORT], ids=["librdkafka", "java"])


@pytest.mark.parametrize(
    "mode",
    [
        "at-least-once",
        "at-least-once, a producer per partition",
        "at-least-once, Java transport",
        "exactly-once",
        "exactly-once, Java transport",
        "exactly-once, librdkafka reads, Java writes",
    ],
)
def test_streaming_engine_copies_every_field_and_keeps_its_progress_on_the_target(
    bootstraps, spark, tmp_path: Path, mode: str
) -> None:
    topic = unique("stream")
    create_topics(bootstraps["A"], {topic: 3})
    sent = {p: _records(p, 200 + 50 * p) for p in range(3)}
    for p, recs in sent.items():
        produce(bootstraps["A"], topic, p, recs)
    extra = {
        "exactly-once": EXACTLY_ONCE,
        "at-least-once, a producer per partition": PRODUCER_PER_PARTITION,
        "at-least-once, Java transport": JAVA_TRANSPORT,
        "exactly-once, Java transport": EXACTLY_ONCE + JAVA_TRANSPORT,
        "exactly-once, librdkafka reads, Java writes": EXACTLY_ONCE + "sparkmirror.transport = java-writes\n",
    }
    cfg = _config(bootstraps, tmp_path, topic, extra.get(mode, ""))
    Mirror(load_config(cfg), once=True).run()
    _check_copied(bootstraps, cfg, topic, sent, exactly_once=mode.startswith("exactly-once"))
    # A second run continues from the target: nothing copied twice, the map extended.
    for p in range(3):
        more = _records(p, 40, first=len(sent[p]))
        produce(bootstraps["A"], topic, p, more)
        sent[p] = sent[p] + more
    Mirror(load_config(cfg), once=True).run()
    _check_copied(bootstraps, cfg, topic, sent, exactly_once=mode.startswith("exactly-once"))


@TRANSPORTS
def test_streaming_engine_copies_while_it_runs_and_stops_on_request(
    bootstraps, spark, tmp_path: Path, transport: str
) -> None:
    topic = unique("streamrun")
    create_topics(bootstraps["A"], {topic: 2})
    cfg = _config(bootstraps, tmp_path, topic, transport)
    sent: dict[int, list[Rec]] = {0: [], 1: []}
    with running_mirror(cfg):
        for round_ in range(3):
            _copy_round(bootstraps, topic, sent, 30, round_)
    _check_copied(bootstraps, cfg, topic, sent)


def _count(bootstrap: str, topic: str, partition: int) -> int:
    """Records in ``topic[partition]`` (-1 while the topic does not exist yet)."""
    try:
        return len(read_partition(bootstrap, topic, partition, timeout_s=5))
    except Exception:  # noqa: BLE001 - the mirror has not made the remote topic yet
        return -1


def _copy_round(bootstraps, topic: str, sent: dict[int, list[Rec]], n: int, round_: int) -> None:
    """``n`` more records into each partition of ``sent`` (kept there), then wait until B holds them all."""
    for p in sent:
        recs = _records(p, n, first=len(sent[p]))
        produce(bootstraps["A"], topic, p, recs)
        sent[p] += recs
    wait_for(
        lambda: all(_count(bootstraps["B"], f"A.{topic}", p) == len(sent[p]) for p in sent),
        timeout_s=60,
        what=f"round {round_} on B",
    )


@TRANSPORTS
def test_a_failed_streaming_task_is_retried_from_the_progress_on_the_target(
    bootstraps, spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    topic = unique("streamfail")
    create_topics(bootstraps["A"], {topic: 1})
    remote = f"A.{topic}"
    # The task's first attempt fails once it has handed 1,000 records to its producer in all.
    monkeypatch.setenv("SPARKMIRROR_TEST_FAIL_AFTER_RECORDS", "1000")
    cfg = _config(bootstraps, tmp_path, topic, transport)
    first, second = _records(0, 600), _records(0, 600, first=600)
    with running_mirror(cfg):
        produce(bootstraps["A"], topic, 0, first)
        wait_for(lambda: _count(bootstraps["B"], remote, 0) == 600, timeout_s=60, what="the first 600 on B")
        time.sleep(1)  # committed (every 100 ms)
        produce(bootstraps["A"], topic, 0, second)  # the attempt fails while writing these
        wait_for(lambda: _count(bootstraps["B"], remote, 0) >= 1200, timeout_s=120, what="the rest on B")
        time.sleep(2)
    values = [r.value for r in read_partition(bootstraps["B"], remote, 0)]
    # Nothing lost; the retry wrote again what the failed attempt wrote after its last commit, no more.
    assert {r.value for r in first + second} <= set(values)
    again = len(values) - 1200
    assert 0 < again <= 600, again


#: Most records A->B may copy while one record of the other flow goes through, at the median of the
#: samples (ten runs alone in session 42: every sample 0-30,003, medians 0-20,002; one CI run had a
#: single sample of 64,250 among [19889, 40147, 64250, 10001, 40004]). The median is not decided by
#: one scheduling hiccup of a loaded host; a starved flow fails every sample, or the backlog is copied
#: before the second one is timed.
_FAIR_BOUND = 60_000
#: Most records A->B may copy while any one record of the other flow goes through: a tenth of the backlog.
_FAIR_ANY = 150_000


@pytest.mark.parametrize("topology", ["A->B with B->A", "A->B and C->B"])
def test_each_flow_has_tasks_of_its_own_and_a_backlog_does_not_delay_another(
    bootstraps, spark, tmp_path: Path, topology: str
) -> None:
    """Two flows in one process (the session's two task slots, one task each): while A->B copies a
    backlog, the other flow's records each arrive while A->B copies fewer than :data:`_FAIR_BOUND`
    records at the median and :data:`_FAIR_ANY` at most, measured in A->B's progress. A->B starts
    paused and is resumed once the other flow's task runs, so the whole backlog waits when the timing
    starts, however late that task starts; the backlog outlasts the timing. The other flow: B->A, or
    C->B into the same target (C is a second alias of A's brokers, with its own remote topics, offset
    map and lease on B)."""
    big, small = unique("backlog"), unique("trickle")
    y_source, y_alias = ("B", "B") if topology == "A->B with B->A" else ("A", "C")
    y_target = "A" if y_alias == "B" else "B"
    y = f"{y_alias}->{y_target}"
    create_topics(bootstraps["A"], {big: 2})
    create_topics(bootstraps[y_source], {small: 1})
    backlog = 1_500_000
    p = Producer({"bootstrap.servers": bootstraps["A"], "linger.ms": 20, "batch.size": 262144})
    for i in range(backlog):
        while True:
            try:
                p.produce(big, b"x" * 40, partition=i % 2)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        extra=(
            f"clusters = A, B, C\nC.bootstrap.servers = {bootstraps['A']}\n"
            f"A->B.topics = {big}\n{y}.enabled = true\n{y}.topics = {small}\n"
        ),
    )
    trickle = Producer({"bootstrap.servers": bootstraps[y_source], "linger.ms": 0})
    watch = Consumer({"bootstrap.servers": bootstraps["B"], "group.id": unique("w")})
    reader = Consumer({"bootstrap.servers": bootstraps[y_target], "group.id": unique("r"), "enable.auto.commit": False})

    def copied() -> int:
        try:
            return sum(watch.get_watermark_offsets(TopicPartition(f"A.{big}", q), timeout=10)[1] for q in range(2))
        except Exception:  # noqa: BLE001 - the remote topic is not made yet
            return 0

    def arrives(n: int) -> None:
        trickle.produce(small, str(n).encode(), partition=0)
        trickle.flush(10)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for msg in reader.consume(10, timeout=0.05):
                if msg.error() is None and int(msg.value()) == n:
                    return
        raise AssertionError(f"{y}'s record {n} did not arrive within 60 s")

    # A->B starts paused, so its whole backlog is still there when the other flow's task is known to run
    done = run_cli("pause", str(cfg), "--flow", "A->B")
    assert done.returncode == 0, done.stdout + done.stderr
    waited: list[int] = []
    with running_mirror(cfg):
        remote = f"{y_alias}.{small}"
        wait_for(lambda: _count(bootstraps[y_target], remote, 0) >= 0, timeout_s=120, what=f"{y}'s remote topic")
        reader.assign([TopicPartition(remote, 0, 0)])
        arrives(0)  # the other flow's task is running
        done = run_cli("resume", str(cfg), "--flow", "A->B")
        assert done.returncode == 0, done.stdout + done.stderr
        wait_for(lambda: copied() > 0, timeout_s=120, what="A->B to copy")
        for n in range(1, 6):
            before = copied()
            if before >= backlog:
                break
            arrives(n)
            waited.append(copied() - before)
    reader.close()
    watch.close()
    assert len(waited) >= 2, f"A->B copied its whole backlog before {y}'s records were timed: {waited}"
    assert statistics.median(waited) <= _FAIR_BOUND, waited
    assert max(waited) <= _FAIR_ANY, waited


def _pyspark_workers() -> dict[int, int]:
    """This test process's PySpark Python workers (forked by its daemon): pid -> parent pid."""
    found = _processes(b"pyspark.daemon")
    return {pid: ppid for pid, ppid in found.items() if ppid in found}  # the daemon's children only


def _transport_jvms() -> dict[int, int]:
    """The transport JVMs of this test process's Spark application: pid -> parent pid. Told apart by
    the application's files directory in their command line (the JVM runs in a session of its own, so
    it is no descendant once the worker that started it is gone)."""
    from pyspark import SparkFiles

    return _processes(b"TransportServer", str(Path(SparkFiles.getRootDirectory()).resolve()).encode(), mine=False)


def _processes(*markers: bytes, mine: bool = True) -> dict[int, int]:
    """Processes whose command line holds every one of ``markers``: pid -> parent pid; with ``mine``,
    this test process's descendants only: another test run on the host (a second pytest worker) has
    workers of its own, which this one must neither kill nor count."""
    parents: dict[int, int] = {}
    marked: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents[int(entry.name)] = ppid
        if all(m in cmdline for m in markers):
            marked.add(int(entry.name))
    me = os.getpid()

    def descends(pid: int) -> bool:
        seen: set[int] = set()
        while pid > 1 and pid not in seen:
            if pid == me:
                return True
            seen.add(pid)
            pid = parents.get(pid, 0)
        return False

    return {pid: parents[pid] for pid in marked if not mine or descends(parents[pid])}


def _cpu_seconds(pids: Iterable[int]) -> float:
    """User and system CPU seconds of ``pids`` so far (those that still run)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


def _librdkafka_threads(pids: Iterable[int]) -> int:
    """Threads of librdkafka clients (named ``rdk:...``) in these processes."""
    n = 0
    for pid in pids:
        try:
            n += sum(1 for t in Path(f"/proc/{pid}/task").iterdir() if (t / "comm").read_text().startswith("rdk:"))
        except OSError:
            continue
    return n


def _failed_tasks(spark) -> int:
    """Failed task attempts of the stages running now (a running flow's copy job), as Spark counts them."""
    tracker = spark.sparkContext.statusTracker()
    stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
    assert stages, "no stage is running"
    return sum(s.numFailedTasks for s in stages if s is not None)


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_idle_producers_are_closed_and_made_again_at_the_next_record(
    bootstraps, spark, tmp_path: Path, mode: str
) -> None:
    """A producer whose partitions had no record for ``sparkmirror.producer.idle.close.ms`` is closed (its
    librdkafka threads end), at least once all but the first, exactly once a transaction group's with no
    transaction open; their next records go through new producers (exactly once: fencing the id again and
    finding the group's progress as the task committed it), each partition's in order, once each, the
    offset map and the progress continuing."""
    topic = unique("restprod")
    create_topics(bootstraps["A"], {topic: 4})
    exactly_once = mode == "exactly-once"
    # Exactly once, one transactional id (and producer) per partition: each rests.
    layout = EXACTLY_ONCE + "sparkmirror.exactly.once.transactions = 0\n" if exactly_once else PRODUCER_PER_PARTITION
    cfg = _config(bootstraps, tmp_path, topic, layout + "sparkmirror.producer.idle.close.ms = 2000\n")
    sent: dict[int, list[Rec]] = {p: [] for p in range(4)}
    # The workers' librdkafka threads, sampled all along: a producer's live at least 2 s after its records.
    samples: list[int] = []
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.05):
            samples.append(_librdkafka_threads(_pyspark_workers()))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    lows, highs = [], []
    try:
        with running_mirror(cfg):
            for round_ in range(2):
                first = len(samples)
                _copy_round(bootstraps, topic, sent, 25, round_)
                highs.append(max(samples[first:]))
                time.sleep(5)  # idle: the producers rest
                lows.append(samples[-1])
            # No task failed on the way (exactly once, a group's progress found moved would fail one).
            assert _failed_tasks(spark) == 0
    finally:
        sampling.set()
        sampler.join()
    # Two tasks (local[2]) of two partitions, each writing with two producers: at least once the second of
    # each rests when idle, exactly once both; each is made again by the next round (a producer has 3
    # threads or more).
    assert all(high - low >= 6 for high, low in zip(highs, lows, strict=True)), (highs, lows)
    _check_copied(bootstraps, cfg, topic, sent, exactly_once=exactly_once)


def test_an_idle_streaming_flow_does_not_spin(bootstraps, spark, tmp_path: Path) -> None:
    """With nothing to copy, a flow's tasks wait in their consumer: their Python workers use at most 2%
    of a core (issue 27), whatever the commit interval."""
    topic = unique("idle")
    create_topics(bootstraps["A"], {topic: 4})
    produce(bootstraps["A"], topic, 0, _records(0, 10))
    cfg = _config(bootstraps, tmp_path, topic)  # commit interval 100 ms
    # The session's workers before the flow starts: the clients earlier tests left cached in them have an
    # idle cost of their own, which is not this flow's.
    idle_workers = _pyspark_workers()
    base_before = _cpu_seconds(idle_workers)
    time.sleep(10)
    baseline = _cpu_seconds(idle_workers) - base_before
    with running_mirror(cfg):
        wait_for(lambda: _count(bootstraps["B"], f"A.{topic}", 0) == 10, timeout_s=60, what="the records on B")
        time.sleep(3)
        workers = _pyspark_workers()
        assert workers, "no PySpark worker found"
        before = _cpu_seconds(workers)
        time.sleep(10)
        used = _cpu_seconds(workers) - before - baseline
    print(f"idle flow: {used:.2f} CPU seconds in 10 s (the workers' own before it: {baseline:.2f})")
    assert used <= 0.2, f"the idle flow's workers used {used:.2f} CPU seconds in 10 s"


@pytest.mark.parametrize(
    ("transport", "victim"),
    [("", "python worker"), (JAVA_TRANSPORT, "python worker"), (JAVA_TRANSPORT, "transport JVM")],
    ids=["librdkafka", "java", "java-jvm"],
)
def test_a_killed_python_worker_or_transport_jvm_is_replaced_and_its_task_resumes_from_the_target(
    bootstraps, spark, tmp_path: Path, transport: str, victim: str
) -> None:
    """SIGKILL of the Python worker of a streaming task mid-stream (or of the executor's transport JVM,
    whose clients every task reads and writes with): Spark retries the task in a new worker (with a new
    transport JVM), which resumes from the progress on the target: nothing lost, and no more written
    again than what was produced since the last commit (at most one commit interval of the load)."""
    topic = unique("workerkill")
    create_topics(bootstraps["A"], {topic: 2})
    remote = f"A.{topic}"
    cfg = _config(bootstraps, tmp_path, topic, transport)
    sent = {p: _records(p, 400) for p in range(2)}
    with running_mirror(cfg):
        for p, recs in sent.items():
            produce(bootstraps["A"], topic, p, recs[:200])
        wait_for(lambda: all(_count(bootstraps["B"], remote, p) >= 200 for p in sent), timeout_s=60, what="B")
        workers = _pyspark_workers() if victim == "python worker" else _transport_jvms()
        assert workers
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        for p, recs in sent.items():
            produce(bootstraps["A"], topic, p, recs[200:])
        wait_for(lambda: all(_count(bootstraps["B"], remote, p) >= 400 for p in sent), timeout_s=120, what="the rest")
        if victim == "transport JVM":  # the retried tasks started another
            assert set(_transport_jvms()) - set(workers)
        time.sleep(1)
    for p, recs in sent.items():
        values = [r.value for r in read_partition(bootstraps["B"], remote, p)]
        assert {r.value for r in recs} <= set(values), f"{remote}[{p}] lost records"
        # Killed after its last commit: the retry writes again at most what came after it (nothing
        # was produced between the last commit and the kill here, so at most the 200 produced after).
        assert len(values) - len(recs) <= 200, f"{remote}[{p}]: {len(values) - len(recs)} written again"
