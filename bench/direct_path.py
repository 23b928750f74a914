"""The direct reader's copy alone: source ranges -> RangeReader -> Sink (at least once) -> a real target.

Spark is left out so that the Python work per record of the default pipeline (librdkafka's batch
consume, the range bookkeeping, one produce call and one delivery report per record) can be measured
and profiled on its own. Two local clusters; the source topic is filled once, then
``sparkmirror.pipeline.executor.tasks.copy_ranges`` copies it whole, in-process, ``--runs`` times
(each run to a fresh remote topic).

    .venv/bin/python bench/direct_path.py [--records 1000000] [--size 200] [--partitions 100]
        [--tasks 2] [--runs 3] [--profile] [--compare-collector] [--consumer K=V] [--producer K=V]

Prints records/s (first read to last acknowledgement) and CPU microseconds of this process (its
librdkafka threads included) per record; ``--profile`` adds cProfile's top functions of one run.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sparkmirror.core.policy import DefaultReplicationPolicy
from sparkmirror.core.ranges import SourceRange
from sparkmirror.devcluster.cluster import DevClusters
from sparkmirror.kafka.clients import producer_config
from sparkmirror.pipeline.executor import tasks
from sparkmirror.pipeline.executor.plan import WritePlan
from sparkmirror.pipeline.executor.tasks import collector_paused as paused
from sparkmirror.pipeline.executor.tasks import copy_ranges

TOPIC = "bench"


def recreate(admin: AdminClient, topic: str, partitions: int) -> None:
    if topic in admin.list_topics(timeout=30).topics:
        for f in admin.delete_topics([topic], operation_timeout=60).values():
            f.result()
        while topic in admin.list_topics(timeout=30).topics:
            time.sleep(0.5)
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result()


def fill(bootstrap: str, records: int, size: int, partitions: int) -> list[int]:
    """``records`` of ``size`` bytes with one header, spread evenly; returns each partition's end."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": "20", "batch.size": "1000000", "acks": "1"})
    value = os.urandom(size)
    now = int(time.time() * 1000)
    for i in range(records):
        while True:
            try:
                p.produce(TOPIC, value, b"k%d" % i, i % partitions, timestamp=now, headers=[("h", b"1")])
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)
    return [records // partitions + (1 if q < records % partitions else 0) for q in range(partitions)]


def overrides(pairs: list[str]) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in pairs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--tasks", type=int, default=2, help="tasks the ranges are split into, run one after another")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile the last run")
    ap.add_argument("--base-port", type=int, default=29400)
    ap.add_argument("--consumer", action="append", default=[], metavar="KEY=VALUE", help="source consumer setting")
    ap.add_argument("--producer", action="append", default=[], metavar="KEY=VALUE", help="target producer setting")
    ap.add_argument(
        "--compare-collector",
        action="store_true",
        help="alternate runs with and without the tasks' pause of the garbage collector",
    )
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="sparkmirror-direct."))
    clusters = DevClusters(workdir / "dev")
    try:
        boots = clusters.up(["A", "B"], base_port=args.base_port)
        recreate(AdminClient({"bootstrap.servers": boots["A"]}), TOPIC, args.partitions)
        ends = fill(boots["A"], args.records, args.size, args.partitions)
        admin_b = AdminClient({"bootstrap.servers": boots["B"]})
        ranges = [SourceRange(TOPIC, q, 0, end) for q, end in enumerate(ends)]
        groups = [ranges[i :: args.tasks] for i in range(args.tasks)]
        modes = ["paused", "collecting"] if args.compare_collector else ["paused"]
        rates: dict[str, list[float]] = {m: [] for m in modes}
        costs: dict[str, list[float]] = {m: [] for m in modes}
        for run in range(args.runs * len(modes)):
            mode = modes[run % len(modes)]
            tasks.collector_paused = paused if mode == "paused" else contextlib.nullcontext  # type: ignore[assignment]
            # A remote topic of its own per run (a source alias per run): a topic deleted and made
            # again under the same name races the cached producer's metadata.
            alias = f"R{run}"
            recreate(admin_b, f"{alias}.{TOPIC}", args.partitions)
            plan = WritePlan(
                flow=f"{alias}->B",
                source_alias=alias,
                target_alias="B",
                policy=DefaultReplicationPolicy(),
                producer_config=producer_config({"bootstrap.servers": boots["B"], **overrides(args.producer)}),
                source_consumer_config={"bootstrap.servers": boots["A"], **overrides(args.consumer)},
                max_record_bytes={f"{alias}.{TOPIC}": 1_048_588},
            )
            profiler = cProfile.Profile() if args.profile and run == args.runs * len(modes) - 1 else None
            t0, c0 = time.perf_counter(), time.process_time()
            if profiler is not None:
                profiler.enable()
            copied = 0
            for group in groups:
                copied += sum(r.records for r in copy_ranges(group, plan))
            if profiler is not None:
                profiler.disable()
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
            assert copied == args.records, f"copied {copied} of {args.records}"
            rates[mode].append(copied / elapsed)
            costs[mode].append(cpu / copied * 1e6)
            print(f"run {run + 1} ({mode}): {rates[mode][-1]:,.0f} records/s, {costs[mode][-1]:.2f} CPU us/record")
            if profiler is not None:
                buf = io.StringIO()
                pstats.Stats(profiler, stream=buf).sort_stats("tottime").print_stats(16)
                print(buf.getvalue())
        for m in modes:
            print(
                f"{m}: median over {args.runs} runs {statistics.median(rates[m]):,.0f} records/s, "
                f"{statistics.median(costs[m]):.2f} CPU us/record ({args.records:,} records of {args.size} B, "
                f"{args.partitions} partitions, {args.tasks} tasks)"
            )
    finally:
        clusters.down()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
