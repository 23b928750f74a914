"""CPU of an idle flow: a replicator caught up on many partitions, with nothing more to copy.

Issue 27 asks that an idle flow use at most 2% of a core. The integration test
(``tests/integration/test_streaming_engine.py``) checks a small flow's Python workers; this probe
measures the whole system at the scale scenario's layout (200 topics x 5 partitions by default):
it starts two dev clusters, puts one record in every partition, runs the system until B holds
them all, lets it settle, then reads every process's CPU from ``/proc`` over ``--seconds``, by
role:

- ``driver``: sparkmirror's Python driver (and any helper it started that is not a JVM or worker),
- ``jvm``: the system's JVMs (Spark's driver and executors in ``local[*]``; MM2; a JVM helper),
- ``python_workers``: PySpark's worker daemon and workers (the copy tasks),
- ``broker_A`` / ``broker_B``: what the idle system costs the brokers, against a quiet baseline
  taken before the system starts.

``--threads`` adds the system's CPU per role and thread name (``/proc/<pid>/task/*/comm``, digits
folded: librdkafka names its threads ``rdk:main``, ``rdk:broker<id>``, ``rdk:bg``), which tells a
Python worker's own thread from each client's.

    .venv/bin/python bench/idle_flow.py [--system sparkmirror|mm2|transport|transport-shared-jvm]
        [--topics 200 --partitions 5] [--seconds 30] [--settle 20] [--prop KEY=VALUE ...] [--threads] [--out FILE]

Prints one JSON line; docs/performance.md ("An idle flow") has what it found.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import replicators as rep  # noqa: E402
import scale  # noqa: E402
import workload as wl  # noqa: E402
from sparkmirror.devcluster.cluster import DevClusters  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")


def role_of(cmd: str, of_system: bool, dev: str) -> str | None:
    """Which part of the picture a process is (None: not measured): a broker of this probe's clusters
    (under ``dev``), or a process of the system under test (``of_system``: the command or a descendant)."""
    if f"{dev}/A/broker" in cmd:
        return "broker_A"
    if f"{dev}/B/broker" in cmd:
        return "broker_B"
    if not of_system:
        return None
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd or "pyspark/daemon" in cmd:
        return "python_workers"
    if cmd.startswith("java") or "/bin/java" in cmd.split(" ", 1)[0]:
        return "jvm"  # Spark's JVM (driver and executors in local[*]), MM2, or a JVM helper of the system
    return "driver"  # sparkmirror's Python driver and any helper it started


def _processes(system: int | None, dev: str) -> dict[int, tuple[str, list[str]]]:
    """``{pid: (role, /proc/<pid>/stat fields after the name)}`` of the live processes measured, from one
    read of ``/proc``; ``system``: the pid of the system's command."""
    procs: dict[int, tuple[str, list[str]]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        procs[int(entry)] = (cmd, stat)

    def of_system(pid: int) -> bool:
        while system is not None and pid > 1 and pid in procs:
            if pid == system:
                return True
            pid = int(procs[pid][1][1])  # the parent
        return False

    out: dict[int, tuple[str, list[str]]] = {}
    for pid, (cmd, stat) in procs.items():
        role = role_of(cmd, of_system(pid), dev)
        if role is not None:
            out[pid] = (role, stat)
    return out


def _cpu_s(stat: list[str]) -> float:
    """User + system CPU seconds of a process's or thread's stat fields (after its name)."""
    return (int(stat[11]) + int(stat[12])) / _TICK


def cpu_by_role(system: int | None, dev: str) -> dict[str, float]:
    """CPU seconds so far (user + system, of live processes: one that exits in the window is not counted)
    per role; ``system``: the pid of the system's command."""
    out: dict[str, float] = {}
    for role, stat in _processes(system, dev).values():
        out[role] = out.get(role, 0.0) + _cpu_s(stat)
    return out


def system_threads(system: int, dev: str) -> dict[tuple[str, int, int], float]:
    """``{(role/name, pid, tid): CPU seconds}`` of the system's live threads (the brokers' are not read)."""
    out: dict[tuple[str, int, int], float] = {}
    for pid, (role, _stat) in _processes(system, dev).items():
        if role.startswith("broker"):
            continue
        try:
            tids = [t for t in os.listdir(f"/proc/{pid}/task") if t.isdigit()]
        except OSError:
            continue
        for tid in tids:
            try:
                name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            folded = "".join("#" if c.isdigit() else c for c in name)
            out[(f"{role}/{folded}", pid, int(tid))] = _cpu_s(stat)
    return out


def window(seconds: float, system: int | None, dev: str, *, threads: bool = False) -> dict[str, Any]:
    """Percent of one core per role over ``seconds`` of wall time (``threads``: also per role and thread
    name, under ``"threads"``, :func:`thread_seconds`' way: a thread that ended within the window is not seen)."""
    before, t0 = cpu_by_role(system, dev), time.monotonic()
    t_before = system_threads(system, dev) if threads and system is not None else {}
    time.sleep(seconds)
    after, wall = cpu_by_role(system, dev), time.monotonic() - t0
    out: dict[str, Any] = {k: round(100 * (after[k] - before.get(k, 0.0)) / wall, 2) for k in sorted(after)}
    if threads and system is not None:
        used = thread_seconds(t_before, system_threads(system, dev))
        out["threads"] = {k: round(100 * v / wall, 2) for k, v in used.items()}
    return out


def thread_seconds(
    before: dict[tuple[str, int, int], float], after: dict[tuple[str, int, int], float]
) -> dict[str, float]:
    """CPU seconds between two :func:`system_threads` snapshots per role and thread name (``role/name``),
    busiest first. A thread alive at ``after`` counts whole if it started since ``before`` (a round that
    starts with the system, or producers made again after an idle spell); one that ended between the two
    is not seen (what it used ended with it)."""
    per: dict[str, float] = {}
    for key, seconds_now in after.items():
        per[key[0]] = per.get(key[0], 0.0) + seconds_now - before.get(key, 0.0)
    return {k: v for k, v in sorted(per.items(), key=lambda kv: -kv[1]) if v > 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # Not the limit loop, nor Spark's Real-time Mode (not measured idle).
    systems = [s for s in rep.PROBE_SYSTEMS if s not in ("limit", "spark-realtime")]
    ap.add_argument("--system", default="sparkmirror", choices=systems)
    ap.add_argument("--topics", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=5, help="per topic")
    ap.add_argument("--seconds", type=float, default=30, help="the measured idle window")
    ap.add_argument("--settle", type=float, default=20, help="seconds after B holds every record, not measured")
    ap.add_argument("--base-port", type=int, default=31300)
    ap.add_argument("--prop", action="append", default=[], metavar="KEY=VALUE", help="sparkmirror: extra property")
    ap.add_argument("--threads", action="store_true", help="also the system's CPU per thread name")
    ap.add_argument("--out", default="")
    ap.add_argument("--workdir", default="/tmp/sparkmirror-idle-flow")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    clusters = DevClusters(work / "dev")
    dev = str(work / "dev")
    proc = None
    try:
        boots = clusters.up(["A", "B"], base_port=args.base_port)
        topics = {f"{scale.PREFIX}{i:03d}": args.partitions for i in range(args.topics)}
        remotes = {rep.remote(t): n for t, n in topics.items()}
        scale.create_topics(boots["A"], topics)
        scale.create_topics(boots["B"], remotes)
        producer = wl._producer(boots["A"])
        now = int(time.time() * 1000)
        for t in topics:
            for p in range(args.partitions):
                wl._produce(producer, t, key=b"k", value=b"v", partition=p, timestamp=now, headers=wl.HEADERS)
        producer.flush(60)
        quiet = window(5, None, dev)  # the brokers with nothing running against them
        # The chores at their defaults, as a user's flow runs them (the benchmark's other scenarios run
        # checkpoints and status every 5 s to measure their freshness): MM2's 60 s checkpoints, 10 s status.
        extra = {"sparkmirror.progress.interval.seconds": "10", **dict(p.split("=", 1) for p in args.prop)}
        common = rep.Common(bootstraps=boots, partitions=args.partitions, linger_ms=10, batch_size=262144,
                            compression="none", tasks_max=2, limit_threads=2, checkpoint_interval_s=60,
                            sparkmirror_extra=extra)  # fmt: skip
        jvm = rep.Jvm(work)
        system = rep.probe_system(args.system, common, jvm)
        with open(work / "system.log", "w") as log:
            spec = ",".join(topics) if system.lists_topics else f"{scale.PREFIX}.*"
            proc = subprocess.Popen(system.command(work, spec, count=None), stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        want = sum(topics.values())
        t0 = time.monotonic()
        while sum(scale.end_offsets(boots["B"], remotes, committed=True).values()) < want:
            if proc.poll() is not None:
                raise RuntimeError(f"{system.name} exited {proc.returncode}: see {work / 'system.log'}")
            if time.monotonic() - t0 > 300:
                raise RuntimeError(f"B does not hold every partition's record after 300 s: see {work / 'system.log'}")
            time.sleep(1)
        caught_up_s = round(time.monotonic() - t0, 1)
        time.sleep(args.settle)
        idle = window(args.seconds, proc.pid, dev, threads=args.threads)
        system_pct = round(sum(v for k, v in idle.items() if k != "threads" and not k.startswith("broker")), 2)
        out: dict[str, Any] = {
            "system": system.name, "partitions": want, "seconds": args.seconds, "caught_up_s": caught_up_s,
            "percent_of_a_core": idle, "system_percent_of_a_core": system_pct,
            "brokers_quiet_percent_of_a_core": quiet, "props": args.prop,
        }  # fmt: skip
        print(json.dumps(out), flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    finally:
        try:
            rep.stop_system(proc)
        finally:
            clusters.down()


if __name__ == "__main__":
    main()
