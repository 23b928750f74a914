"""What an idle copy task's Kafka clients cost on their own: librdkafka producers, the reader, the admin.

`bench/idle_flow.py` measures a whole idle flow; this probe takes the clients of one task of the
scale layout (500 partitions, 32 producers) apart, in one process against one dev broker, with
nothing to copy: one 20 s window of this process's CPU (percent of one core) per step, each step
adding a client to the ones before:

- ``clients``: 32 idle idempotent producers (each wrote one record to its 16 partitions first);
  then with the task's reader of 500 partitions at ``fetch.wait.max.ms`` 500, then 1,000; then an
  admin client describing the 100 topics every 5 s (the task's topic-id check); then that admin idle.
- ``producers``: 32 producers alone, idempotent, plain, and idempotent with sparse connections.
- ``reader``: the task's reader of 500 partitions alone, at each ``fetch.wait.max.ms`` of ``--waits``.

    .venv/bin/python bench/idle_clients.py [clients|producers|reader] [--base-port 31300] [--waits 500,1000]

One JSON line per step; docs/performance.md ("An idle flow of 1,000 partitions") has what it found.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import scale  # noqa: E402
from sparkmirror.devcluster.cluster import DevClusters  # noqa: E402

TOPICS = {f"{scale.PREFIX}{i:03d}": 5 for i in range(100)}


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(label: str, seconds: float = 20, step: Callable[[], None] | None = None) -> None:
    """Percent of one core this process used over ``seconds``, calling ``step`` (or sleeping 0.5 s) in a loop."""
    c0, t0 = cpu(), time.monotonic()
    while time.monotonic() - t0 < seconds:
        if step is not None:
            step()
        else:
            time.sleep(0.5)
    print(json.dumps({label: round(100 * (cpu() - c0) / (time.monotonic() - t0), 3)}), flush=True)


def producers(boot: str, extra: dict[str, Any]) -> list[Any]:
    """32 producers, each having written one record to each of its 16 partitions (as a task's)."""
    from confluent_kafka import Producer

    out = []
    for i in range(32):
        p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 10, "enable.idempotence": True, **extra})
        for j in range(16):
            k = i * 16 + j
            p.produce(f"{scale.PREFIX}{k // 5:03d}", b"x", partition=k % 5)
        p.flush(30)
        out.append(p)
    time.sleep(3)
    return out


def reader(boot: str, wait: str) -> Any:
    """The task's reader of the 500 partitions at ``fetch.wait.max.ms`` ``wait``, caught up."""
    from confluent_kafka import Consumer, TopicPartition

    from sparkmirror.pipeline.executor.plan import READER_DEFAULTS, READER_SETTINGS

    # The task's own settings (pipeline/executor/plan.py), the wait measured instead of its default.
    conf = {**READER_DEFAULTS, **READER_SETTINGS, "fetch.wait.max.ms": wait}
    c = Consumer({"bootstrap.servers": boot, "group.id": f"idle-clients-{wait}", **conf})
    c.assign([TopicPartition(t, p, 0) for t, n in TOPICS.items() for p in range(n)])
    while c.poll(2) is not None:
        pass
    return c


def readers(boot: str, waits: list[str], label: str = "") -> None:
    for wait in waits:
        c = reader(boot, wait)
        measure(f"{label}consumer of 500 partitions, fetch.wait.max.ms {wait}", step=lambda c=c: c.poll(0.5))
        c.close()


def clients(boot: str, waits: list[str]) -> None:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    measure("nothing", 10)
    kept = producers(boot, {})
    measure("32 idle producers")
    readers(boot, waits, "32 producers + ")
    admin = AdminClient({"bootstrap.servers": boot})
    due = [0.0]

    def check() -> None:
        now = time.monotonic()
        if now >= due[0]:
            due[0] = now + 5
            for f in admin.describe_topics(TopicCollection(sorted(TOPICS)), request_timeout=30).values():
                f.result()
        time.sleep(0.5)

    measure("32 producers + admin describing 100 topics every 5 s", step=check)
    measure("32 producers + idle admin")
    del kept


def producer_variants(boot: str, _waits: list[str]) -> None:
    for label, extra in [
        ("32 idempotent producers", {}),
        ("32 plain producers", {"enable.idempotence": False}),
        ("32 idempotent producers, enable.sparse.connections", {"enable.sparse.connections": True}),
    ]:
        kept = producers(boot, extra)
        measure(label)
        del kept
        time.sleep(2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="?", default="clients", choices=["clients", "producers", "reader"])
    ap.add_argument("--waits", default="500,1000", help="the reader's fetch.wait.max.ms values, comma-separated")
    ap.add_argument("--base-port", type=int, default=31300)
    ap.add_argument("--workdir", default="/tmp/sparkmirror-idle-clients")
    args = ap.parse_args()
    cluster = DevClusters(Path(args.workdir) / "dev")
    try:
        boot = cluster.up(["A"], base_port=args.base_port)["A"]
        scale.create_topics(boot, TOPICS)
        waits = args.waits.split(",")
        if args.what == "reader":
            del producers(boot, {})[:]  # a record in each partition, then no producer
            measure("nothing", 10)
            readers(boot, waits)
        else:
            (clients if args.what == "clients" else producer_variants)(boot, waits)
    finally:
        cluster.down()


if __name__ == "__main__":
    main()
