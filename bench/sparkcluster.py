"""CPU and memory of the executors a Spark standalone cluster runs for sparkmirror (``--spark-cluster``).

On a cluster, sparkmirror's executors (their JVMs and Python workers) are children
of the Spark workers, not of the ``sparkmirror run`` process that ``proctree.py``
measures, so a system's ``cpu_s`` and ``peak_rss_mb`` hold the driver only. This
sampler reads the workers' process trees from ``/proc`` every ``interval``
seconds while a system runs: the executors' CPU seconds (each process's last
sample, so up to one interval of a process's end is missed) and the peak of
their summed RSS. It never signals anything.
"""

from __future__ import annotations

import threading
from typing import Any

from proctree import Proc, descendants


class ExecutorSampler:
    def __init__(self, worker_pids: list[int], interval: float = 0.5) -> None:
        self.worker_pids = worker_pids
        self.interval = interval
        self._before = self._sample()
        self._last: dict[int, float] = {}
        self._peak_rss = 0
        self._peak_processes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="executor-sampler", daemon=True)

    def _sample(self) -> dict[int, Proc]:
        out: dict[int, Proc] = {}
        for pid in self.worker_pids:
            out.update(descendants(pid))
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            tree = self._sample()
            for pid, p in tree.items():
                self._last[pid] = p.cpu
            self._peak_rss = max(self._peak_rss, sum(p.rss for p in tree.values()))
            self._peak_processes = max(self._peak_processes, len(tree))
            self._stop.wait(self.interval)

    def start(self) -> ExecutorSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def result(self) -> dict[str, Any]:
        cpu = sum(c - (self._before[p].cpu if p in self._before else 0.0) for p, c in self._last.items())
        return {
            "cpu_s": round(cpu, 1),
            "peak_rss_mb": round(self._peak_rss / 2**20, 1),
            "peak_processes": self._peak_processes,
            "sampled_every_s": self.interval,
        }
