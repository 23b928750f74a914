"""The bare client's cost per record: what any copy written with confluent-kafka pays at least.

One process reads half of the scale layout's partitions (200 topics x 5, the first 4 topics holding
half of the records, as ``--scenario scale``) from A with a task's reader settings, and writes every
record to B through ``--producers`` producers (32: a copy task's at 500 partitions), each partition
always through the same one, with nothing else: no
checks, no progress, no offset map. It prints the records per second and the CPU per record of its
own process (librdkafka's threads included), for three loops on the same data:

- ``consume``: reading only;
- ``produce``: reading and producing, without a Python callback for the delivery reports;
- ``acked``: reading and producing with a delivery callback per record (what a copy that must know
  each record's target offset needs).

    .venv/bin/python bench/client_floor.py [--records 4000000] [--producers 32] [--base-port 31400] [--out FILE]

docs/performance.md, "32 producers per task", has what it found.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402

import scale  # noqa: E402
from sparkmirror.devcluster.cluster import DevClusters  # noqa: E402
from sparkmirror.pipeline.executor.plan import READER_DEFAULTS, READER_SETTINGS  # noqa: E402

LAYOUT = scale.Scale(topics=200, partitions=5, hot=4, groups=0, prefix="floor-")


def copy(a: str, b: str, loop: str, producers_n: int) -> dict[str, Any]:
    consumer = Consumer({**READER_DEFAULTS, **READER_SETTINGS, "bootstrap.servers": a, "group.id": "client-floor"})
    every = [(t, p) for t in LAYOUT.names() for p in range(LAYOUT.partitions)]
    mine = [TopicPartition(t, p, 0) for i, (t, p) in enumerate(every) if i % 2 == 0]  # one task's half
    consumer.assign(mine)
    producers = [
        Producer({"bootstrap.servers": b, "acks": "all", "enable.idempotence": "true", "linger.ms": "5"})
        for _ in range(producers_n)
    ]
    failed: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    slot = {(tp.topic, tp.partition): i % producers_n for i, tp in enumerate(mine)}
    callback = delivered if loop == "acked" else None
    ended: set[tuple[str, int]] = set()
    n = 0
    wall, cpu = time.monotonic(), time.process_time()
    while len(ended) < len(mine):
        first = consumer.poll(1.0)
        if first is None:
            continue
        for m in [first, *consumer.consume(9_999, 0)]:
            key = (m.topic(), m.partition())
            err = m.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"reading {key}: {err}")
                ended.add(key)
                continue
            n += 1
            if loop == "consume":
                continue
            producer = producers[slot[key]]
            while True:
                try:
                    producer.produce(
                        "A." + key[0], m.value(), m.key(), key[1], callback, None, m.timestamp()[1], m.headers()
                    )
                    break
                except BufferError:  # the producer's queue is full: let B catch up
                    producer.poll(0.05)
        for producer in producers:
            producer.poll(0)
    left = sum(producer.flush(120) for producer in producers)
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    consumer.close()
    if failed or left:
        raise RuntimeError(f"{len(failed)} records failed, {left} not delivered, first: {failed[:1]}")
    return {
        "loop": loop,
        "producers": producers_n,
        "records": n,
        "records_per_s": round(n / wall),
        "cpu_us_per_record": round(cpu / n * 1e6, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--producers", type=int, default=32)
    ap.add_argument("--base-port", type=int, default=31400)
    ap.add_argument("--out", default="", help="also append the JSON lines to this file")
    ap.add_argument("--workdir", default="/tmp/sparkmirror-client-floor")
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)  # fresh clusters: the load is appended once
    clusters = DevClusters(Path(a.workdir) / "dev")
    boots = clusters.up(["A", "B"], base_port=a.base_port)
    try:
        topics = dict.fromkeys(LAYOUT.names(), LAYOUT.partitions)
        scale.create_topics(boots["A"], topics)
        scale.load(boots["A"], LAYOUT.records_per_topic(a.records), LAYOUT.partitions, a.size, 1)
        remotes = {"A." + t: n for t, n in topics.items()}
        scale.create_topics(boots["B"], remotes)
        for loop in ("consume", "produce", "acked"):
            line = json.dumps(copy(boots["A"], boots["B"], loop, a.producers))
            print(line, flush=True)
            if a.out:
                with open(a.out, "a") as out:
                    out.write(line + "\n")
            scale.truncate(boots["B"], remotes)
    finally:
        clusters.down()


if __name__ == "__main__":
    main()
