"""Local Apache Kafka clusters for trying sparkmirror out and for its tests.

Each cluster is one or more real Kafka 4.x brokers in KRaft combined mode
(broker and controller in one JVM), run from the jars cached by
:mod:`sparkmirror.artifacts`, listening on loopback only. What runs
is recorded in ``<dir>/state.json`` so that ``dev status`` and ``dev down`` work
from another process.

These clusters are for development and tests: they must never listen on
anything but 127.0.0.1, and their heaps stay small so that two clusters and
Spark fit on a 2-core machine.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sparkmirror.artifacts import kafka_broker_artifacts
from sparkmirror.devcluster.security import SecurityMaterial, check_mode
from sparkmirror.errors import DevClusterError

log = logging.getLogger(__name__)

DEFAULT_DIR = Path(".sparkmirror") / "dev"
DEFAULT_BASE_PORT = 19092
#: Ports reserved per cluster: each broker uses two (client, controller).
PORTS_PER_CLUSTER = 10
MAX_BROKERS = PORTS_PER_CLUSTER // 2
BROKER_HEAP = os.environ.get("SPARKMIRROR_BROKER_HEAP", "512m")
#: The dev brokers' collector and compiler: the serial collector and the first JIT tier only, so a
#: broker starts in seconds and a test's brokers stay small. ``SPARKMIRROR_BROKER_JVM_OPTIONS``
#: replaces them, and so does ``DevClusters(broker_jvm_options=...)``.
BROKER_JVM_OPTIONS = os.environ.get("SPARKMIRROR_BROKER_JVM_OPTIONS", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
#: Both JIT tiers, as a production broker runs (the serial collector kept for the small heap): the
#: benchmark's brokers (bench/run.py ``--broker-jit full``). At 1,000 partitions the first tier's
#: slower request handling, not the replicator, set most of a latency p99 (docs/performance.md,
#: "The benchmark's brokers with both JIT tiers").
BROKER_JVM_OPTIONS_FULL_JIT = "-XX:+UseSerialGC"
#: ``log.index.size.max.bytes`` of the dev brokers (Kafka's default: 10 MB); see ``_write_properties``.
DEV_INDEX_BYTES = 1024 * 1024

_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = INFO
"""


@dataclass
class BrokerState:
    node_id: int
    port: int
    controller_port: int
    pid: int | None = None
    log_dir: str = ""

    def is_running(self) -> bool:
        return self.pid is not None and pid_alive(self.pid) and self._is_our_broker(self.pid)

    def _is_our_broker(self, pid: int) -> bool:
        """The pid is still this broker, not a process that reused the number."""
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
        return b"kafka.Kafka" in cmdline and str(Path(self.log_dir) / "server.properties").encode() in cmdline


@dataclass
class ClusterState:
    alias: str
    cluster_id: str
    directory: str
    brokers: list[BrokerState] = field(default_factory=list)
    #: plaintext, ssl or sasl_ssl (devcluster/security.py).
    security: str = "plaintext"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)

    def running_brokers(self) -> list[BrokerState]:
        return [b for b in self.brokers if b.is_running()]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process
        return True
    # A zombie child still answers kill(0); look at its state.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


