"""Throughput of sparkmirror's writer modes on this machine: at-least-once vs exactly-once.

Starts two local clusters (its own ports), loads a workload on A, and mirrors
it with an embedded Spark session, once per mode and run, into an emptied
target. Reports records/s and MB/s of the micro-batch that carried the
workload (Spark's ``addBatch`` time: reading, writing, waiting for every
acknowledgement or the commit), checks that B holds every record, and writes
``bench/results/<date>-modes.json``.

This is the part of the benchmark issue that exists so far: no MirrorMaker 2
run and no latency percentiles yet.

    .venv/bin/python bench/throughput.py [--records 200000] [--partitions 8] [--size 512] [--runs 2]
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
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sparkmirror.config import load_config
from sparkmirror.devcluster.cluster import DevClusters
from sparkmirror.pipeline.driver import flow as driver_flow
from sparkmirror.pipeline.driver.mirror import Mirror
from sparkmirror.pipeline.session import build_session

TOPIC = "bench"


def load(bootstrap: str, records: int, partitions: int, size: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        f.result()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "acks": "all"})
    value = os.urandom(size)
    for i in range(records):
        while True:
            try:
                p.produce(
                    TOPIC, key=f"key-{i}".encode(), value=value, partition=i % partitions, headers=[("bench", b"1")]
                )
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)


def reset_target(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=30).topics if not t.startswith("__")]
    if names:
        for f in admin.delete_topics(names, operation_timeout=60).values():
            f.result()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not [t for t in admin.list_topics(timeout=30).topics if t in names]:
            return
        time.sleep(0.5)


def count(bootstrap: str, topic: str, partitions: int) -> int:
    """Records a read_committed consumer sees on the target (markers excluded)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-count",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    total, done = 0, set()
    while len(done) < partitions:
        for m in c.consume(10000, 1.0):
            if m.error():
                done.add(m.partition())
            else:
                total += 1
    c.close()
    return total


def run_mode(boots: dict[str, str], workdir: Path, exactly_once: bool) -> dict[str, Any]:
    props = workdir / "bench.properties"
    props.write_text(
        f"clusters = A, B\nA.bootstrap.servers = {boots['A']}\nB.bootstrap.servers = {boots['B']}\n"
        f"A->B.enabled = true\nA->B.topics = {TOPIC}\nreplication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
        "offset-syncs.topic.replication.factor = 1\nemit.heartbeats.enabled = false\n"
        f"sparkmirror.checkpoint.location = {workdir / 'cp'}\n"
        f"sparkmirror.exactly.once = {'true' if exactly_once else 'false'}\n"
    )
    shutil.rmtree(workdir / "cp", ignore_errors=True)
    captured: dict[str, Any] = {}
    original = driver_flow.Flow.take_ended_query

    def capture(self: Any) -> Any:
        captured.update(self.query.lastProgress or {})
        return original(self)

    driver_flow.Flow.take_ended_query = capture  # type: ignore[method-assign]
    try:
        t0 = time.monotonic()
        runners = Mirror(load_config(props), once=True).run()
        wall = time.monotonic() - t0
    finally:
        driver_flow.Flow.take_ended_query = original  # type: ignore[method-assign]
    return {
        "records": runners[0].progress.records,
        "bytes": runners[0].progress.bytes,
        "add_batch_s": captured.get("durationMs", {}).get("addBatch", 0) / 1000,
        "wall_s": wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="sparkmirror-bench."))
    clusters = DevClusters(workdir / "dev")
    boots = clusters.up(["A", "B"], base_port=31092)
    try:
        load(boots["A"], args.records, args.partitions, args.size)
        build_session("local[*]", {})
        results: dict[str, list[dict[str, Any]]] = {"at_least_once": [], "exactly_once": []}
        for run in range(args.runs):
            for mode in ("at_least_once", "exactly_once"):
                reset_target(boots["B"])
                r = run_mode(boots, workdir, exactly_once=(mode == "exactly_once"))
                r["on_target"] = count(boots["B"], f"A.{TOPIC}", args.partitions)
                r["lost"] = args.records - min(r["on_target"], args.records)
                r["records_per_s"] = r["records"] / r["add_batch_s"] if r["add_batch_s"] else 0.0
                r["mb_per_s"] = r["bytes"] / r["add_batch_s"] / 1e6 if r["add_batch_s"] else 0.0
                results[mode].append(r)
                print(
                    f"run {run + 1} {mode:>14}: {r['records_per_s']:>9,.0f} records/s {r['mb_per_s']:6.1f} MB/s "
                    f"(batch {r['add_batch_s']:.1f}s, wall {r['wall_s']:.1f}s, on B {r['on_target']:,}, "
                    f"lost {r['lost']})"
                )
        summary = {
            mode: {
                "records_per_s_median": statistics.median(x["records_per_s"] for x in rs),
                "records_per_s_min": min(x["records_per_s"] for x in rs),
                "records_per_s_max": max(x["records_per_s"] for x in rs),
                "lost": max(x["lost"] for x in rs),
            }
            for mode, rs in results.items()
        }
        ratio = summary["exactly_once"]["records_per_s_median"] / summary["at_least_once"]["records_per_s_median"]
        print(f"exactly-once / at-least-once throughput (medians of {args.runs} runs): {ratio:.2f}")
        out = {
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": "bench/throughput.py " + " ".join(f"--{k} {v}" for k, v in vars(args).items()),
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
            "workload": vars(args),
            "runs": results,
            "summary": summary,
            "exactly_once_over_at_least_once": ratio,
        }
        path = Path(__file__).parent / "results" / f"{dt.date.today().isoformat()}-modes.json"
        path.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {path}")
    finally:
        clusters.down()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
