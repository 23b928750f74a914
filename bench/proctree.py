"""Run a command and measure its whole process tree: CPU seconds and resident memory over time.

A replicator is more than one process: ``sparkmirror run`` starts a JVM (Spark's
driver and executors) which starts Python workers; MM2 and the limit loop are one
JVM each. This wrapper becomes the *subreaper* of everything the command starts
(``PR_SET_CHILD_SUBREAPER``), so even processes orphaned by their parent are
waited for here and their CPU time is counted. It samples the tree from
``/proc`` every ``--interval`` seconds and, when the last descendant is gone,
writes a JSON report:

- ``cpu_s``: user + system CPU of every process of the tree: ``getrusage(RUSAGE_CHILDREN)``
  after all of them were reaped, plus ``cpu_s_auto_reaped``;
- ``cpu_s_auto_reaped``: the CPU of the processes whose parent ignored ``SIGCHLD`` when they
  ended, as last sampled. The kernel reaps those itself and adds their time to no one's
  ``RUSAGE_CHILDREN``; PySpark's worker daemon ignores ``SIGCHLD``, so until 2026-12-02 every
  Python worker's CPU (the copy's, for sparkmirror) was missing from ``cpu_s``. What such a process
  used after its last sample (at most ``--interval`` seconds of it) is still missed;
- ``samples``: ``[wall time, tree CPU seconds so far, tree RSS bytes, machine busy CPU seconds]``;
- ``peak_rss_mb``: the largest sampled sum of the tree's RSS (shared pages of
  forked workers count once per process, as ``ps`` shows them);
- ``peak_rss_mb_by_role``: the same per role of a process — ``driver`` (the
  command's own process and every other non-JVM, non-worker process: for
  sparkmirror the Python driver and its helper children), ``jvm`` (Java
  processes: Spark's JVM, which in ``local[*]`` mode runs the driver and the
  executors' tasks; MM2; the limit loop) and ``python_workers`` (PySpark's
  worker daemon and workers, where the executors' Python code runs);
- ``exit_code`` of the command.

SIGTERM or SIGINT to the wrapper is passed to the command (its first process
only: replicators stop their own children); if the tree is still alive
``--kill-after`` seconds later, every process of it is killed. The wrapper never
signals a process outside its own tree.

    python bench/proctree.py --out stats.json [--interval 0.25] [--kill-after 90] -- CMD [ARG...]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import NamedTuple

PR_SET_CHILD_SUBREAPER = 36
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> tuple[int, float, int, int] | None:
    """(parent pid, CPU seconds of the process and its reaped children, RSS bytes, start time in
    ticks) from /proc."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    rss_pages = int(fields[21])
    return ppid, (utime + stime + cutime + cstime) / _TICK, rss_pages * _PAGE, int(fields[19])


class Proc(NamedTuple):
    """One sampled process: CPU seconds (its own and its reaped children's), RSS bytes, parent pid and
    start time (ticks since boot: a reused pid starts later)."""

    cpu: float
    rss: int
    ppid: int
    start: int


#: Signal mask bit of SIGCHLD in /proc/<pid>/status (bit n - 1 for signal n).
_SIGCHLD_BIT = 1 << (signal.SIGCHLD - 1)


