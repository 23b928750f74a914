"""What the copy task's reader does when a topic it reads is deleted and created again at once.

A source topic re-created under its name is another topic: sparkmirror must not copy it as the old
one's continuation. This probe shows whether librdkafka's consumer notices by itself: it starts one
dev cluster, reads ``--old`` records of a one-partition topic with the copy task's reader settings,
deletes the topic, creates it again, produces ``--new`` records into it and prints what the consumer
hands for ``--seconds``: an error, or records of the new topic at the old offsets.

    .venv/bin/python bench/recreate_read.py [--old 50] [--new 100] [--seconds 20]

docs/performance.md ("Session 38: the same idle flow, thread by thread") has what it found.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sparkmirror.devcluster.cluster import DevClusters
from sparkmirror.pipeline.executor.plan import READER_DEFAULTS, READER_SETTINGS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=int, default=50, help="records of the topic before it is re-created")
    ap.add_argument("--new", type=int, default=100, help="records of the re-created topic")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--base-port", type=int, default=31600)
    ap.add_argument("--workdir", default="/tmp/sparkmirror-recreate-read")
    args = ap.parse_args()
    clusters = DevClusters(Path(args.workdir))
    try:
        boot = clusters.up(["A"], base_port=args.base_port)["A"]
        admin = AdminClient({"bootstrap.servers": boot})

        def create() -> None:
            for f in admin.create_topics([NewTopic("t", 1, 1)]).values():
                f.result()

        create()
        producer = Producer({"bootstrap.servers": boot})
        for i in range(args.old):
            producer.produce("t", value=b"old%d" % i)
        producer.flush(30)
        reader = {"bootstrap.servers": boot, "group.id": "recreate-read", **READER_SETTINGS, **READER_DEFAULTS}
        consumer = Consumer(reader)
        consumer.assign([TopicPartition("t", 0, 0)])
        read, t0 = 0, time.monotonic()
        while read < args.old and time.monotonic() - t0 < 30:
            m = consumer.poll(0.5)
            read += m is not None and m.error() is None
        print(f"read {read} records of the old topic", flush=True)
        for f in admin.delete_topics(["t"]).values():
            f.result()
        while True:
            try:
                create()
                break
            except Exception:  # noqa: BLE001 - the deletion is still under way
                time.sleep(0.2)
        for i in range(args.new):
            producer.produce("t", value=b"new%d" % i)
        producer.flush(30)
        print("re-created the topic and produced into it", flush=True)
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.seconds:
            m = consumer.poll(0.5)
            if m is None:
                continue
            at = f"{time.monotonic() - t0:.1f}s"
            if m.error() is not None:
                print(at, "error:", m.error().name(), m.error().str(), flush=True)
            else:
                print(at, "record at offset", m.offset(), m.value(), flush=True)
        consumer.close()
    finally:
        clusters.down()


if __name__ == "__main__":
    main()
