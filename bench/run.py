"""The benchmark of issue 6: sparkmirror beside MirrorMaker 2 and the machine's limit, in one run.

``make bench`` runs this, then ``bench/report.py``. It starts two local clusters
(ports from 31092, apart from the tests'), writes the workload on A (default
1,000,000 records of 512 bytes with a key and one header, in 8 partitions) and
commits a consumer group at a random position per partition on A. Then, for
each run and each system (``limit``, ``mm2``, ``sparkmirror_at_least_once``,
``sparkmirror_exactly_once``), one after another on the same brokers and data:

1. B is emptied; the remote topics are created with ``LogAppendTime``.
2. Throughput: the system copies the workload into an empty B. records/s and
   MB/s are taken from the first to the last record's append time on B; CPU
   seconds and peak RSS of the system's whole process tree come from
   ``bench/proctree.py``. B is read back with read_committed: a run that lost
   records is a failure, not a number.
3. Failover (mm2, sparkmirror): the group's positions are translated to B by
   the system's own tools; re-read and skipped records are counted key by key.
4. Latency: a fresh process of the system mirrors a second topic while a
   paced producer offers ``--rate`` records/s for ``--latency-seconds``;
   latency = append time on B - the record's timestamp on A.

Results: ``bench/results/<date>.json``; the report (BENCHMARKS.md and a chart)
is generated from it. A run that sets the commit interval
(``--sparkmirror-prop sparkmirror.commit.interval.ms=T``) is a row of the report's
trade-off instead: ``bench/results/<date>-streaming-commit-<T>-ms.json``, and the
report is generated again from the newest full result. Numbers come from these runs only.

    .venv/bin/python bench/run.py [--records N] [--partitions P] [--size BYTES] [--rate R]
                                  [--latency-seconds S] [--runs K] [--systems limit,mm2,...]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import logging
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import replicators as rep
import report
import workload as wl
from sparkmirror.artifacts import KAFKA_VERSION
from sparkmirror.config.model import AT_LEAST_ONCE_COMMIT_INTERVAL_MS, EXACTLY_ONCE_COMMIT_INTERVAL_MS
from sparkmirror.devcluster.cluster import DevClusters
from sparkmirror.devcluster.spark import SparkStandalone

log = logging.getLogger("bench")

TOPIC = "bench"
LATENCY_TOPIC = "bench-latency"
APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}
RESULTS = rep.BENCH / "results"
PROCTREE = rep.BENCH / "proctree.py"
#: Metrics summarised over runs (median, min, max).
SPREAD_KEYS = (
    "records_per_s",
    "mb_per_s",
    "cpu_s",
    "cpu_s_transfer",
    "peak_rss_mb",
    "latency_p50_ms",
    "latency_p99_ms",
    "reread_after_failover",
)


@dataclass(frozen=True)
class Settings:
    records: int
    partitions: int
    size: int
    rate: int
    latency_seconds: int
    warmup_seconds: int
    runs: int
    linger_ms: int
    batch_size: int
    compression: str
    tasks_max: int
    limit_threads: int
    seed: int
    settle_seconds: int
    base_port: int
    stall_timeout_s: int
    systems: tuple[str, ...]
    keep: bool
    sparkmirror_props: tuple[str, ...]
    mm2_props: tuple[str, ...]
    sparkmirror_debug: bool = False
    scenario: str = "default"
    #: sparkmirror's writer: the Python writer, the only one since the JVM writer was retired (results
    #: from before say which one they ran; bench/report.py reads it).
    writer: str = "python"
    exactly_once_writer: str = "python"
    scale_topics: int = 200
    scale_partitions: int = 5
    scale_hot: int = 4
    scale_groups: int = 1000
    #: Start a Spark standalone cluster (a master, 2 workers) for sparkmirror (``--spark-cluster``).
    spark_cluster: bool = False
    #: sparkmirror's Spark master: the one given (``--spark-master``), the started cluster's, or None
    #: for Spark embedded in ``sparkmirror run`` (``local[*]``).
    spark_master: str | None = None
    partitions_sweep: tuple[int, ...] = ()
    sweep_records: int = 0
    scale_freshness_wait: int = 120
    #: The scale scenario's latency load: Java's producer (bench/jvm/PacedLoad.java), or librdkafka's,
    #: which was the load of every scale run before 2026-11-28 (docs/performance.md).
    scale_generator: str = "java"
    #: Producers of the Java load, each with a connection of its own: a broker answers one request per
    #: connection at a time, and one connection was again near its limit (docs/performance.md).
    scale_generator_producers: int = 4
    #: The brokers' JIT: ``full`` (both tiers, as production brokers run; since 2026-12-01) or
    #: ``first-tier`` (the dev clusters' and tests' ``-XX:TieredStopAtLevel=1``, every run before).
    broker_jit: str = "full"

    @property
    def payload_bytes(self) -> int:
        """Key + value + header bytes of one workload record."""
        return len(b"%012d" % 0) + self.size + sum(len(k) + len(v) for k, v in wl.HEADERS)


def parse_args(argv: list[str] | None = None) -> Settings:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="records in the throughput workload")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--size", type=int, default=512, help="value bytes per record")
    ap.add_argument("--rate", type=int, default=20_000, help="offered records/s in the latency phase")
    ap.add_argument("--latency-seconds", type=int, default=60)
    ap.add_argument("--warmup-seconds", type=int, default=5, help="paced load before the latency measurement")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--linger-ms", type=int, default=10, help="producer linger.ms, all systems")
    ap.add_argument("--batch-size", type=int, default=262_144, help="producer batch.size, all systems")
    ap.add_argument("--compression", default="none", help="producer compression.type, all systems")
    ap.add_argument("--tasks-max", type=int, default=2, help="MM2 tasks.max")
    ap.add_argument("--limit-threads", type=int, default=2, help="copy threads of the limit loop")
    ap.add_argument("--seed", type=int, default=6)
    ap.add_argument(
        "--settle-seconds",
        type=int,
        default=15,
        help="pause after loading the workload (scale: before each system too), pages synced first",
    )
    ap.add_argument("--base-port", type=int, default=31092)
    ap.add_argument("--stall-timeout", type=int, default=180, help="seconds without progress on B that fail a run")
    ap.add_argument("--systems", default="limit,mm2,sparkmirror_at_least_once,sparkmirror_exactly_once")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (configs, logs) after the run")
    ap.add_argument("--sparkmirror-prop", action="append", default=[], metavar="KEY=VALUE",
                    help="extra line for sparkmirror's properties (repeatable)")  # fmt: skip
    ap.add_argument("--mm2-prop", action="append", default=[], metavar="KEY=VALUE",
                    help="extra line for MM2's properties (repeatable)")  # fmt: skip
    ap.add_argument("--sparkmirror-debug", action="store_true",
                    help="run sparkmirror with -vv (its debug log; use with --keep)")  # fmt: skip
    ap.add_argument("--scenario", choices=("default", "scale"), default="default",
                    help="scale: many topics and groups (bench/scale.py; --records, --size apply)")  # fmt: skip
    ap.add_argument("--scale-topics", type=int, default=200)
    ap.add_argument("--scale-partitions", type=int, default=5, help="partitions per topic (scale)")
    ap.add_argument("--scale-hot", type=int, default=4, help="hot topics, holding half of the records (scale)")
    ap.add_argument("--scale-groups", type=int, default=1000, help="consumer groups committed on A (scale)")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--spark-cluster", action="store_true",
                       help="run sparkmirror on a Spark standalone cluster of a master and 2 workers (1 core, "
                            "2 GiB each) started for the benchmark (sparkmirror.devcluster.spark)")  # fmt: skip
    where.add_argument("--spark-master", default=None, metavar="URL",
                       help="run sparkmirror on this Spark master (`sparkmirror run --master URL`)")  # fmt: skip
    ap.add_argument("--partitions-sweep", default="",
                    help="scale: partition counts for a throughput-only run of every system beside the main "
                         "layout, e.g. 8,100,1000 (the main layout's count is measured once)")  # fmt: skip
    ap.add_argument("--scale-freshness-wait", type=int, default=120,
                    help="seconds past the checkpoint interval to wait for checkpoints (scale)")  # fmt: skip
    ap.add_argument("--sweep-records", type=int, default=0, help="records per sweep point (default: --records)")
    ap.add_argument("--scale-generator", default="java", choices=["java", "librdkafka"],
                    help="scale: the latency load's client (java: every ready partition of a broker in one "
                         "request; librdkafka: one partition per request, the load before 2026-11-28)")  # fmt: skip
    ap.add_argument("--scale-generator-producers", type=int, default=4,
                    help="scale: producers (connections) of the Java latency load (before: 1)")  # fmt: skip
    ap.add_argument("--broker-jit", default="full", choices=["full", "first-tier"],
                    help="the brokers' JIT: full (both tiers, as production brokers run) or first-tier (the dev "
                         "clusters' -XX:TieredStopAtLevel=1, every run before 2026-12-01)")  # fmt: skip
    a = ap.parse_args(argv)
    known = {"limit", "mm2", "sparkmirror_at_least_once", "sparkmirror_exactly_once"}
    systems = tuple(s.strip() for s in a.systems.split(",") if s.strip())
    if not systems or set(systems) - known:
        ap.error(f"--systems: choose from {', '.join(sorted(known))}")
    return Settings(
        records=a.records,
        partitions=a.partitions,
        size=a.size,
        rate=a.rate,
        latency_seconds=a.latency_seconds,
        warmup_seconds=a.warmup_seconds,
        runs=a.runs,
        linger_ms=a.linger_ms,
        batch_size=a.batch_size,
        compression=a.compression,
        tasks_max=a.tasks_max,
        limit_threads=a.limit_threads,
        seed=a.seed,
        settle_seconds=a.settle_seconds,
        base_port=a.base_port,
        stall_timeout_s=a.stall_timeout,
        systems=systems,
        keep=a.keep,
        sparkmirror_props=tuple(a.sparkmirror_prop),
        mm2_props=tuple(a.mm2_prop),
        sparkmirror_debug=a.sparkmirror_debug,
        scenario=a.scenario,
        scale_topics=a.scale_topics,
        scale_partitions=a.scale_partitions,
        scale_hot=a.scale_hot,
        scale_groups=a.scale_groups,
        spark_cluster=a.spark_cluster,
        spark_master=a.spark_master,
        partitions_sweep=tuple(int(x) for x in a.partitions_sweep.split(",") if x.strip()),
        sweep_records=a.sweep_records,
        scale_freshness_wait=a.scale_freshness_wait,
        scale_generator=a.scale_generator,
        scale_generator_producers=a.scale_generator_producers,
        broker_jit=a.broker_jit,
    )


def _props(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def result_path(props: tuple[str, ...], day: str) -> Path:
    """Where a run's result goes: ``<day>.json``, or for a run that sets the commit interval a row of
    the report's trade-off (bench/report.py reads every ``<day>-streaming-commit-<T>-ms.json`` beside
    the newest full result), so such a run neither replaces nor stands for the day's full result."""
    interval = _props(props).get("sparkmirror.commit.interval.ms")
    if interval is not None:
        return RESULTS / f"{day}-streaming-commit-{int(interval)}-ms.json"
    return RESULTS / f"{day}.json"