def ignores_sigchld(pid: int) -> bool:
    """Whether ``pid`` ignores SIGCHLD (its children are then reaped by the kernel, their CPU lost)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigIgn:"):
                return bool(int(line.split()[1], 16) & _SIGCHLD_BIT)
    except (OSError, ValueError):
        pass
    return False


class AutoReaped:
    """The CPU of descendants that ended under a parent ignoring SIGCHLD, from the samples.

    Each sample notes every descendant's CPU and whether its parent ignores SIGCHLD; a process gone
    (or its pid reused) by the next sample adds its last CPU when its parent did, unless this wrapper
    reaped it (its parent ended first and it was handed here: ``RUSAGE_CHILDREN`` has it).
    """

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self._seen: dict[int, tuple[int, float, bool]] = {}  # pid -> (start, cpu, parent ignores SIGCHLD)

    def sample(self, tree: dict[int, Proc], reaped: set[int]) -> None:
        ignoring = {ppid: ignores_sigchld(ppid) for ppid in {p.ppid for p in tree.values()}}
        for pid, (start, cpu, lost) in self._seen.items():
            now = tree.get(pid)
            if lost and pid not in reaped and (now is None or now.start != start):
                self.cpu_s += cpu
        self._seen = {pid: (p.start, p.cpu, ignoring[p.ppid]) for pid, p in tree.items()}


def descendants(root: int) -> dict[int, Proc]:
    """Every live (or not yet reaped) descendant of ``root``, by pid."""
    children: dict[int, list[int]] = {}
    info: dict[int, Proc] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        st = _stat(int(entry))
        if st is None:
            continue
        children.setdefault(st[0], []).append(int(entry))
        info[int(entry)] = Proc(cpu=st[1], rss=st[2], ppid=st[0], start=st[3])
    out: dict[int, Proc] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid in info and pid not in out:
            out[pid] = info[pid]
            todo.extend(children.get(pid, []))
    return out


_ROLES: dict[int, str] = {}


def role(pid: int) -> str:
    """``jvm``, ``python_workers`` or ``driver`` (everything else), from the process's command line."""
    known = _ROLES.get(pid)
    if known is not None:
        return known
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "driver"
    if Path(argv[0].decode(errors="replace")).name == "java":
        found = "jvm"
    elif any(a.startswith(b"pyspark.") or b"pyspark/daemon" in a or b"pyspark/worker" in a for a in argv):
        found = "python_workers"
    else:
        # Not kept: a launcher script (spark-submit) becomes the JVM by exec, under the same pid.
        return "driver"
    _ROLES[pid] = found
    return found


def machine_busy_cpu_s() -> float:
    """CPU seconds all processes of the machine have used since boot (not idle, not iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    # guest time is already counted in user time.
    return (sum(fields[:8]) - idle) / _TICK


def _reaped_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--interval", type=float, default=0.25)
    ap.add_argument("--kill-after", type=float, default=90.0)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command given")

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    me = os.getpid()
    start = time.time()
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    stop_requested_at: float | None = None

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal stop_requested_at
        if stop_requested_at is None:
            stop_requested_at = time.monotonic()
            try:
                os.kill(child.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    samples: list[list[float]] = []
    auto = AutoReaped()
    peak_rss = 0
    peak_by_role: dict[str, int] = {}
    exit_code: int | None = None
    child_gone_at: float | None = None
    while True:
        # Reap whatever finished: the command, its children, orphans handed to us.
        reaped: set[int] = set()
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid, status = -1, 0
            if pid <= 0:
                break
            reaped.add(pid)
            if pid == child.pid:
                exit_code = os.waitstatus_to_exitcode(status)
                child.returncode = exit_code  # keep Popen from waiting on a reaped pid
                child_gone_at = time.monotonic()
        tree = descendants(me)
        auto.sample(tree, reaped)
        rss = sum(p.rss for p in tree.values())
        peak_rss = max(peak_rss, rss)
        by_role: dict[str, int] = {}
        for pid, p in tree.items():
            by_role[role(pid)] = by_role.get(role(pid), 0) + p.rss
        for name, r in by_role.items():
            peak_by_role[name] = max(peak_by_role.get(name, 0), r)
        samples.append(
            [
                round(time.time(), 3),
                round(sum(p.cpu for p in tree.values()) + _reaped_cpu_s() + auto.cpu_s, 3),
                rss,
                round(machine_busy_cpu_s(), 2),
            ]
        )
        if exit_code is not None and not tree:
            break
        overdue = stop_requested_at is not None and time.monotonic() - stop_requested_at > args.kill_after
        # Workers left behind by a command that has exited get a grace period, then go.
        orphaned = child_gone_at is not None and time.monotonic() - child_gone_at > 20
        if overdue or orphaned:
            for pid in tree:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(args.interval)

    report = {
        "command": command,
        "start": round(start, 3),
        "end": round(time.time(), 3),
        "exit_code": exit_code,
        "cpu_s": round(_reaped_cpu_s() + auto.cpu_s, 3),
        "cpu_s_auto_reaped": round(auto.cpu_s, 3),
        "peak_rss_mb": round(peak_rss / 2**20, 1),
        "peak_rss_mb_by_role": {k: round(v / 2**20, 1) for k, v in sorted(peak_by_role.items())},
        "stop_requested": stop_requested_at is not None,
        "samples": samples,
    }
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report) + "\n")
    tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
