"""How long a group's offset lookup takes with sparkmirror's client API, 1,000 groups in the checkpoints topic.

Starts one local cluster (its own directory and ports), writes ``--groups`` groups x
``--partitions`` partitions of MM2 checkpoints into ``<alias>.checkpoints.internal``
(``--rounds`` times each, as a topic that compaction has not yet cleaned holds several
checkpoints per key), then measures with :mod:`sparkmirror.client`:

* cold: the first lookup of a new client (its consumer starts, the whole topic is read);
* warm: ``--lookups`` lookups of random groups on the same client (one end-offset request each);
* warm + 1 new: a checkpoint is appended before each lookup, which reads just that record;
* naive: a new client per lookup, re-reading the whole topic, as Kafka's
  ``RemoteClusterUtils.translateOffsets`` does (``--naive`` lookups).

Writes ``bench/results/<date>-client-lookup.json`` and prints a table.

    .venv/bin/python bench/client_lookup.py [--groups 1000] [--partitions 8] [--lookups 1000] [--naive 20]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sparkmirror.client import MirrorClient, TopicPartition
from sparkmirror.core.formats import Checkpoint
from sparkmirror.devcluster.cluster import DevClusters

ALIAS = "A"


def write_checkpoints(bootstrap: str, topic: str, groups: list[str], partitions: int, rounds: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})]).values():
        f.result()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    written = 0
    for r in range(rounds):
        for g in groups:
            for part in range(partitions):
                c = Checkpoint(g, f"{ALIAS}.orders", part, 1000 * r + part + 10, 1000 * r + part)
                while True:
                    try:
                        p.produce(topic, key=c.key_bytes(), value=c.value_bytes(), partition=0)
                        break
                    except BufferError:
                        p.poll(0.05)
                written += 1
    assert p.flush(120) == 0
    return written


def stats_ms(samples_s: list[float]) -> dict[str, float]:
    xs = sorted(s * 1000 for s in samples_s)
    pick = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]  # noqa: E731
    return {
        "n": len(xs),
        "p50_ms": pick(0.50),
        "p99_ms": pick(0.99),
        "mean_ms": statistics.fmean(xs),
        "max_ms": xs[-1],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--lookups", type=int, default=1000)
    ap.add_argument("--appends", type=int, default=200)
    ap.add_argument("--naive", type=int, default=20)
    args = ap.parse_args()
    rng = random.Random(5)
    load_before = os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="sparkmirror-bench-client."))
    clusters = DevClusters(workdir / "dev")
    bootstrap = clusters.up(["B"], base_port=33092)["B"]
    try:
        topic = f"{ALIAS}.checkpoints.internal"
        groups = [f"group-{i:04d}" for i in range(args.groups)]
        records = write_checkpoints(bootstrap, topic, groups, args.partitions, args.rounds)
        print(f"{records:,} checkpoints of {args.groups:,} groups x {args.partitions} partitions in {topic}")
        expected = {TopicPartition(f"{ALIAS}.orders", p): 1000 * (args.rounds - 1) + p for p in range(args.partitions)}

        with MirrorClient(bootstrap) as mc:
            t0 = time.perf_counter()
            assert mc.translate_offsets(ALIAS, groups[0]) == expected
            cold = [time.perf_counter() - t0]
            assert mc.index(ALIAS).records_read == records

            warm = []
            for _ in range(args.lookups):
                g = rng.choice(groups)
                t0 = time.perf_counter()
                got = mc.translate_offsets(ALIAS, g)
                warm.append(time.perf_counter() - t0)
                assert len(got) == args.partitions
            assert mc.index(ALIAS).records_read == records  # nothing re-read

            producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
            appended = []
            for i in range(args.appends):
                g = rng.choice(groups)
                c = Checkpoint(g, f"{ALIAS}.orders", 0, 10**6 + i + 1, 10**6 + i)
                producer.produce(topic, key=c.key_bytes(), value=c.value_bytes(), partition=0)
                assert producer.flush(30) == 0
                t0 = time.perf_counter()
                got = mc.translate_offsets(ALIAS, g)
                appended.append(time.perf_counter() - t0)
                assert got[TopicPartition(f"{ALIAS}.orders", 0)] == 10**6 + i
            assert mc.index(ALIAS).records_read == records + args.appends  # one record per lookup

        naive = []
        for _ in range(args.naive):
            g = rng.choice(groups)
            t0 = time.perf_counter()
            with MirrorClient(bootstrap) as fresh:
                fresh.translate_offsets(ALIAS, g)
            naive.append(time.perf_counter() - t0)

        results = {
            "cold": stats_ms(cold),
            "warm": stats_ms(warm),
            "warm_one_new_record": stats_ms(appended),
            "naive_reread": stats_ms(naive),
        }
        print(f"{'lookup':<34}{'n':>6}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}")
        labels = {
            "cold": "cold (first lookup, full read)",
            "warm": "warm (random groups)",
            "warm_one_new_record": "warm, 1 new checkpoint each",
            "naive_reread": "naive (new client, full re-read)",
        }
        for key, label in labels.items():
            r = results[key]
            print(f"{label:<34}{r['n']:>6}{r['p50_ms']:>10.2f}{r['p99_ms']:>10.2f}{r['mean_ms']:>10.2f}")
        speedup = results["naive_reread"]["p50_ms"] / results["warm"]["p50_ms"]
        print(f"warm lookup is {speedup:,.0f}x faster than re-reading the topic (p50)")
        out: dict[str, Any] = {
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": "bench/client_lookup.py " + " ".join(f"--{k} {v}" for k, v in vars(args).items()),
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
                # The machine is shared: the 1-minute load average before and after the run.
                "load_average_1m": [load_before[0], os.getloadavg()[0]],
            },
            "workload": {**vars(args), "records_in_topic": records},
            "results": results,
            "warm_speedup_p50": speedup,
        }
        path = Path(__file__).parent / "results" / f"{dt.date.today().isoformat()}-client-lookup.json"
        path.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {path}")
    finally:
        clusters.down()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
