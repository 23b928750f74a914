"""What the source-loss check costs per start of a flow's copy: one ListOffsets (earliest) request for every
partition, made on the driver before a flow's copy tasks start (``CopyRecorder.check_source_loss``).

Starts one local cluster (its own directory and ports), creates a topic per ``--partitions`` value
(one record per partition, so every partition has a log start), then calls the recorder's
check itself ``--rounds`` times per size, with ranges that start at the log start (no loss: the
common case, the whole cost is the request). Writes ``bench/results/<date>-source-loss-check.json``
and prints a table.

    .venv/bin/python bench/source_loss_check.py [--partitions 10,100,1000] [--rounds 50]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sparkmirror.core.ranges import SourceRange
from sparkmirror.devcluster.cluster import DevClusters
from sparkmirror.pipeline.driver.recorder import CopyRecorder


def handler(admin: AdminClient, topic: str) -> CopyRecorder:
    """The recorder with only what its source-loss check uses."""
    h = CopyRecorder.__new__(CopyRecorder)
    h.flow = SimpleNamespace(name="A->B", spark=SimpleNamespace(source_loss="report"))  # type: ignore[assignment]
    h.clients = SimpleNamespace(source_admin=admin)  # type: ignore[assignment]
    h.subscribed = {topic: 0}
    h._reported = set()
    h.progress = SimpleNamespace(add_loss=lambda loss: None)  # type: ignore[assignment]
    h.metrics = None
    return h


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", default="10,100,1000")
    ap.add_argument("--rounds", type=int, default=50)
    args = ap.parse_args()
    sizes = [int(x) for x in args.partitions.split(",")]
    workdir = Path(tempfile.mkdtemp(prefix="sparkmirror-bench-loss."))
    clusters = DevClusters(workdir / "dev")
    try:
        bootstrap = clusters.up(["A"], base_port=33192)["A"]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        results: dict[str, Any] = {}
        for n in sizes:
            topic = f"loss-check-{n}"
            for f in admin.create_topics([NewTopic(topic, n, 1)], operation_timeout=60).values():
                f.result()
            p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
            for part in range(n):
                p.produce(topic, value=b"x", partition=part)
            assert p.flush(60) == 0
            h = handler(admin, topic)
            ranges = [SourceRange(topic, part, 0, 1) for part in range(n)]
            h.check_source_loss(ranges)  # warm: metadata and connections
            samples = []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                h.check_source_loss(ranges)
                samples.append((time.perf_counter() - t0) * 1000)
            xs = sorted(samples)
            results[str(n)] = {
                "rounds": len(xs),
                "p50_ms": xs[len(xs) // 2],
                "p99_ms": xs[min(len(xs) - 1, int(0.99 * len(xs)))],
                "mean_ms": statistics.fmean(xs),
                "max_ms": xs[-1],
            }
        print(f"{'partitions':>10}  {'p50 ms':>8}  {'p99 ms':>8}  {'mean ms':>8}")
        for n, r in results.items():
            print(f"{n:>10}  {r['p50_ms']:8.1f}  {r['p99_ms']:8.1f}  {r['mean_ms']:8.1f}")
        out = {
            "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "load_1m": os.getloadavg()[0],
            "command": f"bench/source_loss_check.py --partitions {args.partitions} --rounds {args.rounds}",
            "results": results,
        }
        path = Path(__file__).parent / "results" / f"{dt.date.today().isoformat()}-source-loss-check.json"
        path.write_text(json.dumps(out, indent=2) + "\n")
        print(f"written {path}")
    finally:
        clusters.down()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
