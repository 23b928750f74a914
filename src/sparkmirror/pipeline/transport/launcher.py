"""Find the executor's transport JVM, or start it: one per executor, shared by its tasks.

Its files live in the executor's own directory (Spark's ``SparkFiles`` root: the executor's working
directory on a cluster, the application's temporary directory in local mode), so two executors or two
applications on one host never share one: ``sparkmirror-transport.port`` (written by the JVM: its
loopback port, the token a connection must show, its pid; 0600), ``.lock`` (held while one task
starts it), ``.log`` (its stderr). It exits by itself once no task has been connected for
:data:`IDLE_EXIT_MS`, and removes its port file first.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from pathlib import Path

from sparkmirror.artifacts.jdk import jdk_tool
from sparkmirror.errors import SetupError
from sparkmirror.pipeline.transport import build

#: How long the JVM stays without a connection before it exits.
IDLE_EXIT_MS = 30_000
#: How long a task waits for a JVM it started to listen.
START_WAIT_S = 60.0
#: The JVM's options: the clients' heap, and no performance-data sampling (as Spark's driver); the
#: operator's ``SPARKMIRROR_TRANSPORT_JAVA_OPTIONS`` come after them (a later option wins).
JAVA_OPTIONS = (
    "-Xms64m",
    "-Xmx1g",
    "-XX:-UsePerfData",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
)
PORT_FILE = "sparkmirror-transport.port"
_STARTED: list[subprocess.Popen[bytes]] = []


def transport_dir() -> Path:
    """The executor's directory for the transport's files."""
    override = os.environ.get("SPARKMIRROR_TRANSPORT_DIR")
    if override:
        return Path(override)
    from pyspark import SparkFiles

    return Path(SparkFiles.getRootDirectory()).resolve()


def _read(port_file: Path) -> tuple[int, bytes, int] | None:
    try:
        port, token, pid = port_file.read_text().split()
        return int(port), token.encode(), int(pid)
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a transport JVM that runs (not a zombie its starter has not reaped yet, nor
    another process that took its pid)."""
    try:
        if b"TransportServer" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return False
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def address(directory: Path, *, stale: tuple[int, bytes] | None = None) -> tuple[int, bytes]:
    """The executor's transport JVM's port and token, starting the JVM if none runs. ``stale``: an address
    that refused a connection (the JVM was exiting): a new JVM is started in its place."""
    directory.mkdir(parents=True, exist_ok=True)
    port_file = directory / PORT_FILE
    with open(directory / "sparkmirror-transport.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _read(port_file)
        if found is not None and _alive(found[2]) and (found[0], found[1]) != stale:
            return found[0], found[1]
        port_file.unlink(missing_ok=True)
        return _start(directory, port_file)


def _java() -> str:
    java = jdk_tool("java")
    if java is None:
        raise SetupError("sparkmirror.transport = java needs a Java 17 runtime (`java` or JAVA_HOME) where tasks run")
    return java


def _start(directory: Path, port_file: Path) -> tuple[int, bytes]:
    options = [*JAVA_OPTIONS, *os.environ.get("SPARKMIRROR_TRANSPORT_JAVA_OPTIONS", "").split()]
    cp = ":".join(map(str, build.classpath()))
    cmd = [_java(), *options, "-cp", cp, build.MAIN_CLASS, str(port_file), str(IDLE_EXIT_MS)]
    log_path = directory / "sparkmirror-transport.log"
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # a failure's text may quote a setting
    with os.fdopen(fd, "ab") as log_file:
        # A session of its own: the JVM outlives the task that started it, and serves the executor's others.
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file, start_new_session=True, close_fds=True
        )
    _STARTED.append(proc)  # reaped by Python's own clean-up of finished children at the next start
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        found = _read(port_file)
        if found is not None and found[2] == proc.pid:
            return found[0], found[1]
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise SetupError(f"the transport JVM exited at its start (exit {proc.returncode}): {tail}")
        time.sleep(0.05)
    proc.kill()
    raise SetupError(f"the transport JVM did not listen within {START_WAIT_S:g}s (its log: {log_path})")
