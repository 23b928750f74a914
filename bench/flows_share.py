"""Two flows in one process: does a trickle flow keep its latency while another copies a backlog?

Against running clusters A and B (``sparkmirror dev up``): writes ``--backlog`` records of
``--size`` bytes into a fresh topic of ``--partitions`` partitions on A, then runs one process
with two flows, A->B (the backlog) and B->A (a fresh one-partition topic on B, where this script
writes one record every ``--every`` seconds from the moment the run starts). For each trickle
record it measures produce-to-arrival on A, and says how many backlog records reached B in
between, while the backlog is copied (from when both flows' queries run). ``--fifo`` runs as
before issue 16's change (Spark's FIFO scheduler, every batch copied in one job); ``--extra``
adds configuration lines.

    .venv/bin/python bench/flows_share.py --source 127.0.0.1:19092 --target 127.0.0.1:19102 [--fifo]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sparkmirror.config import load_config
from sparkmirror.pipeline.driver.mirror import Mirror


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result()


def _fill(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144, "acks": "all"})
    value = os.urandom(size)
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)


def _total(consumer: Consumer, topic: str, partitions: int) -> int:
    """Records on ``topic`` (sum of its end offsets)."""
    total = 0
    for p in range(partitions):
        try:
            _lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        except Exception:  # noqa: BLE001 - the remote topic is not there yet
            return 0
        total += hi
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True, help="bootstrap of cluster A")
    ap.add_argument("--target", required=True, help="bootstrap of cluster B")
    ap.add_argument("--backlog", type=int, default=1_500_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--every", type=float, default=0.25)
    ap.add_argument("--fifo", action="store_true", help="FIFO scheduler, one job per batch (the old behaviour)")
    ap.add_argument("--extra", default="", help="more configuration lines (\\n separated)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    run = uuid.uuid4().hex[:8]
    big, small = f"backlog-{run}", f"trickle-{run}"
    _create(args.source, big, args.partitions)
    _create(args.target, small, 1)
    t0 = time.monotonic()
    _fill(args.source, big, args.partitions, args.backlog, args.size)
    print(f"backlog written: {args.backlog:,} records in {time.monotonic() - t0:.1f} s", flush=True)
    work = Path(tempfile.mkdtemp(prefix="flows-share."))
    old = "sparkmirror.spark.conf.spark.scheduler.mode = FIFO\nsparkmirror.task.max.records = 1000000000\n"
    cfg = work / "mm2.properties"
    cfg.write_text(
        f"clusters = A, B\nA.bootstrap.servers = {args.source}\nB.bootstrap.servers = {args.target}\n"
        f"A->B.enabled = true\nA->B.topics = {big}\nB->A.enabled = true\nB->A.topics = {small}\n"
        "replication.factor = 1\ncheckpoints.topic.replication.factor = 1\n"
        "heartbeats.topic.replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "emit.heartbeats.enabled = false\nemit.checkpoints.enabled = false\nsync.group.offsets.enabled = false\n"
        f"sparkmirror.checkpoint.location = {work / 'checkpoints'}\n"
        + (old if args.fifo else "")
        + args.extra.replace("\\n", "\n")
        + "\n"
    )
    mirror = Mirror(load_config(cfg))
    runner = threading.Thread(target=mirror.run, daemon=True)
    started = time.monotonic()
    runner.start()

    watch = Consumer({"bootstrap.servers": args.target, "group.id": f"w-{run}", "enable.auto.commit": False})
    reader = Consumer(
        {"bootstrap.servers": args.source, "group.id": f"r-{run}", "auto.offset.reset": "earliest",
         "enable.auto.commit": False}
    )  # fmt: skip
    remote = f"B.{small}"
    trickle = Producer({"bootstrap.servers": args.target, "linger.ms": 0, "acks": "all"})
    sent: dict[int, tuple[float, int]] = {}  # n -> (produced at, backlog records on B then)
    got: dict[int, tuple[float, int]] = {}
    done_at: float | None = None
    n = 0
    next_send = time.monotonic()
    subscribed = False
    ready: float | None = None
    try:
        while True:
            now = time.monotonic()
            if ready is None and len(mirror.runners) == 2 and all(f.query is not None for f in mirror.runners):
                ready = now
            on_b = _total(watch, f"A.{big}", args.partitions) if now - started > 1 else 0
            if done_at is None and on_b >= args.backlog:
                done_at = now
            if done_at is None and now >= next_send:
                trickle.produce(small, str(n).encode(), partition=0)
                trickle.flush(10)
                sent[n] = (time.monotonic(), on_b)
                n += 1
                next_send = now + args.every
            if not subscribed:
                try:
                    reader.assign([TopicPartition(remote, 0, 0)])
                    subscribed = True
                except Exception:  # noqa: BLE001 - the remote topic is not there yet
                    pass
            for msg in reader.consume(100, timeout=0.05) if subscribed else []:
                if msg.error() is None:
                    got[int(msg.value())] = (time.monotonic(), on_b)
            if done_at is not None and all(i in got for i in sent):
                break
            if now - started > 900:
                raise SystemExit("gave up after 900 s")
    finally:
        mirror.request_stop()
        runner.join(120)
    # From when both flows' queries run (Spark's start-up is not what is measured) while the
    # backlog was still being copied.
    warm = ready or float("inf")
    busy = [i for i in sent if sent[i][0] > warm and sent[i][1] < args.backlog]
    if not busy:
        raise SystemExit("the backlog was copied before the trickle flow ran: use a larger --backlog")
    lat = sorted((got[i][0] - sent[i][0]) * 1000 for i in busy)
    behind = sorted(got[i][1] - sent[i][1] for i in busy)

    def pct(xs: list[float], q: float) -> float:
        return xs[min(len(xs) - 1, int(q * len(xs)))]

    out = {
        "mode": "fifo, one job per batch" if args.fifo else "fair pools, rounds",
        "backlog": args.backlog,
        "backlog_s": round((done_at or 0) - started, 1),
        "trickle_records_measured": len(busy),
        "latency_ms_p50": round(statistics.median(lat)),
        "latency_ms_p99": round(pct(lat, 0.99)),
        "latency_ms_max": round(lat[-1]),
        "backlog_records_copied_while_one_trickle_record_waited_max": behind[-1],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
