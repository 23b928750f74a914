"""CPU by process role, or by thread of one process, sampled from ``/proc`` while a probe runs beside it.

    .venv/bin/python bench/cpu_sample.py roles START SECONDS
        % of a core of each role (brokers, load, driver, its group offset reader, Python workers,
        Spark's JVM, the transport JVM)
        over SECONDS, from START seconds after it starts
    .venv/bin/python bench/cpu_sample.py threads MARKER COUNT [WAIT]
        every 20 s, COUNT times: the busiest threads of the newest process whose command line holds
        MARKER (e.g. TransportServer), found after WAIT seconds

Used beside ``bench/latency_probe.py`` for bench/results/2026-11-29-transport-engine-cpu.txt.
"""

from __future__ import annotations

import collections
import os
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
ROLES = (
    (b"TransportServer", "transport-jvm"),
    (b"pyspark.daemon", "py-workers"),
    (b"org.apache.spark", "spark-jvm"),
    (b"sparkmirror.kafka.groupreader", "group-reader"),
    (b"bin/sparkmirror", "driver"),
    (b"/A/broker", "broker-A"),
    (b"/B/broker", "broker-B"),
    (b"PacedLoad", "load"),
    (b"MirrorMaker", "mm2"),
)


def _cpu(stat_path: str) -> float:
    fields = open(stat_path).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def roles() -> collections.Counter[str]:
    out: collections.Counter[str] = collections.Counter()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = open(f"/proc/{entry}/cmdline", "rb").read()
            role = next((name for marker, name in ROLES if marker in cmd), None)
            if role:
                out[role] += _cpu(f"/proc/{entry}/stat")
        except OSError:
            continue
    return out


def newest(marker: bytes) -> str:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker in open(f"/proc/{entry}/cmdline", "rb").read():
                    found.append(int(entry))
            except OSError:
                pass
    if not found:
        raise SystemExit(f"no process with {marker!r}")
    return str(max(found))


def threads(pid: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()[:15]
            out[name] = out.get(name, 0.0) + _cpu(f"/proc/{pid}/task/{tid}/stat")
        except OSError:
            pass
    return out


def main() -> None:
    if sys.argv[1] == "roles":
        time.sleep(float(sys.argv[2]))
        a, t = roles(), time.time()
        time.sleep(float(sys.argv[3]))
        b, t = roles(), time.time() - t
        for k in sorted(set(a) | set(b)):
            print(f"{k:14s} {(b[k] - a[k]) / t * 100:6.1f} % of a core")
        return
    time.sleep(float(sys.argv[4]) if len(sys.argv) > 4 else 0)
    pid = newest(sys.argv[2].encode())
    prev, start = threads(pid), time.time()
    for _ in range(int(sys.argv[3])):
        time.sleep(20)
        try:
            cur = threads(pid)
        except OSError:
            break
        d = {k: (cur[k] - prev.get(k, 0.0)) / 20 * 100 for k in cur}
        top = sorted(d.items(), key=lambda kv: -kv[1])[:6]
        print(
            f"t+{time.time() - start:4.0f}s total {sum(d.values()):5.1f}% " + ", ".join(f"{k}={v:.1f}" for k, v in top)
        )
        prev = cur


if __name__ == "__main__":
    main()