# -- process trees --------------------------------------------------------------


class Tree:
    """A system's process tree, run under bench/proctree.py; its log and stats in ``run_dir``."""

    live: list[Tree] = []

    def __init__(self, command: list[str], run_dir: Path, label: str, *, kill_after_s: float = 90) -> None:
        self.stats_path = run_dir / f"{label}.proctree.json"
        self.log_path = run_dir / f"{label}.log"
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(PROCTREE), "--out", str(self.stats_path), "--kill-after", str(kill_after_s),
                 "--", *command],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                # Our own session: a Ctrl-C on the harness reaches the tree only through stop().
                start_new_session=True,
            )  # fmt: skip
        Tree.live.append(self)

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout_s: float) -> dict[str, Any]:
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("%s still running after %.0fs: stopping it", self.log_path.name, timeout_s)
            return self.stop()
        return self._done()

    def stop(self, timeout_s: float = 180) -> dict[str, Any]:
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                # The wrapper kills its tree after --kill-after; this is the last resort.
                self.proc.kill()
                self.proc.wait(30)
        return self._done()

    def _done(self) -> dict[str, Any]:
        if self in Tree.live:
            Tree.live.remove(self)
        if not self.stats_path.exists():
            return {"exit_code": None, "cpu_s": None, "peak_rss_mb": None, "samples": [], "start": time.time()}
        stats: dict[str, Any] = json.loads(self.stats_path.read_text())
        return stats

    def tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    @classmethod
    def stop_all(cls) -> None:
        for tree in list(cls.live):
            tree.stop(timeout_s=120)


