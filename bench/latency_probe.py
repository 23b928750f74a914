"""Latency at many partitions, split into its source part and its copy part.

The scale scenario's latency (bench/scale.py) is B's append time minus the record's producer
timestamp: it holds the paced producer's own wait to get the record onto A, the same for every
system and, at 1,000 partitions, most of the figure and of its spread. This probe makes A's topics
``LogAppendTime`` too, so each record's latency splits into

- *source*: A's append - the producer's timestamp (the load generator and broker A), and
- *copy*: B's append - A's append (the replicator),

and reports the copy part's p99 second by second and the CPU seconds of each broker and of the
system during the load (``--threads``: the system's by role and thread name too, such as the CPU of
librdkafka's threads in the Python workers, from ``idle_flow.py``'s snapshots: threads that started
within the round count whole, threads that ended within it are not seen).
``--visible`` also reads B as the load runs, ``read_committed``, and takes each record's *visible*
latency: when that reader got it - A's append.
Exactly once, a record is appended to B when it is written and seen by a ``read_committed`` consumer
only at its transaction's commit, so the append (the copy part, and the scale scenario's figure)
understates what such a consumer waits; at least once the two differ by the reader's own delay.
One system per run, on two dev clusters of its own::

    .venv/bin/python bench/latency_probe.py
        [--system sparkmirror|mm2|limit|transport|transport-shared-jvm|spark-realtime] [--exactly-once]
        [--topics 200 --partitions 5 --rate 5000 --seconds 30] [--rounds N] [--prop KEY=VALUE ...]
        [--visible] [--groups 1000] [--linger-ms 10] [--threads]

Prints one JSON line per round (``--out FILE`` writes them all). docs/performance.md, "Latency at
1,000 partitions", has what it found.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import idle_flow  # noqa: E402
import replicators as rep  # noqa: E402
import scale  # noqa: E402
import workload as wl  # noqa: E402
from sparkmirror.devcluster.cluster import DevClusters  # noqa: E402

APPEND = {"message.timestamp.type": "LogAppendTime"}
#: What names a process of the system under test in its command line.
SYSTEM_PROCESSES = (
    "pyspark", "sparkmirror", "MirrorMaker", "CopyLoop", "TransportLoop", "transport_loop", "realtime_mode"
)


def latency_records(bootstrap: str, topics: dict[str, int], first_seq: int) -> dict[int, tuple[int, int]]:
    """Key sequence -> (record timestamp, producer timestamp in the value) of every latency record at
    or past ``first_seq`` (on a LogAppendTime topic the record timestamp is the broker's append time)."""
    out: dict[int, tuple[int, int]] = {}
    for m in scale.read_back(bootstrap, scale.end_offsets(bootstrap, topics), group="latency-probe"):
        key = m.key() or b""
        if key[:1] == b"L" and int(key[1:]) >= first_seq:
            out[int(key[1:])] = (m.timestamp()[1], wl._TS.unpack_from(m.value() or bytes(8))[0])
    return out


class VisibleReader(threading.Thread):
    """A ``read_committed`` consumer of B's remote partitions from their ends now: the wall-clock ms at
    which it got each latency record (key sequence -> ms), until :meth:`stop`."""

    def __init__(self, bootstrap: str, remotes: dict[str, int]) -> None:
        super().__init__(daemon=True, name="visible-reader")
        from confluent_kafka import Consumer, TopicPartition

        ends = scale.end_offsets(bootstrap, remotes, committed=True)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": "latency-probe-visible", "isolation.level": "read_committed",
            "enable.auto.commit": False, "fetch.wait.max.ms": 100, "fetch.error.backoff.ms": 10,
        })  # fmt: skip
        self.consumer.assign([TopicPartition(t, p, end) for (t, p), end in ends.items()])
        self.seen: dict[int, int] = {}
        self.failed = ""
        self._done = threading.Event()

    def run(self) -> None:
        seen = self.seen
        consumer = self.consumer
        try:
            while not self._done.is_set():
                # The first record as soon as it comes, its time taken then; then what is already there
                # (``consume`` with a timeout would wait it out unless its batch filled).
                first = consumer.poll(0.1)
                if first is None:
                    continue
                now = int(time.time() * 1000)
                for m in [first, *consumer.consume(10_000, 0)]:
                    key = m.key()
                    if m.error() is None and key and key[:1] == b"L":
                        seen.setdefault(int(key[1:]), now)
        except Exception as exc:  # noqa: BLE001 - said, and the missed records counted by the caller
            self.failed = f"{type(exc).__name__}: {exc}"
        finally:
            consumer.close()

    def stop(self) -> dict[int, int]:
        """The records seen; raises if the reader failed or did not stop."""
        self._done.set()
        self.join(30)
        if self.is_alive() or self.failed:
            raise RuntimeError(f"the visible reader {'did not stop' if self.is_alive() else self.failed}")
        return dict(self.seen)


