"""Reproduce librdkafka's crash in the admin ``ListConsumerGroupOffsets`` call.

An admin client has no consumer-group handle (``rk_cgrp`` is NULL), yet the
OffsetFetch response handler it shares with the consumer
(``rd_kafka_handle_OffsetFetch`` in ``rdkafka_request.c``) answers a
``NOT_COORDINATOR`` or ``COORDINATOR_NOT_AVAILABLE`` error by queueing a
coordinator query on ``rk->rk_cgrp``: SIGSEGV. A broker answers so while a
``__consumer_offsets`` partition is not yet loaded (cluster start) or after
its leadership moved (a broker restart).

This script starts a fresh one-broker dev cluster and, in a child process,
asks for the offsets of new groups through ``AdminClient`` from the first
second on; the child's exit status says whether it crashed (-11). With
``--consumer`` the child reads the same offsets through a consumer that
carries the group id (sparkmirror's old workaround), which survives. With
``--reader`` this process reads batches of new groups through sparkmirror's
``GroupOffsetReader`` (the admin call in a child process it restarts) and
says which batches came back failed because the child died.

    .venv/bin/python bench/admin_offsetfetch_crash.py [--consumer | --reader] [--tries 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import uuid

CHILD = r"""
import sys, time, uuid
from confluent_kafka import Consumer, TopicPartition, ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient
bootstrap, mode = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
deadline = time.monotonic() + 20
n = ok = 0
errors = {}
while time.monotonic() < deadline:
    group = f"crash-{uuid.uuid4().hex[:8]}"
    n += 1
    try:
        if mode == "admin":
            req = [ConsumerGroupTopicPartitions(group, [TopicPartition("t", 0)])]
            admin.list_consumer_group_offsets(req, request_timeout=5)[group].result()
        else:
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
            try:
                c.committed([TopicPartition("t", 0)], timeout=5)
            finally:
                c.close()
        ok += 1
    except Exception as exc:
        key = str(exc)[:80]
        errors[key] = errors.get(key, 0) + 1
print(f"{mode}: {n} reads, {ok} answered, errors {errors}", flush=True)
"""


def _through_reader(bootstrap: str, attempt: int) -> int:
    from sparkmirror.kafka.groupreader import GroupOffsetReader

    reader = GroupOffsetReader({"bootstrap.servers": bootstrap})
    try:
        for i in range(5):
            reads = reader.read([f"crash-{uuid.uuid4().hex[:8]}" for _ in range(20)], timeout_s=5)
            why = next(iter(reads.failed.values()), "")
            print(
                f"try {attempt} read {i + 1}: {len(reads.positions)} groups answered, {len(reads.failed)} failed"
                f"{f' ({why})' if why else ''}; children lost so far: {reader.crashes}"
            )
        return reader.crashes
    finally:
        reader.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--consumer", action="store_true", help="read through a consumer per group instead")
    parser.add_argument("--reader", action="store_true", help="read through sparkmirror's GroupOffsetReader")
    parser.add_argument("--tries", type=int, default=3, help="fresh clusters to try")
    parser.add_argument("--base-port", type=int, default=28400)
    args = parser.parse_args()

    import confluent_kafka

    from sparkmirror.devcluster.cluster import DevClusters

    mode = "reader" if args.reader else "consumer" if args.consumer else "admin"
    print(f"confluent-kafka {confluent_kafka.version()}, librdkafka {confluent_kafka.libversion()[0]}, mode={mode}")
    crashes = 0
    for attempt in range(1, args.tries + 1):
        with tempfile.TemporaryDirectory() as tmp:
            clusters = DevClusters(tmp)
            alias = f"X{uuid.uuid4().hex[:4]}"
            try:
                bootstrap = clusters.up([alias], base_port=args.base_port)[alias]
                if args.reader:
                    crashes += _through_reader(bootstrap, attempt)
                    continue
                t0 = time.monotonic()
                child = subprocess.run(
                    [sys.executable, "-c", CHILD, bootstrap, mode], capture_output=True, text=True, timeout=120
                )
                took = time.monotonic() - t0
            finally:
                clusters.down()
        crashed = child.returncode < 0
        crashes += crashed
        status = f"killed by signal {-child.returncode}" if crashed else f"exit {child.returncode}"
        print(f"try {attempt}: child {status} after {took:.1f}s; {child.stdout.strip() or child.stderr.strip()[-300:]}")
    if args.reader:
        print(f"reader children lost in {args.tries} fresh clusters: {crashes}; every later read answered")
    else:
        print(f"{crashes} of {args.tries} children crashed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