def at(samples: list[list[float]], t: float, column: int) -> float | None:
    """A sampled column at wall time ``t``, linearly interpolated (None without samples)."""
    if not samples:
        return None
    if t <= samples[0][0]:
        return samples[0][column]
    for prev, cur in zip(samples, samples[1:], strict=False):
        if cur[0] >= t:
            span = cur[0] - prev[0]
            w = (t - prev[0]) / span if span > 0 else 1.0
            return prev[column] + w * (cur[column] - prev[column])
    return samples[-1][column]


# -- waiting for B --------------------------------------------------------------


def await_records(
    bootstrap: str, topic: str, partitions: int, expected: int, tree: Tree, *, stall_s: float, settle_s: float = 2.0
) -> wl.Scan | None:
    """Wait until B holds ``expected`` distinct committed records of ``topic``; return the read-back.

    The high watermarks tell when writing has stopped at or above ``expected``
    (transaction markers count there too, so they are a hint); the read-back
    with read_committed is the check. None when B made no progress for
    ``stall_s`` seconds or the system exited first.
    """
    last_hw, last_change = -1, time.monotonic()
    while True:
        hw = sum(wl.end_offsets(bootstrap, topic, partitions))
        now = time.monotonic()
        if hw != last_hw:
            last_hw, last_change = hw, now
        if hw >= expected and now - last_change >= settle_s:
            found = wl.scan(bootstrap, topic, partitions)
            if found.distinct >= expected:
                return found
            last_change = time.monotonic()  # markers made up the count; keep waiting
        if not tree.running():
            log.warning("the system exited before B held %d records of %s", expected, topic)
            return None
        if now - last_change > stall_s:
            log.warning("no progress on B for %.0fs (%d of %d records of %s)", stall_s, hw, expected, topic)
            return None
        time.sleep(0.5)


