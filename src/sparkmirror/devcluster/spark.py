"""A local Spark standalone cluster (one master, N workers) for trying sparkmirror on a cluster.

The master and workers run from the Spark that the pyspark package ships
(``pyspark/bin/spark-class``), on loopback only, with their logs and the
workers' executor directories below one directory. What runs is recorded in
``<dir>/state.json`` so that ``sparkmirror dev spark status|down`` work from
another process, as ``dev up|down`` do for the Kafka clusters.

``sparkmirror run --master spark://…`` then runs the mirror with executors in
the workers' JVMs (``docs/deployment.md``). This cluster is for development,
tests and the benchmark: it must never listen on anything but 127.0.0.1, and
its daemons keep small heaps so that Kafka brokers and Spark fit on a 2-core
machine.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sparkmirror.devcluster.cluster import free_port, pid_alive, port_in_use, signal_group
from sparkmirror.errors import DevClusterError

log = logging.getLogger(__name__)

DEFAULT_SPARK_DIR = Path(".sparkmirror") / "spark"
#: Heap of the master and worker daemons themselves (Spark's default is 1 GiB each); executors
#: get their own memory from ``--memory`` / ``spark.executor.memory``.
DAEMON_HEAP = os.environ.get("SPARKMIRROR_SPARK_DAEMON_HEAP", "256m")
_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"


@dataclass
class DaemonState:
    """One master or worker JVM."""

    name: str
    port: int
    webui_port: int
    pid: int | None = None

    def is_running(self, directory: Path) -> bool:
        """The pid is alive and is still this daemon (a process that reused the number is not)."""
        if self.pid is None or not pid_alive(self.pid):
            return False
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        # spark-class starts as a shell script and execs the JVM; either carries the marker.
        return _marker(directory).encode() in cmdline or b"spark-class" in cmdline


@dataclass
class StandaloneState:
    directory: str
    master: DaemonState
    workers: list[DaemonState] = field(default_factory=list)
    cores: int = 1
    memory: str = "2g"

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master.port}"

    @property
    def webui(self) -> str:
        return f"http://127.0.0.1:{self.master.webui_port}"


def _marker(directory: Path) -> str:
    """A JVM system property naming the directory: it tells our daemons from any other Spark's."""
    return f"-Dsparkmirror.dev.spark={directory}"


def _distinct_free_ports(count: int, taken: set[int]) -> list[int]:
    """``count`` free ports below 32768, none of them twice nor in ``taken`` (nothing binds them before
    the daemons start)."""
    out: list[int] = []
    while len(out) < count:
        port = free_port("the Spark standalone cluster")
        if port not in taken and port not in out:
            out.append(port)
    return out


def spark_home() -> Path:
    """The Spark distribution inside the installed pyspark package."""
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").exists():
        raise DevClusterError(f"pyspark at {home} has no bin/spark-class; reinstall it (make install)")
    return home


