"""The writer path alone: Arrow batches -> sparkmirror's at-least-once writer -> a real broker.

Spark is left out so that the Python work per record (Arrow to Python, one produce call and one
delivery report per record, the size check, the offset bookkeeping) can be measured and profiled on
its own. Synthetic Arrow batches with the columns Spark's Kafka source gives the writer (key, value,
topic, partition, offset, timestamp, headers) are handed to
``sparkmirror.pipeline.executor.tasks.copy_arrow_batches`` exactly as ``mapInArrow`` would, one task per
source partition, against a local broker of its own.

    .venv/bin/python bench/writer_path.py [--records 400000] [--size 512] [--partitions 8] [--profile]
        [--set linger.ms=5 --set compression.type=lz4 ...] [--baseline OLD_WRITER.py]

``--baseline`` takes a writer module of a commit before the executor package (for example
``git show 3920219:src/sparkmirror/pipeline/writer.py > /tmp/writer_old.py``) and alternates it
with the current writer run by run on the same broker, so the ratio is measured under the same load.

Prints records/s of the writer (first produce to last acknowledgement) and, with ``--profile``,
the functions where the writer's Python time goes.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka.admin import AdminClient, NewTopic

from sparkmirror.core.policy import DefaultReplicationPolicy
from sparkmirror.devcluster.cluster import DevClusters
from sparkmirror.kafka.clients import producer_config

TOPIC = "bench"
ARROW_ROWS = 10_000  # Spark's default arrow.maxRecordsPerBatch


def arrow_batches(partition: int, count: int, size: int) -> list[Any]:
    """One task's input: ``count`` records of one source partition, as Spark's source gives them."""
    value = os.urandom(size)
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    out = []
    for start in range(0, count, ARROW_ROWS):
        n = min(ARROW_ROWS, count - start)
        out.append(
            pa.RecordBatch.from_arrays(
                [
                    pa.array([f"key-{partition}-{start + i}".encode() for i in range(n)], pa.binary()),
                    pa.array([value] * n, pa.binary()),
                    pa.array([TOPIC] * n, pa.string()),
                    pa.array([partition] * n, pa.int32()),
                    pa.array(range(start, start + n), pa.int64()),
                    pa.array([int(time.time() * 1000)] * n, pa.int64()),
                    pa.array([[{"key": "bench", "value": b"1"}]] * n, header_type),
                ],
                names=["key", "value", "topic", "partition", "offset", "timestamp_ms", "headers"],
            )
        )
    return out


def load_writer(path: str | None) -> Any:
    """The current writer module, or the one at ``path`` (a baseline to compare with)."""
    if path is None:
        from types import SimpleNamespace

        from sparkmirror.pipeline.executor import plan, tasks

        return SimpleNamespace(WritePlan=plan.WritePlan, write_arrow_batches=tasks.copy_arrow_batches)
    import importlib.util

    spec = importlib.util.spec_from_file_location("writer_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def run(bootstrap: str, args: argparse.Namespace, overrides: dict[str, str], writer: Any) -> tuple[float, float, str]:
    """One pass; returns (records/s, CPU microseconds of this process per record, profile text)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    remote = f"A.{TOPIC}"
    names = [t for t in admin.list_topics(timeout=30).topics if t == remote]
    if names:
        for f in admin.delete_topics(names, operation_timeout=60).values():
            f.result()
        time.sleep(2)
    for f in admin.create_topics([NewTopic(remote, args.partitions, 1)]).values():
        f.result()
    conf = producer_config({"bootstrap.servers": bootstrap, **overrides})
    plan = writer.WritePlan(
        flow="A->B",
        source_alias="A",
        policy=DefaultReplicationPolicy(),
        producer_config=conf,
        max_record_bytes={remote: 1_048_588},
    )
    per_partition = args.records // args.partitions
    tasks = [arrow_batches(p, per_partition, args.size) for p in range(args.partitions)]
    profiler = cProfile.Profile() if args.profile else None
    t0, c0 = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    for batches in tasks:  # Spark runs tasks one after another in a Python worker
        for _stats in writer.write_arrow_batches(iter(batches), plan):
            pass
    if profiler is not None:
        profiler.disable()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    report = ""
    if profiler is not None:
        buf = io.StringIO()
        pstats.Stats(profiler, stream=buf).sort_stats("tottime").print_stats(14)
        report = buf.getvalue()
    records = per_partition * args.partitions
    return records / elapsed, cpu / records * 1e6, report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--set", action="append", default=[], help="producer override, Java-style key=value")
    ap.add_argument("--baseline", help="another writer.py to alternate with the current one")
    args = ap.parse_args()
    overrides = dict(kv.split("=", 1) for kv in args.set)
    workdir = Path(tempfile.mkdtemp(prefix="sparkmirror-writer."))
    clusters = DevClusters(workdir / "dev")
    try:
        boot = clusters.up(["B"], base_port=34092)["B"]
        writers = {"current": load_writer(None)}
        if args.baseline:
            writers["baseline"] = load_writer(args.baseline)
        rates: dict[str, list[float]] = {name: [] for name in writers}
        costs: dict[str, list[float]] = {name: [] for name in writers}
        for i in range(args.runs):
            for name, writer in writers.items():
                rate, cost, report = run(boot, args, overrides, writer)
                rates[name].append(rate)
                costs[name].append(cost)
                print(
                    f"run {i + 1} {name:>8}: {rate:,.0f} records/s ({rate * args.size / 1e6:.1f} MB/s of values), "
                    f"{cost:.2f} CPU us/record"
                )
                if report:
                    print(report)
        for name in writers:
            print(
                f"{name}: median {statistics.median(rates[name]):,.0f} records/s, "
                f"{statistics.median(costs[name]):.2f} CPU us/record over {args.runs} runs; "
                f"overrides {overrides or 'none'}"
            )
        if "baseline" in writers:
            ratio = statistics.median(costs["baseline"]) / statistics.median(costs["current"])
            speed = statistics.median(rates["current"]) / statistics.median(rates["baseline"])
            print(f"current vs baseline: {ratio:.2f}x fewer CPU us/record, {speed:.2f}x records/s (medians)")
    finally:
        clusters.down()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