# -- one system, one run ------------------------------------------------------


@dataclass
class Bench:
    settings: Settings
    boots: dict[str, str]
    workdir: Path
    positions: dict[int, int]
    common: rep.Common

    def reset(self) -> None:
        """Empty B and every topic on A but the workload; fresh latency topic on A, remote topics on B."""
        a, b, p = self.boots["A"], self.boots["B"], self.settings.partitions
        wl.delete_topics(b)
        wl.delete_groups(b)
        wl.delete_topics(a, keep=[TOPIC])
        wl.create_topic(a, LATENCY_TOPIC, p)
        for topic in (TOPIC, LATENCY_TOPIC):
            wl.create_topic(b, rep.remote(topic), p, APPEND_TIME)

    def measure(self, system: rep.Replicator, run: int) -> dict[str, Any]:
        run_dir = self.workdir / f"run{run}-{system.name}"
        run_dir.mkdir(parents=True)
        result: dict[str, Any] = {
            "run": run,
            "ok": True,
            "failures": [],
            "load_before": concurrent_load(),
            # Each of the system's processes imports the checkout as it is when it starts.
            "code_before": source_state(),
        }
        self.reset()
        try:
            result.update(self.throughput(system, run_dir))
            if result.get("exit_code") not in (0, None) and system.exits_when_done:
                result["failures"].append(f"exited with code {result['exit_code']} (see {run_dir}/throughput.log)")
            result["latency"] = self.latency(system, run_dir)
        except Exception as exc:  # noqa: BLE001 - one system's failure must not end the benchmark
            log.exception("%s run %d failed", system.name, run)
            result["failures"].append(f"{type(exc).__name__}: {exc}"[:2000])
        finally:
            Tree.stop_all()
        for part in (result, result.get("latency") or {}):
            if part.get("lost"):
                result["failures"].append(f"lost {part['lost']} records")
            if part.get("not_append_time"):
                result["failures"].append(f"{part['not_append_time']} records on B without LogAppendTime")
        result["ok"] = not result["failures"]
        return result

    def throughput(self, system: rep.Replicator, run_dir: Path) -> dict[str, Any]:
        s, b = self.settings, self.boots["B"]
        target = rep.remote(TOPIC)
        tree = Tree(system.command(run_dir, TOPIC, count=s.records), run_dir, "throughput")
        translated: dict[int, int | None] | None = None
        translation_error = None
        if system.exits_when_done:
            stats = tree.wait(timeout_s=max(1800.0, s.records / 500))
            found = wl.scan(b, target, s.partitions)
        else:
            waited = await_records(b, target, s.partitions, s.records, tree, stall_s=s.stall_timeout_s)
            if waited is not None and system.translates:
                # MM2 emits checkpoints every interval; give it two after the last record.
                time.sleep(2 * self.common.checkpoint_interval_s + 2)
                try:
                    translated = system.translate(run_dir, TOPIC)
                except Exception as exc:  # noqa: BLE001 - reported, the throughput figures stand
                    translation_error = str(exc)[:2000]
            stats = tree.stop()
            found = waited if waited is not None else wl.scan(b, target, s.partitions)
        if system.translates and translated is None and translation_error is None:
            try:
                translated = system.translate(run_dir, TOPIC)
            except Exception as exc:  # noqa: BLE001
                translation_error = str(exc)[:2000]

        out: dict[str, Any] = {
            "exit_code": stats.get("exit_code"),
            "on_target": found.records,
            "distinct": found.distinct,
            "duplicates": found.duplicates,
            "lost": s.records - found.distinct,
            "not_append_time": found.not_append_time,
            "cpu_s_total": stats.get("cpu_s"),
            "cpu_s_auto_reaped": stats.get("cpu_s_auto_reaped"),
            "peak_rss_mb": stats.get("peak_rss_mb"),
        }
        if stats.get("exit_code") not in (0, None) and system.exits_when_done:
            log.warning("%s exited with %s:\n%s", system.name, stats.get("exit_code"), tree.tail())
        first, last = found.first_append_ms, found.last_append_ms
        if first is not None and last is not None and last > first and out["lost"] == 0:
            transfer_s = (last - first) / 1000
            samples = stats.get("samples", [])
            cpu_first, cpu_last = at(samples, first / 1000, 1), at(samples, last / 1000, 1)
            busy_first, busy_last = at(samples, first / 1000, 3), at(samples, last / 1000, 3)
            out.update(
                transfer_s=round(transfer_s, 3),
                wall_s=round(last / 1000 - stats["start"], 3),
                records_per_s=round(s.records / transfer_s, 1),
                mb_per_s=round(s.records * s.payload_bytes / transfer_s / 1e6, 2),
                cpu_s=None if cpu_last is None else round(cpu_last, 2),
                cpu_s_transfer=None if cpu_last is None or cpu_first is None else round(cpu_last - cpu_first, 2),
                machine_cpu_s_transfer=(
                    None if busy_last is None or busy_first is None else round(busy_last - busy_first, 2)
                ),
            )
        if system.translates:
            if translated is not None:
                count = wl.failover_count(found, self.positions, translated)
                out["translation"] = {**dataclasses.asdict(count), "translated": translated}
                out["reread_after_failover"] = count.reread
                out["skipped_after_failover"] = count.skipped
            else:
                out["translation"] = {"error": translation_error}
        return out

    def latency(self, system: rep.Replicator, run_dir: Path) -> dict[str, Any]:
        s, a, b = self.settings, self.boots["A"], self.boots["B"]
        target = rep.remote(LATENCY_TOPIC)
        tree = Tree(system.command(run_dir, LATENCY_TOPIC, count=None), run_dir, "latency")
        seed = s.seed + 1000
        warm = wl.offer(a, LATENCY_TOPIC, s.partitions, s.size, first_seq=0, rate=s.rate, seconds=s.warmup_seconds,
                        seed=seed)  # fmt: skip
        ready = await_records(b, target, s.partitions, warm.records, tree, stall_s=max(s.stall_timeout_s, 240))
        if ready is None:
            tree.stop()
            raise RuntimeError(f"{system.name} did not mirror the warm-up load:\n{tree.tail()}")
        offered = wl.offer(a, LATENCY_TOPIC, s.partitions, s.size, first_seq=warm.records, rate=s.rate,
                           seconds=s.latency_seconds, seed=seed)  # fmt: skip
        expected = warm.records + offered.records
        done = await_records(b, target, s.partitions, expected, tree, stall_s=s.stall_timeout_s)
        stats = tree.stop()
        found = wl.scan(b, target, s.partitions, latency_from=warm.records)
        lat = sorted(found.latencies_ms)
        out: dict[str, Any] = {
            "offered_records": offered.records,
            "offered_rate": round(offered.rate, 1),
            "offered_max_behind_ms": offered.max_behind_ms,
            "warmup_records": warm.records,
            "complete": done is not None,
            "lost": expected - found.distinct,
            "duplicates": found.duplicates,
            "not_append_time": found.not_append_time,
            "cpu_s_total": stats.get("cpu_s"),
            "cpu_s_auto_reaped": stats.get("cpu_s_auto_reaped"),
            "peak_rss_mb": stats.get("peak_rss_mb"),
            "exit_code": stats.get("exit_code"),
        }
        if lat:
            out.update(
                p50_ms=percentile(lat, 50),
                p90_ms=percentile(lat, 90),
                p99_ms=percentile(lat, 99),
                p999_ms=percentile(lat, 99.9),
                max_ms=lat[-1],
                mean_ms=round(statistics.fmean(lat), 1),
                samples=len(lat),
            )
        return out


