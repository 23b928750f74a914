"""The benchmark's CPU count (bench/proctree.py) of a process tree whose parent ignores SIGCHLD.

PySpark's worker daemon ignores SIGCHLD, so the kernel reaps its workers itself and their CPU reaches
no one's ``RUSAGE_CHILDREN``; the wrapper adds what it last sampled of them. No broker, no Spark: a
parent that ignores SIGCHLD and a child that burns a second of CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROCTREE = Path(__file__).resolve().parents[2] / "bench" / "proctree.py"

# The child burns 1 s of CPU and ends; the parent, ignoring SIGCHLD, never waits for it.
TREE = """
import os, signal, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    while time.process_time() < 1.0:
        pass
    os._exit(0)
while True:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    time.sleep(0.05)
time.sleep(0.3)
"""


def test_the_cpu_of_a_child_the_kernel_reaped_is_counted(tmp_path: Path) -> None:
    out = tmp_path / "tree.json"
    subprocess.run(
        [sys.executable, str(PROCTREE), "--out", str(out), "--interval", "0.05", "--", sys.executable, "-c", TREE],
        check=True,
        timeout=60,
    )
    report = json.loads(out.read_text())
    assert report["exit_code"] == 0
    # At most one interval of the child's last CPU is missed.
    assert report["cpu_s_auto_reaped"] >= 0.85, report["cpu_s_auto_reaped"]
    assert report["cpu_s"] >= report["cpu_s_auto_reaped"]
