"""Exactly-once at many partitions: latency and producers per Python worker (issue 16).

A focused part of the scale scenario (``bench/scale.py``'s latency phase): two fresh one-broker
clusters, ``--topics`` x ``--partitions`` empty topics on A, ``sparkmirror -vv run`` exactly-once
(embedded Spark, ``local[*]``), and a paced load of ``--rate`` records/s round robin over every
partition for ``--seconds`` after a warm-up. Reported:

- latency p50/p99/max (append time on B - the record's timestamp on A), as in the scale scenario;
- librdkafka clients per Python worker (threads named ``rdk:main``, one per client: the
  transactional producers, the reader's consumer, the progress consumer), sampled every second,
  and the Python workers' peak thread count;
- CPU seconds and peak RSS of sparkmirror's process tree (``bench/proctree.py``), per role.

    .venv/bin/python bench/eos_groups.py [--topics 200] [--partitions 5] [--rate 5000] [--seconds 30] \\
        [--base-port 25600] [--warmup-committed] [--prop KEY=VALUE ...] [--out bench/results/<file>.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import proctree
import replicators as rep
import run as run_mod
import scale
from sparkmirror.devcluster.cluster import DevClusters

log = logging.getLogger("bench.eos_groups")


@dataclass(frozen=True)
class LatencySettings:
    """What ``scale.measure_latency`` reads of the harness's settings."""

    size: int
    rate: int
    latency_seconds: int
    warmup_seconds: int
    stall_timeout_s: int
    warmup_committed: bool = False


class WorkerSampler(threading.Thread):
    """Every second: librdkafka clients (``rdk:main`` threads) and threads of each Python worker of a tree."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.stop = threading.Event()
        self.max_clients_per_worker = 0
        self.max_clients_all_workers = 0
        self.max_threads_per_worker = 0
        self.workers_seen: set[int] = set()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            total = 0
            for pid in proctree.descendants(self.root):
                if proctree.role(pid) != "python_workers":
                    continue
                try:
                    tasks = os.listdir(f"/proc/{pid}/task")
                    comms = [Path(f"/proc/{pid}/task/{t}/comm").read_text().strip() for t in tasks]
                except OSError:
                    continue
                clients = sum(1 for c in comms if c == "rdk:main")
                if clients:
                    self.workers_seen.add(pid)
                total += clients
                self.max_clients_per_worker = max(self.max_clients_per_worker, clients)
                self.max_threads_per_worker = max(self.max_threads_per_worker, len(comms))
            self.max_clients_all_workers = max(self.max_clients_all_workers, total)


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    rank = max(1, min(len(values), round(q / 100 * len(values) + 0.5)))
    return values[rank - 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=5, help="partitions per topic")
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--warmup-seconds", type=int, default=10)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--base-port", type=int, default=25600)
    ap.add_argument("--stall-timeout", type=int, default=300)
    ap.add_argument(
        "--warmup-committed",
        action="store_true",
        help="start the measured load once B committed the warm-up (markers written); the wait is reported",
    )
    ap.add_argument("--prop", action="append", default=[], metavar="KEY=VALUE", help="a sparkmirror property")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--label", default="", help="a name for the run in the result")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("sparkmirror").setLevel(logging.WARNING)

    code = run_mod.source_state()
    load_before = run_mod.concurrent_load()
    workdir = Path(tempfile.mkdtemp(prefix="sparkmirror-eos-groups."))
    clusters = DevClusters(workdir / "dev")
    result: dict[str, Any] = {
        "label": args.label,
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "code": code,
        "load_before": load_before,
        "topics": args.topics,
        "partitions_per_topic": args.partitions,
        "props": args.prop,
    }
    try:
        boots = clusters.up(["A", "B"], base_port=args.base_port)
        names = [f"{scale.PREFIX}{i:03d}" for i in range(args.topics)]
        topics = dict.fromkeys(names, args.partitions)
        scale.create_topics(boots["A"], topics)
        for _ in range(60):  # every new partition's leader known to the broker (ListOffsets answers)
            try:
                scale.record_counts(boots["A"], topics)
                break
            except Exception as exc:  # noqa: BLE001 - NOT_LEADER_FOR_PARTITION right after creation
                log.info("waiting for the topics' leaders: %s", exc)
                time.sleep(1)
        common = rep.Common(
            bootstraps=boots,
            partitions=args.partitions,
            linger_ms=10,
            batch_size=262_144,
            compression="none",
            tasks_max=2,
            limit_threads=2,
            sparkmirror_extra=run_mod._props(tuple(args.prop)),
            sparkmirror_debug=True,
        )
        system = rep.Sparkmirror(common, None, exactly_once=True)  # type: ignore[arg-type]
        settings = LatencySettings(
            args.size, args.rate, args.seconds, args.warmup_seconds, args.stall_timeout, args.warmup_committed
        )
        run_dir = workdir / "run"
        run_dir.mkdir()

        sampler: WorkerSampler | None = None
        original_tree = run_mod.Tree

        class SampledTree(original_tree):  # type: ignore[misc, valid-type]
            def __init__(self, *a: Any, **kw: Any) -> None:
                nonlocal sampler
                super().__init__(*a, **kw)
                sampler = WorkerSampler(self.proc.pid)
                sampler.start()

        run_mod.Tree = SampledTree
        try:
            out = scale.measure_latency(run_mod, system, run_dir, boots, topics, settings)
        finally:
            run_mod.Tree = original_tree
            if sampler is not None:
                sampler.stop.set()
        result["latency"] = out
        if sampler is not None:
            result["workers"] = {
                "python_workers_with_clients": len(sampler.workers_seen),
                "max_clients_per_worker": sampler.max_clients_per_worker,
                "max_clients_all_workers": sampler.max_clients_all_workers,
                "max_threads_per_worker": sampler.max_threads_per_worker,
            }
        result["load_after"] = run_mod.concurrent_load()
    finally:
        run_mod.Tree.stop_all()
        clusters.down()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    log.info("work folder kept: %s", workdir)


if __name__ == "__main__":
    main()