def percentile(sorted_values: list[int], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), round(q / 100 * len(sorted_values) + 0.5)))
    return float(sorted_values[rank - 1])


# -- summary ------------------------------------------------------------------


def summarise(runs: list[dict[str, Any]], translates: bool) -> dict[str, Any]:
    """The system's figures: medians over its runs, and the spread; a run that lost records fails it."""
    flat: list[dict[str, Any]] = []
    for r in runs:
        lat = r.get("latency") or {}
        flat.append(
            {
                "records_per_s": r.get("records_per_s"),
                "mb_per_s": r.get("mb_per_s"),
                "cpu_s": r.get("cpu_s"),
                "cpu_s_transfer": r.get("cpu_s_transfer"),
                "peak_rss_mb": r.get("peak_rss_mb"),
                "latency_p50_ms": lat.get("p50_ms"),
                "latency_p99_ms": lat.get("p99_ms"),
                "reread_after_failover": r.get("reread_after_failover"),
            }
        )
    failed = not runs or any(not r["ok"] for r in runs)
    lost = max((max(r.get("lost") or 0, (r.get("latency") or {}).get("lost") or 0) for r in runs), default=0)
    out: dict[str, Any] = {"failed": failed, "failures": [f for r in runs for f in r["failures"]], "lost": lost}
    spread: dict[str, Any] = {}
    for key in SPREAD_KEYS:
        values = [f[key] for f in flat if f[key] is not None]
        spread[key] = {"runs": [f[key] for f in flat]}
        if values:
            spread[key].update(min=min(values), median=statistics.median(values), max=max(values))
        out[key] = None if failed or not values else statistics.median(values)
    if not translates:
        out["reread_after_failover"] = None
    skipped: list[int] = [r["skipped_after_failover"] for r in runs if r.get("skipped_after_failover") is not None]
    out["skipped_after_failover"] = max(skipped) if skipped and translates else None
    out["duplicates"] = max((r.get("duplicates") or 0 for r in runs), default=0)
    out["spread"] = spread
    out["per_run"] = runs
    return out