class SparkStandalone:
    """Start, stop and describe a local Spark standalone cluster below one directory."""

    def __init__(self, directory: Path | str = DEFAULT_SPARK_DIR) -> None:
        self.directory = Path(directory).absolute()
        self._state_file = self.directory / "state.json"
        #: The daemons this object started, by name: whether one exited is asked of its process
        #: (``poll``), never read from ``/proc/<pid>/cmdline``, which is empty for a moment while
        #: spark-class execs the JVM (read then, a starting worker looked dead).
        self._started: dict[str, subprocess.Popen[bytes]] = {}

    # -- state ------------------------------------------------------------------
    def status(self) -> StandaloneState | None:
        if not self._state_file.exists():
            return None
        raw = json.loads(self._state_file.read_text())
        workers = [DaemonState(**w) for w in raw.pop("workers")]
        return StandaloneState(master=DaemonState(**raw.pop("master")), workers=workers, **raw)

    def _save(self, state: StandaloneState) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self._state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2))
        tmp.replace(self._state_file)

    def running(self, state: StandaloneState) -> list[DaemonState]:
        return [d for d in (state.master, *state.workers) if d.is_running(self.directory)]

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"

    def executor_logs(self) -> list[Path]:
        """The stderr files of every executor the workers ran (``worker-N/work/app-…/<id>/stderr``)."""
        return sorted(self.directory.glob("worker-*/work/app-*/*/stderr"))

    # -- up ---------------------------------------------------------------------
    def up(
        self,
        *,
        workers: int = 2,
        cores: int = 1,
        memory: str = "2g",
        port: int | None = None,
        timeout_s: float = 120.0,
    ) -> StandaloneState:
        """Start a master and ``workers`` workers (``cores`` cores and ``memory`` each for executors).

        ``port`` is the master's (a free port below 32768 when None). Returns once the master's
        status page lists every worker as ALIVE. A cluster already running here is returned as is.
        """
        if workers < 1:
            raise DevClusterError(f"--workers must be at least 1, got {workers}")
        if cores < 1:
            raise DevClusterError(f"--cores must be at least 1, got {cores}")
        existing = self.status()
        if existing is not None:
            if len(self.running(existing)) == 1 + len(existing.workers):
                log.info("Spark standalone cluster already runs at %s", existing.url)
                return existing
            self.down()  # a partial leftover (a crash): start afresh
        if port is not None and port_in_use(port):
            raise DevClusterError(f"cannot start the Spark master: port {port} on 127.0.0.1 is in use")
        home = spark_home()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        ports = _distinct_free_ports(2 * (1 + workers) - (port is not None), taken={port} if port else set())
        state = StandaloneState(
            directory=str(self.directory),
            master=DaemonState("master", port or ports.pop(), ports.pop()),
            cores=cores,
            memory=memory,
        )
        for i in range(workers):
            state.workers.append(DaemonState(f"worker-{i + 1}", ports.pop(), ports.pop()))
        try:
            m = state.master
            m.pid = self._start(home, m, _MASTER, "--host", "127.0.0.1", "--port", str(m.port),
                                "--webui-port", str(m.webui_port))  # fmt: skip
            self._save(state)
            for w in state.workers:
                work = self.directory / w.name / "work"
                work.mkdir(parents=True, exist_ok=True)
                w.pid = self._start(home, w, _WORKER, state.url, "--host", "127.0.0.1", "--port", str(w.port),
                                    "--webui-port", str(w.webui_port), "--cores", str(cores), "--memory", memory,
                                    "--work-dir", str(work))  # fmt: skip
                self._save(state)
            self._wait_registered(state, timeout_s)
        except BaseException:
            self.down()
            raise
        log.info("Spark standalone cluster at %s with %d workers (UI %s)", state.url, workers, state.webui)
        return state

    def _start(self, home: Path, daemon: DaemonState, main: str, *args: str) -> int:
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.log_dir),
            # No spark-defaults.conf or spark-env.sh from elsewhere on the machine.
            "SPARK_CONF_DIR": str(self.directory / "conf"),
            "SPARK_DAEMON_MEMORY": DAEMON_HEAP,
            "SPARK_DAEMON_JAVA_OPTS": f"{os.environ.get('SPARK_DAEMON_JAVA_OPTS', '')} {_marker(self.directory)}",
        }
        (self.directory / "conf").mkdir(parents=True, exist_ok=True)
        out = open(self.log_dir / f"{daemon.name}.log", "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(
            [str(home / "bin" / "spark-class"), main, *args],
            env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        out.close()
        self._started[daemon.name] = proc
        log.info("started Spark %s (pid %d, port %d)", daemon.name, proc.pid, daemon.port)
        return proc.pid

    def _wait_registered(self, state: StandaloneState, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        alive = 0
        while time.monotonic() < deadline:
            dead = [d for d in (state.master, *state.workers) if self._exited(d)]
            if dead:
                logfile = self.log_dir / f"{dead[0].name}.log"
                tail = logfile.read_text(errors="replace")[-3000:] if logfile.exists() else ""
                raise DevClusterError(f"Spark {dead[0].name} exited during start-up; see {logfile}:\n{tail}")
            alive = self.alive_workers(state)
            if alive >= len(state.workers):
                return
            time.sleep(0.5)
        raise DevClusterError(
            f"{alive} of {len(state.workers)} Spark workers registered with the master at {state.url} "
            f"within {timeout_s:.0f}s; see {self.log_dir}"
        )

    def _exited(self, daemon: DaemonState) -> bool:
        """A daemon started here has exited (its exit status is there); any other: it no longer runs."""
        proc = self._started.get(daemon.name)
        if proc is not None and proc.pid == daemon.pid:
            return proc.poll() is not None
        return not daemon.is_running(self.directory)

    @staticmethod
    def alive_workers(state: StandaloneState) -> int:
        """Workers the master lists as ALIVE (its status page as JSON); 0 while it does not answer."""
        try:
            with urllib.request.urlopen(f"{state.webui}/json/", timeout=2) as resp:  # noqa: S310 - loopback
                page = json.load(resp)
        except (OSError, ValueError):
            return 0
        return sum(1 for w in page.get("workers", []) if w.get("state") == "ALIVE")

    # -- down -------------------------------------------------------------------
    def down(self, *, timeout_s: float = 30.0, keep_logs: bool = True) -> bool:
        """Stop the workers (and with them their executors), then the master. False when nothing ran.

        The logs and the executors' directories stay below the directory unless ``keep_logs`` is
        False.
        """
        state = self.status()
        if state is None:
            return False
        daemons = [d for d in (*state.workers, state.master) if d.pid is not None and d.is_running(self.directory)]
        for d in daemons:
            assert d.pid is not None
            signal_group(d.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while any(d.pid is not None and pid_alive(d.pid) for d in daemons) and time.monotonic() < deadline:
            time.sleep(0.2)
        for d in daemons:
            if d.pid is not None and pid_alive(d.pid):
                log.warning("Spark %s (pid %d) ignored SIGTERM; killing it", d.name, d.pid)
                signal_group(d.pid, signal.SIGKILL)
        self._state_file.unlink(missing_ok=True)
        if not keep_logs:
            shutil.rmtree(self.directory, ignore_errors=True)
        log.info("stopped the Spark standalone cluster at %s", state.url)
        return True
