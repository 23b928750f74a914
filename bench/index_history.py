"""The speed of ``sparkmirror offsets index-history`` (issue 28): records/s per core and MB/s.

Starts two local clusters (ports from 31300, apart from the tests' and ``bench/run.py``'s), writes the
workload on A (default 1,000,000 records of 512 bytes with a 12-byte key and one header, in 8
partitions, as ``bench/run.py``) and the same records on B's ``A.<topic>`` as MM2 writes them (same
key, value, timestamp and headers), with one restart's replay a partition (``--replay`` records
copied again from the middle on); then MM2's position (Connect's offsets topic on B) and
sparkmirror's progress as after a switch, and runs ``sparkmirror offsets index-history --json`` in a
child process. Figures: the child's wall-clock time and CPU time (user + system), records of both
partitions read and their bytes (keys and values). The brokers run on the same machine (2 cores) and use CPU of their
own while it reads: records/s per core is over the indexer's CPU time only.

    .venv/bin/python bench/index_history.py [--records N] [--partitions P] [--size BYTES] [--replay R] [--shards N]

``--shards N`` runs N processes at once, each with ``--shard I/N`` (a share of the partitions).

Results: ``bench/results/index-history-<date>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

import workload as wl
from sparkmirror.core.naming import progress_group
from sparkmirror.devcluster.cluster import DevClusters
from sparkmirror.kafka.groups import commit_offsets
from sparkmirror.kafka.mm2offsets import handback_records

TOPIC = "hist"


def _load(a: str, b: str, records: int, partitions: int, size: int, replay: int, seed: int) -> dict[int, int]:
    """The workload on A and its copy on B (with a replay of ``replay`` records a partition from the middle);
    returns the source records a partition."""
    rnd = random.Random(seed)
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    pa, pb = wl._producer(a), wl._producer(b)
    now = int(time.time() * 1000)
    per = {p: (records - p + partitions - 1) // partitions for p in range(partitions)}
    kept: dict[int, list[tuple[bytes, bytes, int]]] = {p: [] for p in range(partitions)}
    for seq in range(records):
        p = seq % partitions
        rec = (b"%012d" % seq, rnd.randbytes(size), now + seq // 1000)
        for producer, topic in ((pa, TOPIC), (pb, f"A.{TOPIC}")):
            wl._produce(
                producer, topic, key=rec[0], value=rec[1], partition=p, timestamp=rec[2], headers=wl.HEADERS,
                on_delivery=on_delivery,
            )  # fmt: skip
        n = seq // partitions
        if replay and per[p] // 2 - replay <= n < per[p] // 2:
            kept[p].append(rec)
        if replay and n == per[p] // 2 - 1:  # MM2 restarted here and replays its last ``replay`` records
            for key, value, ts in kept.pop(p):
                wl._produce(
                    pb, f"A.{TOPIC}", key=key, value=value, partition=p, timestamp=ts, headers=wl.HEADERS,
                    on_delivery=on_delivery,
                )  # fmt: skip
        if seq % 10_000 == 0:
            pa.poll(0)
            pb.poll(0)
    for producer in (pa, pb):
        producer.flush(300)
    wl._check(errors, "loading")
    return per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--replay", type=int, default=1000)
    ap.add_argument("--base-port", type=int, default=31300)
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--shards", type=int, default=1, help="processes sharing the partitions (--shard I/N)")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="sparkmirror-index-history-"))
    clusters = DevClusters(work / "clusters")
    try:
        boot = clusters.up(["A", "B"], base_port=args.base_port)
        a, b = boot["A"], boot["B"]
        wl.create_topic(a, TOPIC, args.partitions)
        wl.create_topic(b, f"A.{TOPIC}", args.partitions)
        t0 = time.monotonic()
        per = _load(a, b, args.records, args.partitions, args.size, args.replay, args.seed)
        print(f"loaded {args.records:,} records on A and their copy on B in {time.monotonic() - t0:.0f}s", flush=True)
        wl.create_topic(b, "mm2-offsets.A.internal", 1)
        producer = Producer({"bootstrap.servers": b, "acks": "all"})
        for key, value in handback_records({(TOPIC, p): n for p, n in per.items()}, "A", {}):
            producer.produce("mm2-offsets.A.internal", key=key, value=value, partition=0)
        assert producer.flush(60) == 0
        commit_offsets(
            {"bootstrap.servers": b}, progress_group("A", "B"), {(f"A.{TOPIC}", p): n for p, n in per.items()}
        )
        cfg = work / "mm2.properties"
        cfg.write_text(
            f"clusters = A, B\nA.bootstrap.servers = {a}\nB.bootstrap.servers = {b}\nA->B.enabled = true\n"
            f"A->B.topics = {TOPIC}\nreplication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
            f"checkpoints.topic.replication.factor = 1\nheartbeats.topic.replication.factor = 1\n"
        )
        subprocess.run(["sync"], check=False)
        time.sleep(10)  # let the written pages settle
        cmd = [sys.executable, "-m", "sparkmirror", "offsets", "index-history", str(cfg), "--json"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t1 = time.monotonic()
        procs = [
            subprocess.Popen(
                [*cmd, "--shard", f"{i}/{args.shards}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for i in range(args.shards)
        ]
        outs = [p.communicate() for p in procs]
        wall = time.monotonic() - t1
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        parts = []
        for proc, (out, err) in zip(procs, outs, strict=True):
            if proc.returncode != 0:
                raise SystemExit(f"index-history failed ({proc.returncode}): {err[-3000:]}")
            parts += json.loads(out)[0]["partitions"]
        done_stderr = outs[0][1]
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        mapped = sum(p["records"] for p in parts)
        read = sum(p["records_read"] for p in parts)
        nbytes = sum(p["bytes_read"] for p in parts)
        result = {
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": " ".join(["bench/index_history.py", *sys.argv[1:]]),
            "records": args.records,
            "partitions": args.partitions,
            "size": args.size,
            "replay_per_partition": args.replay,
            "remote_records_mapped": mapped,
            "records_read_both_logs": read,
            "bytes_read_both_logs": nbytes,
            "segments": sum(p["segments"] for p in parts),
            "wall_s": round(wall, 2),
            "shards": args.shards,
            # The partitions' own time, summed over the processes (without their start and the plan).
            "indexing_s": round(sum(p["seconds"] for p in parts), 2),
            "remote_records_per_s_indexing": round(mapped * args.shards / sum(p["seconds"] for p in parts)),
            "cpu_s": round(cpu, 2),
            "remote_records_per_s_wall": round(mapped / wall),
            "remote_records_per_cpu_s": round(mapped / cpu),
            "mb_per_s_wall_both_logs": round(nbytes / 1e6 / wall, 1),
            "remote_mb_per_cpu_s": round(mapped * args.size / 1e6 / cpu, 1),
            "cores": os.cpu_count(),
        }
        suffix = f"-{args.shards}-shards" if args.shards > 1 else ""
        out = Path(__file__).parent / "results" / f"index-history-{dt.date.today().isoformat()}{suffix}.json"
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        print(done_stderr[-2000:], file=sys.stderr)
    finally:
        clusters.down()


if __name__ == "__main__":
    main()