def machine() -> dict[str, Any]:
    meminfo = Path("/proc/meminfo").read_text().split()
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")), platform.processor())  # fmt: skip
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(int(meminfo[meminfo.index("MemTotal:") + 1]) / 2**20, 1),
        "platform": platform.platform(),
    }


def concurrent_load() -> dict[str, Any]:
    """How busy the machine is besides us: load average and other test runs."""
    me = os.getpid()
    pytest = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            pytest += b"pytest" in cmd
    return {"loadavg": [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]], "pytest_processes": pytest}


def source_state() -> dict[str, Any]:
    """The sparkmirror code being measured: its commit, and source files changed but not committed."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], capture_output=True, text=True, check=False, cwd=rep.REPO)
        return proc.stdout

    # Each porcelain line is "XY path": its leading blank (an unstaged change) is part of the status.
    changed = [line[3:] for line in git("status", "--porcelain", "--", "src").splitlines()]
    return {"commit": git("rev-parse", "--short", "HEAD").strip(), "uncommitted_src_files": changed}


def versions(jvm: rep.Jvm) -> dict[str, str]:
    from importlib.metadata import version

    import confluent_kafka
    import pyspark

    return {
        "kafka": KAFKA_VERSION,
        "mirrormaker2": f"connect-mirror {KAFKA_VERSION}",
        "sparkmirror": version("sparkmirror"),
        "pyspark": pyspark.__version__,
        "confluent_kafka": version("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "java": jvm.java_version(),
        "python": platform.python_version(),
    }


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def broker_jvm_options(jit: str) -> str:
    """The brokers' collector and compiler options for ``--broker-jit``."""
    from sparkmirror.devcluster.cluster import BROKER_JVM_OPTIONS, BROKER_JVM_OPTIONS_FULL_JIT

    return BROKER_JVM_OPTIONS_FULL_JIT if jit == "full" else BROKER_JVM_OPTIONS


