"""The direct reader's copy alone: source ranges -> RangeReader -> Sink (at least once) -> a real target.

Spark is left out so that the Python work per record of the default pipeline (librdkafka's batch
consume, the range bookkeeping, one produce call and one delivery report per record) can be measured
and profiled on its own. Two local clusters; the source topic is filled once, then
``sparkmirror.pipeline.executor.tasks.copy_ranges`` copies it whole, in-process, ``--runs`` times
(each run to fresh remote topics). ``--topics 200 --hot 4`` lays the partitions out as the scale
scenario does (topics of ``partitions / topics`` partitions, the first ``--hot`` holding half of
the records).

    .venv/bin/python bench/direct_path.py [--records 1000000] [--size 200] [--partitions 100]
        [--topics 1] [--hot 0] [--tasks 2] [--runs 3] [--profile] [--compare-collector]
        [--consumer K=V] [--producer K=V]

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

from scale import Scale
from sparkmirror.core.policy import DefaultReplicationPolicy
from sparkmirror.core.ranges import SourceRange, share_out
from sparkmirror.devcluster.cluster import DevClusters
from sparkmirror.kafka.clients import producer_config
from sparkmirror.pipeline.executor import clients, tasks
from sparkmirror.pipeline.executor.plan import WritePlan
from sparkmirror.pipeline.executor.tasks import collector_paused as paused
from sparkmirror.pipeline.executor.tasks import copy_ranges

#: Source topics are named <PREFIX>000, <PREFIX>001, ...
PREFIX = "bench-"


def recreate(admin: AdminClient, topic: str, partitions: int) -> None:
    if topic in admin.list_topics(timeout=30).topics:
        for f in admin.delete_topics([topic], operation_timeout=60).values():
            f.result()
        while topic in admin.list_topics(timeout=30).topics:
            time.sleep(0.5)
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result()


def layout(records: int, topics: int, partitions: int, hot: int) -> dict[tuple[str, int], int]:
    """Records per (topic, partition): ``partitions / topics`` partitions a topic; with ``hot``, the
    first ``hot`` topics hold half of the records, as in the scale scenario (0: an even spread)."""
    per_topic = partitions // topics
    scale = Scale(topics=topics, partitions=per_topic, hot=hot or topics, groups=0, prefix=PREFIX)
    return {
        (t, q): n // per_topic + (1 if q < n % per_topic else 0)
        for t, n in scale.records_per_topic(records).items()
        for q in range(per_topic)
    }


def fill(bootstrap: str, counts: dict[tuple[str, int], int], size: int) -> None:
    """Each partition's count of ``size``-byte records with one header, produced round-robin."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": "20", "batch.size": "1000000", "acks": "1"})
    value = os.urandom(size)
    now = int(time.time() * 1000)
    left = dict(counts)
    i = 0
    while left:
        for tp in list(left):
            topic, q = tp
            while True:
                try:
                    p.produce(topic, value, b"k%d" % i, q, timestamp=now, headers=[("h", b"1")])
                    break
                except BufferError:
                    p.poll(0.05)
            i += 1
            left[tp] -= 1
            if not left[tp]:
                del left[tp]
    p.flush(300)


def overrides(pairs: list[str]) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in pairs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--topics", type=int, default=1, help="topics the partitions are spread over")
    ap.add_argument("--hot", type=int, default=0, help="topics holding half of the records (0: even)")
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
        counts = layout(args.records, args.topics, args.partitions, args.hot)
        names = sorted({t for t, _ in counts})
        per_topic = args.partitions // args.topics
        admin_a = AdminClient({"bootstrap.servers": boots["A"]})
        for t in names:
            recreate(admin_a, t, per_topic)
        fill(boots["A"], counts, args.size)
        admin_b = AdminClient({"bootstrap.servers": boots["B"]})
        ranges = [SourceRange(t, q, 0, n) for (t, q), n in sorted(counts.items())]
        groups = share_out(ranges, args.tasks)  # as the driver shares a batch out
        modes = ["paused", "collecting"] if args.compare_collector else ["paused"]
        rates: dict[str, list[float]] = {m: [] for m in modes}
        costs: dict[str, list[float]] = {m: [] for m in modes}
        for run in range(args.runs * len(modes)):
            mode = modes[run % len(modes)]
            tasks.collector_paused = paused if mode == "paused" else contextlib.nullcontext  # type: ignore[assignment]
            # A remote topic of its own per run (a source alias per run): a topic deleted and made
            # again under the same name races the cached producer's metadata.
            alias = f"R{run}"
            for f in admin_b.create_topics([NewTopic(f"{alias}.{t}", per_topic, 1) for t in names]).values():
                f.result()
            plan = WritePlan(
                flow=f"{alias}->B",
                source_alias=alias,
                target_alias="B",
                policy=DefaultReplicationPolicy(),
                producer_config=producer_config({"bootstrap.servers": boots["B"], **overrides(args.producer)}),
                source_consumer_config={"bootstrap.servers": boots["A"], **overrides(args.consumer)},
                max_record_bytes={f"{alias}.{t}": 1_048_588 for t in names},
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
            clients.close_all()  # an earlier run's idle clients would cost the next one CPU
            for f in admin_b.delete_topics([f"{alias}.{t}" for t in names], operation_timeout=60).values():
                f.result()  # the next run's topics alone on B
            if profiler is not None:
                buf = io.StringIO()
                pstats.Stats(profiler, stream=buf).sort_stats("tottime").print_stats(16)
                print(buf.getvalue())
        for m in modes:
            print(
                f"{m}: median over {args.runs} runs {statistics.median(rates[m]):,.0f} records/s, "
                f"{statistics.median(costs[m]):.2f} CPU us/record ({args.records:,} records of {args.size} B, "
                f"{args.partitions} partitions in {args.topics} topics, {args.hot} hot, {args.tasks} tasks)"
            )
    finally:
        clusters.down()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