class DevClusters:
    """Start, stop and describe local Kafka clusters below one directory."""

    def __init__(self, directory: Path | str = DEFAULT_DIR, *, broker_jvm_options: str | None = None) -> None:
        self.directory = Path(directory).absolute()
        #: The brokers' collector and compiler options (:data:`BROKER_JVM_OPTIONS` unless given).
        self.broker_jvm_options = BROKER_JVM_OPTIONS if broker_jvm_options is None else broker_jvm_options
        self._state_file = self.directory / "state.json"

    # -- state ------------------------------------------------------------
    def _load(self) -> dict[str, ClusterState]:
        if not self._state_file.exists():
            return {}
        raw = json.loads(self._state_file.read_text())
        out = {}
        for alias, c in raw.items():
            brokers = [BrokerState(**b) for b in c.pop("brokers")]
            out[alias] = ClusterState(brokers=brokers, **c)
        return out

    def _save(self, state: dict[str, ClusterState]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self._state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({a: asdict(c) for a, c in state.items()}, indent=2))
        tmp.replace(self._state_file)

    def status(self) -> dict[str, ClusterState]:
        return self._load()

    def bootstraps(self) -> dict[str, str]:
        return {a: c.bootstrap for a, c in self._load().items() if c.running_brokers()}

    # -- up -----------------------------------------------------------------
    def up(
        self,
        aliases: Sequence[str] = ("A", "B"),
        *,
        brokers: int = 1,
        base_port: int = DEFAULT_BASE_PORT,
        timeout_s: float = 90.0,
        security: str = "plaintext",
    ) -> dict[str, str]:
        """Start the named clusters (those already running are left alone).

        ``security``: ``plaintext``, ``ssl`` (mutual TLS) or ``sasl_ssl`` (SCRAM and PLAIN over
        TLS), with ACLs enforced (:mod:`sparkmirror.devcluster.security`; :meth:`security` gives
        the CA, stores and passwords). Returns ``{alias: bootstrap servers}`` once every cluster
        answers a metadata request with all its brokers.
        """
        security = check_mode(security)
        if not 1 <= brokers <= MAX_BROKERS:
            raise DevClusterError(f"--brokers must be between 1 and {MAX_BROKERS}, got {brokers}")
        jars = kafka_broker_artifacts().jars()
        state = self._load()
        if security == "sasl_ssl" or any(state[a].security == "sasl_ssl" for a in aliases if a in state):
            self._token_endpoint()  # before the brokers: they fetch its keys at start
        used_slots = {_slot(c, base_port) for c in state.values()}
        started: list[str] = []
        for alias in aliases:
            existing = state.get(alias)
            if existing and existing.running_brokers():
                log.info("cluster %s already runs at %s", alias, existing.bootstrap)
                continue
            if existing is None:
                slot = next(i for i in range(100) if i not in used_slots)
                used_slots.add(slot)
                existing = self._new_cluster(alias, brokers, base_port + slot * PORTS_PER_CLUSTER, security)
            for broker in existing.brokers:
                broker.pid = self._start_broker(existing, broker, jars)
            state[alias] = existing
            started.append(alias)
            self._save(state)
        for alias in aliases:
            self._wait_ready(state[alias], timeout_s)
        return {a: state[a].bootstrap for a in aliases}

    def security(self) -> SecurityMaterial:
        """The CA, stores and passwords of this directory's secured clusters (made on first use)."""
        return SecurityMaterial.ensure(self.directory)

    def _token_endpoint(self) -> None:
        """The dev OAuth token endpoint (devcluster/oauth.py), started once for the directory."""
        material = self.security()
        pid_file, ready = material.directory / "oauth.pid", material.directory / "oauth.ready"
        if pid_file.exists() and pid_alive(int(pid_file.read_text())) and ready.exists():
            return
        if not material.oauth_port_file.exists():
            material.oauth_port_file.write_text(str(free_port("the dev token endpoint")))
        ready.unlink(missing_ok=True)
        out = open(material.directory / "oauth.log", "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(
            [sys.executable, "-m", "sparkmirror.devcluster.oauth", str(material.directory),
             material.oauth_port_file.read_text().strip()],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        out.close()
        pid_file.write_text(str(proc.pid))
        deadline = time.monotonic() + 20
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise DevClusterError(f"the dev token endpoint did not start; see {material.directory / 'oauth.log'}")
            time.sleep(0.1)

    def _stop_token_endpoint(self) -> None:
        pid_file = self.directory / "security" / "oauth.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text())
            if pid_alive(pid):
                signal_group(pid, signal.SIGTERM)
            pid_file.unlink(missing_ok=True)
            (self.directory / "security" / "oauth.ready").unlink(missing_ok=True)

    def _new_cluster(self, alias: str, brokers: int, first_port: int, security: str = "plaintext") -> ClusterState:
        cdir = self.directory / alias
        if cdir.exists():
            shutil.rmtree(cdir)
        cdir.mkdir(parents=True)
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        cluster = ClusterState(alias=alias, cluster_id=cluster_id, directory=str(cdir), security=security)
        for i in range(brokers):
            port = first_port + 2 * i
            for p in (port, port + 1):
                if port_in_use(p):
                    raise DevClusterError(
                        f"cannot start cluster {alias}: port {p} on 127.0.0.1 is in use (choose another --base-port)"
                    )
            cluster.brokers.append(
                BrokerState(node_id=i + 1, port=port, controller_port=port + 1, log_dir=str(cdir / f"broker-{i + 1}"))
            )
        (cdir / "log4j2.properties").write_text(_LOG4J2)
        for broker in cluster.brokers:
            self._write_properties(cluster, broker)
            self._format(cluster, broker)
        return cluster

    def _write_properties(self, cluster: ClusterState, broker: BrokerState) -> None:
        n = len(cluster.brokers)
        rf = min(3, n)
        voters = ",".join(f"{b.node_id}@127.0.0.1:{b.controller_port}" for b in cluster.brokers)
        props = {
            "process.roles": "broker,controller",
            "node.id": broker.node_id,
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},CONTROLLER://127.0.0.1:{broker.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(Path(broker.log_dir) / "data"),
            "num.partitions": 1,
            # Topics are created deliberately, by the tests and by the mirror.
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": 10,
            # With 3 brokers: replication factor 3 and min.insync.replicas 2 (a broker may fail, acks=all
            # still lands on two).
            "default.replication.factor": rf,
            "min.insync.replicas": min(2, n),
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min(2, n),
            "transaction.state.log.num.partitions": 10,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": min(2, n),
            "group.initial.rebalance.delay.ms": 0,
            "num.network.threads": 2,
            "num.io.threads": 4,
            "log.cleaner.backoff.ms": 1000,
            # Each new log segment preallocates a sparse offset index and time index of this size and
            # maps them; the first touches fault in readahead-sized pieces that the kernel zero-fills.
            # With the 8 MB readahead of this machine's disk (read_ahead_kb=8192) Kafka's 10 MB default
            # made a broker spend most of its CPU in memset for fresh topics (docs/performance.md,
            # "the target broker's memset"). 1 MB still indexes 512 MB of log per segment.
            "log.index.size.max.bytes": DEV_INDEX_BYTES,
        }
        if cluster.security != "plaintext":
            props.update(self.security().broker_properties(cluster.security, broker.port, broker.controller_port))
        text = "".join(f"{k}={v}\n" for k, v in props.items())
        Path(broker.log_dir).mkdir(parents=True, exist_ok=True)
        path = Path(broker.log_dir) / "server.properties"
        path.touch(mode=0o600)  # a secured broker's holds passwords
        path.write_text(text)

    def _java(self, cluster: ClusterState, broker: BrokerState, jars: Iterable[Path], main: str) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise DevClusterError("java is not on PATH; Kafka's brokers need Java 17+")
        classpath = os.pathsep.join(str(j) for j in jars)
        return [
            java,
            f"-Xms{BROKER_HEAP}",
            f"-Xmx{BROKER_HEAP}",
            *self.broker_jvm_options.split(),
            "-Djava.awt.headless=true",
            f"-Dkafka.logs.dir={broker.log_dir}",
            f"-Dlog4j2.configurationFile={Path(cluster.directory) / 'log4j2.properties'}",
            *(self.security().jvm_options() if cluster.security == "sasl_ssl" else []),
            "-cp",
            classpath,
            main,
        ]

    def _format(self, cluster: ClusterState, broker: BrokerState) -> None:
        jars = kafka_broker_artifacts().jars()
        cmd = self._java(cluster, broker, jars, "kafka.tools.StorageTool") + [
            "format",
            # One argument: a random id may start with "-".
            f"--cluster-id={cluster.cluster_id}",
            "--config",
            str(Path(broker.log_dir) / "server.properties"),
            "--ignore-formatted",
        ]
        argfile = Path(broker.log_dir) / "format.args"
        if cluster.security == "sasl_ssl":
            # SCRAM users hold passwords: the arguments go through a Java argument file (0600),
            # never onto the command line (ps).
            main_at = cmd.index("kafka.tools.StorageTool")
            args = cmd[main_at:] + self.security().format_arguments()
            argfile.touch(mode=0o600)
            argfile.write_text("\n".join(f'"{a}"' for a in args) + "\n")
            cmd = [*cmd[:main_at], f"@{argfile}"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        finally:
            argfile.unlink(missing_ok=True)
        if proc.returncode != 0:
            raise DevClusterError(
                f"formatting broker {broker.node_id} of cluster {cluster.alias} failed:\n"
                f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
            )

    def _start_broker(self, cluster: ClusterState, broker: BrokerState, jars: list[Path]) -> int:
        cmd = self._java(cluster, broker, jars, "kafka.Kafka") + [str(Path(broker.log_dir) / "server.properties")]
        out = open(Path(broker.log_dir) / "stdout.log", "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        out.close()
        log.info(
            "started broker %d of cluster %s (pid %d, port %d)",
            broker.node_id,
            cluster.alias,
            proc.pid,
            broker.port,
        )
        return proc.pid

    def _wait_ready(self, cluster: ClusterState, timeout_s: float) -> None:
        from sparkmirror.kafka.factory import new_admin

        deadline = time.monotonic() + timeout_s
        conf: dict[str, Any] = {
            "bootstrap.servers": cluster.bootstrap,
            "log_level": 0,
        }
        if cluster.security != "plaintext":
            conf.update(self.security().librdkafka_settings(cluster.security))
        admin = new_admin(conf)
        last_error: str = ""
        while time.monotonic() < deadline:
            dead = [b for b in cluster.brokers if not b.is_running()]
            if dead:
                logfile = Path(dead[0].log_dir) / "stdout.log"
                tail = logfile.read_text(errors="replace")[-3000:] if logfile.exists() else ""
                raise DevClusterError(
                    f"broker {dead[0].node_id} of cluster {cluster.alias} exited during start-up; "
                    f"see {logfile}:\n{tail}"
                )
            try:
                md = admin.list_topics(timeout=2)
                if len(md.brokers) == len(cluster.brokers):
                    log.info("cluster %s is ready at %s", cluster.alias, cluster.bootstrap)
                    return
                last_error = f"{len(md.brokers)} of {len(cluster.brokers)} brokers registered"
            except Exception as exc:  # noqa: BLE001 - retried until the deadline
                last_error = str(exc)
            time.sleep(0.5)
        raise DevClusterError(
            f"cluster {cluster.alias} did not answer metadata requests at {cluster.bootstrap} "
            f"within {timeout_s:.0f}s ({last_error})"
        )

    # -- one broker (fault tests) -------------------------------------------------
    def kill_broker(self, alias: str, node_id: int) -> None:
        """SIGKILL one broker of a running cluster (a crash); :meth:`restart_broker` brings it back."""
        state = self._load()
        broker = self._broker(state, alias, node_id)
        if broker.is_running() and broker.pid:
            signal_group(broker.pid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while pid_alive(broker.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        broker.pid = None
        self._save(state)
        log.info("killed broker %d of cluster %s", node_id, alias)

    def restart_broker(self, alias: str, node_id: int, *, timeout_s: float = 90.0) -> None:
        """Start one stopped broker again with its data; returns once the cluster has all its brokers."""
        state = self._load()
        broker = self._broker(state, alias, node_id)
        if not broker.is_running():
            broker.pid = self._start_broker(state[alias], broker, kafka_broker_artifacts().jars())
            self._save(state)
            # Between fork and exec the child's command line is still Python's: is_running() would
            # read it as a broker that exited.
            deadline = time.monotonic() + 10
            while not broker.is_running() and pid_alive(broker.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        self._wait_ready(state[alias], timeout_s)

    @staticmethod
    def _broker(state: dict[str, ClusterState], alias: str, node_id: int) -> BrokerState:
        cluster = state.get(alias)
        broker = next((b for b in cluster.brokers if b.node_id == node_id), None) if cluster else None
        if broker is None:
            raise DevClusterError(f"no broker {node_id} in dev cluster {alias}")
        return broker

    # -- down ---------------------------------------------------------------
    def down(
        self,
        aliases: Sequence[str] | None = None,
        *,
        keep_data: bool = False,
        kill: bool = False,
        timeout_s: float = 30.0,
    ) -> list[str]:
        """Stop the named clusters (all when ``aliases`` is None).

        ``kill`` sends SIGKILL at once (a crash, for failover tests);
        ``keep_data`` keeps the cluster's logs so a later ``up`` restarts it
        with its data.
        """
        state = self._load()
        names = list(state) if aliases is None else [a for a in aliases if a in state]
        unknown = [] if aliases is None else [a for a in aliases if a not in state]
        if unknown:
            raise DevClusterError(f"no dev cluster named {', '.join(unknown)} in {self.directory}")
        for alias in names:
            cluster = state[alias]
            procs = [b.pid for b in cluster.brokers if b.is_running() and b.pid]
            for pid in procs:
                signal_group(pid, signal.SIGKILL if kill else signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            while any(pid_alive(p) for p in procs) and time.monotonic() < deadline:
                time.sleep(0.2)
            for pid in procs:
                if pid_alive(pid):
                    log.warning("broker pid %d of cluster %s ignored SIGTERM; killing it", pid, alias)
                    signal_group(pid, signal.SIGKILL)
            for b in cluster.brokers:
                b.pid = None
            if keep_data:
                state[alias] = cluster
            else:
                shutil.rmtree(cluster.directory, ignore_errors=True)
                del state[alias]
            log.info("stopped cluster %s", alias)
        self._save(state)
        if not any(c.running_brokers() for c in state.values()):
            self._stop_token_endpoint()
        return names


def signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _slot(cluster: ClusterState, base_port: int) -> int:
    return (cluster.brokers[0].port - base_port) // PORTS_PER_CLUSTER if cluster.brokers else -1


def free_port(purpose: str) -> int:
    """A free port on 127.0.0.1 below the ephemeral range (32768+), where clients' own ports never land."""
    import random

    for _ in range(200):
        port = random.randrange(20000, 32000)
        if not port_in_use(port):
            return port
    raise DevClusterError(f"no free port on 127.0.0.1 for {purpose}")


def port_in_use(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False