def main(argv: list[str] | None = None) -> Path:
    # Stop cleanly (systems stopped, clusters down) on SIGTERM, and on SIGINT even
    # where a shell started us in the background with SIGINT ignored.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("sparkmirror").setLevel(logging.WARNING)
    s = parse_args(argv)
    load_before = concurrent_load()
    code_before = source_state()
    log.info("machine load before the run: %s; sparkmirror code: %s", load_before, code_before)
    workdir = Path(tempfile.mkdtemp(prefix="sparkmirror-bench."))
    clusters = DevClusters(workdir / "dev", broker_jvm_options=broker_jvm_options(s.broker_jit))
    spark_cluster = SparkStandalone(workdir / "spark") if s.spark_cluster else None
    started = time.monotonic()
    try:
        jvm = rep.Jvm(workdir)
        boots = clusters.up(["A", "B"], base_port=s.base_port)
        log.info("clusters: %s", boots)
        if spark_cluster is not None:
            state = spark_cluster.up(workers=2, cores=1, memory="2g")
            s = dataclasses.replace(s, spark_master=state.url)
            log.info(
                "sparkmirror runs on the Spark standalone cluster at %s (logs in %s)", state.url, workdir / "spark"
            )
        if s.scenario == "scale":
            import scale

            sizes = scale.Scale(
                s.scale_topics, s.scale_partitions, s.scale_hot, s.scale_groups, freshness_wait_s=s.scale_freshness_wait
            )
            return scale.main(sys.modules[__name__], s, sizes, workdir, boots, jvm, spark_cluster)
        wl.create_topic(boots["A"], TOPIC, s.partitions)
        t0 = time.monotonic()
        wl.load(boots["A"], TOPIC, s.records, s.partitions, s.size, s.seed)
        log.info("loaded %d records on A in %.1fs", s.records, time.monotonic() - t0)
        ends = wl.end_offsets(boots["A"], TOPIC, s.partitions)
        rnd = random.Random(s.seed)
        positions = {p: rnd.randrange(1, n) for p, n in enumerate(ends)}
        for p, pos in positions.items():
            # The layout the failover count relies on: seq = offset * partitions + partition.
            if wl.key_at(boots["A"], TOPIC, p, pos) != b"%012d" % (pos * s.partitions + p):
                raise RuntimeError(f"{TOPIC}[{p}] offset {pos} does not hold the expected key")
        wl.commit_group(boots["A"], rep.GROUP, TOPIC, positions)
        # The workload's pages are written back now, not during the first measurement.
        os.sync()
        time.sleep(s.settle_seconds)
        common = rep.Common(
            bootstraps=boots,
            partitions=s.partitions,
            linger_ms=s.linger_ms,
            batch_size=s.batch_size,
            compression=s.compression,
            tasks_max=s.tasks_max,
            limit_threads=s.limit_threads,
            mm2_extra=_props(s.mm2_props),
            sparkmirror_extra=_props(s.sparkmirror_props),
            sparkmirror_debug=s.sparkmirror_debug,
            spark_master=s.spark_master,
        )
        bench = Bench(s, boots, workdir, positions, common)
        systems = [r for r in rep.all_replicators(common, jvm) if r.name in s.systems]
        per_system: dict[str, list[dict[str, Any]]] = {r.name: [] for r in systems}
        for run in range(1, s.runs + 1):
            # Each run starts with another system, so none always runs first.
            first = (run - 1) % len(systems)
            for system in systems[first:] + systems[:first]:
                log.info("run %d/%d: %s", run, s.runs, system.name)
                r = bench.measure(system, run)
                r["load_after"] = concurrent_load()
                per_system[system.name].append(r)
                log.info("run %d %s: %s", run, system.name, one_line(r))
        result: dict[str, Any] = {
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": "bench/run.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "runs": s.runs,
            "machine": machine(),
            "machine_load": {"before": load_before, "after": concurrent_load()},
            "versions": versions(jvm),
            "sparkmirror_spark_master": s.spark_master or "local[*]",
            # The checkout may be shared with work in progress: what the run started and ended with.
            "sparkmirror_code": {"before": code_before, "after": source_state()},
            "settings": {
                **{k: v for k, v in dataclasses.asdict(s).items() if k not in ("base_port", "keep")},
                "payload_bytes_per_record": s.payload_bytes,
                "producer": common.producer(),
                "failover_group_positions": positions,
                "jvm": {"mm2": [*rep.MM2_HEAP, *rep.KAFKA_JVM_FLAGS], "limit": [*rep.LIMIT_HEAP, *rep.KAFKA_JVM_FLAGS]},
                "checkpoint_interval_s": common.checkpoint_interval_s,
                # Each mode's commit interval when --sparkmirror-prop does not set one (bench/report.py).
                "commit_interval_ms_default": {
                    "sparkmirror_at_least_once": AT_LEAST_ONCE_COMMIT_INTERVAL_MS,
                    "sparkmirror_exactly_once": EXACTLY_ONCE_COMMIT_INTERVAL_MS,
                },
            },
            "systems": {name: summarise(runs, name != "limit") for name, runs in per_system.items()},
            "elapsed_s": round(time.monotonic() - started, 1),
        }
        result["targets"] = report.check_targets(result)
        RESULTS.mkdir(exist_ok=True)
        path = result_path(s.sparkmirror_props, dt.date.today().isoformat())
        path.write_text(json.dumps(result, indent=2) + "\n")
        log.info("wrote %s (%.0fs in all)", path, time.monotonic() - started)
        return path
    finally:
        Tree.stop_all()
        if spark_cluster is not None:
            spark_cluster.down()
        clusters.down()
        if s.keep:
            log.info("configs and logs kept in %s", workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def one_line(r: dict[str, Any]) -> str:
    lat = r.get("latency") or {}
    parts = [
        "ok" if r["ok"] else "FAILED " + "; ".join(f[:200] for f in r["failures"]),
        f"{r.get('records_per_s') or 0:,.0f} rec/s",
        f"{r.get('mb_per_s') or 0:.1f} MB/s",
        f"cpu {r.get('cpu_s')}s (transfer {r.get('cpu_s_transfer')}s)",
        f"rss {r.get('peak_rss_mb')} MB",
        f"p50/p99 {lat.get('p50_ms')}/{lat.get('p99_ms')} ms at {lat.get('offered_rate')} rec/s",
        f"reread {r.get('reread_after_failover')} skipped {r.get('skipped_after_failover')}",
        f"lost {r.get('lost')}/{lat.get('lost')}",
    ]
    return ", ".join(parts)


if __name__ == "__main__":
    path = main()
    if report.COMMIT_RESULT.fullmatch(path.name):  # a row of the trade-off: the report of the newest full result
        try:
            report.main([])
        except SystemExit as exc:
            print(f"{path.name} is read by the report of a full result: {exc}")
    elif "spark-cluster" not in path.name:  # a run on a Spark cluster is kept apart from the report
        report.main([str(path)])
