"""The producer alone: CPU per record of confluent-kafka's produce path against a real broker.

What a record costs the writing process (its librdkafka threads included) and the broker, for
variants run in turn (``--runs`` rounds, each variant once a round, fresh producers each run):

- ``--topics``: how many topics the records go to. librdkafka finds a record's topic by name among
  every topic its producer knows, one comparison each, on every ``produce`` call.
- ``--producers``: the topics shared out over this many producers (by a CRC of the name).
- ``--reports``: ``each`` (a delivery report per record, as the sink has) or ``sparse`` (one on
  every 500th record only): what the per-record report costs.

Half of the records go to the first 4 topics, in runs of 100 records a partition (the direct
reader hands the sink such runs), 200 B values with one header, the benchmark's producer settings.

    .venv/bin/python bench/produce_cost.py [--records 1000000] [--topics 1,200] [--producers 1]
        [--reports each,sparse] [--runs 3]
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import tempfile
import time
import zlib
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sparkmirror.devcluster.cluster import DevClusters
from sparkmirror.kafka.clients import producer_config

PARTITIONS = 5
RUN = 100  # records a partition in a row


def cluster_cpu_s(workdir: Path) -> float:
    """CPU seconds used so far by the processes whose command line names ``workdir`` (the broker)."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if str(workdir).encode() not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            continue
    return total / os.sysconf("SC_CLK_TCK")


def one_run(bootstrap: str, workdir: Path, records: int, topics: list[str], producers: int, sparse: bool) -> tuple:
    conf = producer_config({"bootstrap.servers": bootstrap, "linger.ms": "10", "batch.size": "262144"})
    ps = [Producer(conf) for _ in range(producers)]
    owner = {t: ps[zlib.crc32(t.encode()) % producers] for t in topics}
    hot, cold = topics[:4], topics[4:] or topics[:4]
    acks: list[int] = []

    def report(err: object, msg: object) -> None:
        if err is None:
            acks.append(msg.offset())  # type: ignore[attr-defined]

    value, headers, now = os.urandom(200), [("h", b"1")], int(time.time() * 1000)
    t0, c0, b0 = time.perf_counter(), time.process_time(), cluster_cpu_s(workdir)
    for i in range(records):
        j = i // RUN
        topic = hot[j % len(hot)] if j % 2 == 0 else cold[(j // 2) % len(cold)]
        p = owner[topic]
        callback = report if not sparse or i % 500 == 499 else None
        while True:
            try:
                p.produce(topic, value, b"k", (j // 8) % PARTITIONS, callback, None, now, headers)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1024 == 0:
            for q in ps:
                q.poll(0)
    for q in ps:
        q.flush(120)
    elapsed, cpu, broker = time.perf_counter() - t0, time.process_time() - c0, cluster_cpu_s(workdir) - b0
    expected = records if not sparse else records // 500
    assert len(acks) == expected, f"{len(acks)} acknowledged of {expected}"
    for q in ps:
        q.close()
    return records / elapsed, cpu / records * 1e6, broker / records * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--topics", default="1,200")
    ap.add_argument("--producers", default="1")
    ap.add_argument("--reports", default="each,sparse")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--base-port", type=int, default=29500)
    args = ap.parse_args()
    counts = [int(x) for x in args.topics.split(",")]
    variants = list(itertools.product(counts, [int(x) for x in args.producers.split(",")], args.reports.split(",")))
    workdir = Path(tempfile.mkdtemp(prefix="sparkmirror-produce."))
    clusters = DevClusters(workdir / "dev")
    try:
        bootstrap = clusters.up(["B"], base_port=args.base_port)["B"]
        names = {n: [f"t{n}-{i:03d}" for i in range(n)] for n in counts}
        new = [NewTopic(t, PARTITIONS, 1) for ts in names.values() for t in ts]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics(new).values():
            f.result()
        time.sleep(3)
        results: dict[tuple, list[tuple[float, float, float]]] = {v: [] for v in variants}
        for _ in range(args.runs):
            for v in variants:
                n, producers, reports = v
                r = one_run(bootstrap, workdir, args.records, names[n], producers, reports == "sparse")
                results[v].append(r)
                print(f"{n} topics, {producers} producers, reports {reports}: {r[0]:,.0f} records/s, "
                      f"{r[1]:.2f} CPU us/record here, {r[2]:.2f} in the broker", flush=True)  # fmt: skip
        for (n, producers, reports), rs in results.items():
            print(f"median of {len(rs)}: {n} topics, {producers} producers, reports {reports}: "
                  f"{statistics.median(r[1] for r in rs):.2f} CPU us/record here, "
                  f"{statistics.median(r[2] for r in rs):.2f} in the broker")  # fmt: skip
    finally:
        clusters.down()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