def cpu_by_role() -> dict[str, float]:
    """CPU seconds so far of broker A, broker B, the load generator and the system under test (its live
    processes), from /proc. Before 2026-12-02 the Java load generator counted as the system's."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if "dev/A/broker" in cmd:
            role = "broker_A"
        elif "dev/B/broker" in cmd:
            role = "broker_B"
        elif "latency_probe" in cmd:
            continue
        elif "PacedLoad" in cmd:  # its class path names ~/.cache/sparkmirror: before the system's markers
            role = "load"
        elif any(s in cmd for s in SYSTEM_PROCESSES):
            role = "system"
        else:
            continue
        out[role] = out.get(role, 0.0) + (int(stat[11]) + int(stat[12])) / tick
    return out


def pct(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))]


def visible(seen: dict[int, int], on_a: dict[int, tuple[int, int]], keys: list[int]) -> dict[str, Any]:
    """The visible latency (the ``read_committed`` reader's receipt - A's append) of ``keys``, and how
    many of them the reader did not get."""
    got = [seen[k] - on_a[k][0] for k in keys if k in seen]
    if not got:
        return {"visible_p50_p99_max": None, "visible_missed": len(keys)}
    return {"visible_p50_p99_max": (pct(got, 50), pct(got, 99), max(got)), "visible_missed": len(keys) - len(got)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--system", default="sparkmirror", choices=[s for s in rep.PROBE_SYSTEMS if s != "sparkmirror-eos"])
    ap.add_argument("--exactly-once", action="store_true", help="sparkmirror: exactly once")
    ap.add_argument("--topics", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=5, help="per topic")
    ap.add_argument("--rate", type=float, default=5000, help="offered records/s")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--warmup", type=float, default=5, help="seconds of paced load, not measured, before each round")
    ap.add_argument("--base-port", type=int, default=31300)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--prop", action="append", default=[], metavar="KEY=VALUE", help="sparkmirror: extra property")
    ap.add_argument("--generator", default="java", choices=["java", "librdkafka"],
                    help="the load generator's client (scale.offer)")  # fmt: skip
    ap.add_argument("--generator-producers", type=int, default=4, help="java generator: producers (connections)")
    ap.add_argument("--visible", action="store_true",
                    help="also read B read_committed as the load runs: each record's visible latency")  # fmt: skip
    ap.add_argument(
        "--broker-jit",
        default="full",
        choices=["full", "first-tier"],
        help="the brokers' JIT (bench/run.py's option; first-tier: every probe run before 2026-12-01)",
    )
    ap.add_argument("--groups", type=int, default=0,
                    help="consumer groups committed on A before the system starts (the scale scenario's 1,000), "
                    "each on 1-3 partitions of a topic loaded with 10 records a partition first")  # fmt: skip
    ap.add_argument("--linger-ms", type=int, default=10, help="every system's producer linger.ms (the bench's 10)")
    ap.add_argument("--threads", action="store_true",
                    help="also each round's CPU of the system by role and thread name")  # fmt: skip
    ap.add_argument("--out", default="")
    ap.add_argument("--workdir", default="/tmp/sparkmirror-latency-probe")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    from run import broker_jvm_options

    dev = str(work / "dev")  # the brokers' folder, which idle_flow's roles tell a broker by
    clusters = DevClusters(Path(dev), broker_jvm_options=broker_jvm_options(args.broker_jit))
    boots = clusters.up(["A", "B"], base_port=args.base_port)
    proc = None
    try:
        topics = {f"{scale.PREFIX}{i:03d}": args.partitions for i in range(args.topics)}
        remotes = {rep.remote(t): n for t, n in topics.items()}
        scale.create_topics(boots["A"], topics, APPEND)
        scale.create_topics(boots["B"], remotes, APPEND)
        if args.groups:
            layout = scale.Scale(topics=args.topics, partitions=args.partitions, hot=0, groups=args.groups)
            scale.load(boots["A"], dict.fromkeys(topics, 10 * args.partitions), args.partitions, args.size, seed=6)
            ends = scale.end_offsets(boots["A"], topics)
            scale.commit_groups(boots["A"], scale.choose_positions(random.Random(6), layout, ends))
        common = rep.Common(bootstraps=boots, partitions=args.partitions, linger_ms=args.linger_ms, batch_size=262144,
                            compression="none", tasks_max=2, limit_threads=2,
                            sparkmirror_extra=dict(p.split("=", 1) for p in args.prop))  # fmt: skip
        jvm = rep.Jvm(work)
        eos = args.exactly_once and args.system == "sparkmirror"
        system = rep.probe_system("sparkmirror-eos" if eos else args.system, common, jvm)
        spec = ",".join(topics) if system.lists_topics else f"{scale.PREFIX}.*"
        with open(work / "system.log", "w") as log:
            proc = subprocess.Popen(system.command(work, spec, count=None), stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)  # fmt: skip
        results: list[dict[str, Any]] = []
        for r in range(args.rounds):
            start = sum(scale.end_offsets(boots["A"], topics).values())
            cpu0 = cpu_by_role()
            threads0 = idle_flow.system_threads(proc.pid, dev) if args.threads else {}
            java = jvm if args.generator == "java" else None
            reader = VisibleReader(boots["B"], remotes) if args.visible else None
            if reader is not None:
                reader.start()
            lat = scale.latency(boots, topics, args.size, args.rate, args.seconds, 240, args.warmup,
                                jvm=java, generator_producers=args.generator_producers)  # fmt: skip
            cpu1 = cpu_by_role()
            threads = None
            if args.threads:
                used = idle_flow.thread_seconds(threads0, idle_flow.system_threads(proc.pid, dev))
                threads = {k: round(v, 2) for k, v in used.items()}
            seen: dict[int, int] = {}
            if reader is not None:
                time.sleep(10)  # the last records' transactions commit
                seen = reader.stop()
            first = start + lat["warmup_records"]
            on_a = latency_records(boots["A"], topics, first)
            on_b = latency_records(boots["B"], remotes, first)
            both = [k for k in on_b if k in on_a]
            source = [on_a[k][0] - on_a[k][1] for k in both]
            copy = [on_b[k][0] - on_a[k][0] for k in both]
            total = [on_b[k][0] - on_b[k][1] for k in on_b]
            t0 = min(on_a[k][1] for k in both)
            by_second: dict[int, list[int]] = {}
            for k in both:
                by_second.setdefault((on_a[k][1] - t0) // 1000, []).append(on_b[k][0] - on_a[k][0])
            out: dict[str, Any] = {
                "system": system.name, "round": r, "records": len(on_b),
                "total_p50_p99": (pct(total, 50), pct(total, 99)),
                "source_p50_p99": (pct(source, 50), pct(source, 99)),
                "copy_p50_p99_max": (pct(copy, 50), pct(copy, 99), max(copy)),
                "copy_p10_p90_mean": (pct(copy, 10), pct(copy, 90), round(sum(copy) / len(copy), 2)),
                "source_mean": round(sum(source) / len(source), 2),
                "cpu_s": {k: round(cpu1.get(k, 0) - cpu0.get(k, 0), 1) for k in sorted(cpu1)},
                "copy_p99_by_second": [pct(v, 99) for _s, v in sorted(by_second.items())],
                **({"system_cpu_by_thread": threads} if threads is not None else {}),
                **(visible(seen, on_a, both) if reader is not None else {}),
                "props": args.prop, "linger_ms": args.linger_ms, "generator": args.generator,
                "broker_jit": args.broker_jit, "warmup_s": args.warmup,
                "copying_before_load_s": lat.get("copying_before_load_s"),
                "generator_producers": args.generator_producers, "groups": args.groups,
            }  # fmt: skip
            print(json.dumps(out), flush=True)
            results.append(out)
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    finally:
        try:
            rep.stop_system(proc)
        finally:
            clusters.down()


if __name__ == "__main__":
    main()
