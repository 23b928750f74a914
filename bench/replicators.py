"""The four systems the benchmark measures, as command lines and configuration files.

- ``limit``: ``bench/jvm/CopyLoop.java``, copy threads with a consumer and a producer each, in a JVM;
- ``mm2``: Apache Kafka's MirrorMaker 2 in dedicated mode
  (``org.apache.kafka.connect.mirror.MirrorMaker``), from the Maven Central jars;
- ``sparkmirror_at_least_once`` and ``sparkmirror_exactly_once``: ``sparkmirror run``.

All of them write with the same producer settings (:class:`Common`). Each runs as
its own process tree under ``bench/proctree.py`` so its CPU and memory can be
measured; this module only builds what to run and asks each system's own tools
to translate a consumer group's offsets.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from sparkmirror.artifacts import fetch, mm2_artifacts

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
JAVA_SOURCES = (
    BENCH / "jvm" / "CopyLoop.java",
    BENCH / "jvm" / "PacedLoad.java",
    BENCH / "jvm" / "TransportLoop.java",
    REPO / "tests" / "mm2client" / "TranslateOffsets.java",
)

#: Kafka's own launch script defaults (kafka-run-class.sh) for MM2: G1, 20 ms pause goal.
KAFKA_JVM_FLAGS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
#: connect-mirror-maker.sh's heap; Kafka's perf tools run with 512 MiB.
MM2_HEAP = ("-Xms256M", "-Xmx2G")
LIMIT_HEAP = ("-Xmx512M",)
TRANSPORT_HEAP = ("-Xmx256M",)

_LOG4J2 = """\
status = error
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = ${sys:bench.log.level:-INFO}
rootLogger.appenderRef.console.ref = STDERR
"""

SOURCE, TARGET = "A", "B"
GROUP = "bench-app"


@dataclass(frozen=True)
class Common:
    """What every replicator shares: clusters, partitions and the producer settings."""

    bootstraps: dict[str, str]
    partitions: int
    linger_ms: int
    batch_size: int
    compression: str
    #: MM2: tasks.max. sparkmirror: Spark's own parallelism (local[*]) decides.
    tasks_max: int
    #: Copy threads of the limit loop (each with its own consumer and producer).
    limit_threads: int
    checkpoint_interval_s: int = 5
    mm2_extra: dict[str, str] = field(default_factory=dict)
    sparkmirror_extra: dict[str, str] = field(default_factory=dict)
    #: sparkmirror -vv: its per-batch timing goes to the run's logs.
    sparkmirror_debug: bool = False
    #: sparkmirror's Spark master (``run --master``): None runs it embedded (``local[*]``).
    spark_master: str | None = None

    def producer(self) -> dict[str, str]:
        return {
            "acks": "all",
            "enable.idempotence": "true",
            "max.in.flight.requests.per.connection": "5",
            "linger.ms": str(self.linger_ms),
            "batch.size": str(self.batch_size),
            "compression.type": self.compression,
        }


def remote(topic: str) -> str:
    """The remote topic's name on B (MM2's DefaultReplicationPolicy, used by all four)."""
    return f"{SOURCE}.{topic}"


def label(topic: str) -> str:
    """A file-name-safe label for a topic, a regex (``scale-.*``) or a comma-separated list of topics."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", topic)
    return safe if len(safe) <= 60 else f"{safe[:40]}-{len(topic.split(','))}topics"


def _properties(items: dict[str, str]) -> str:
    return "".join(f"{k} = {v}\n" for k, v in items.items())


class Jvm:
    """Java programs of the benchmark, compiled once per run against the cached MM2 jars."""

    def __init__(self, workdir: Path) -> None:
        artifacts = mm2_artifacts()
        fetch(artifacts)
        self.jars = artifacts.jars()
        self.classes = workdir / "classes"
        self.log4j = workdir / "log4j2.properties"
        self.log4j.write_text(_LOG4J2)
        self.classes.mkdir(parents=True, exist_ok=True)
        cmd = ["javac", "--release", "17", "-d", str(self.classes), "-cp", self.classpath(), *map(str, JAVA_SOURCES)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"javac failed (exit {proc.returncode}):\n{proc.stderr}")

    def classpath(self) -> str:
        return os.pathsep.join([str(self.classes), *(str(j) for j in self.jars)])

    def command(self, main: str, *args: str, heap: tuple[str, ...], log_level: str = "INFO") -> list[str]:
        return [
            "java",
            *heap,
            *KAFKA_JVM_FLAGS,
            f"-Dlog4j2.configurationFile={self.log4j}",
            f"-Dbench.log.level={log_level}",
            "-cp",
            self.classpath(),
            main,
            *args,
        ]

    def java_version(self) -> str:
        proc = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
        return proc.stderr.splitlines()[0] if proc.stderr else "unknown"


class Replicator(ABC):
    """One system under test."""

    name: str
    #: Whether its throughput run ends on its own once the workload is copied.
    exits_when_done: bool
    #: Whether it translates consumer group offsets (the failover check applies).
    translates: bool
    #: Whether it takes its topics as a comma-separated list (the loops), not a regex (the replicators).
    lists_topics = False

    def __init__(self, common: Common, jvm: Jvm) -> None:
        self.common = common
        self.jvm = jvm

    @abstractmethod
    def command(self, run_dir: Path, topic: str, *, count: int | None) -> list[str]:
        """What to run to mirror ``topic``: ``count`` records then stop, or until SIGTERM when None."""

    def translate(self, run_dir: Path, topic: str) -> dict[int, int | None]:
        """Group :data:`GROUP`'s offsets on B per partition of ``topic``, as this system translates them."""
        raise NotImplementedError(f"{self.name} does not translate offsets")

    def producer_file(self, run_dir: Path, topic: str, prefix: str) -> Path:
        """The shared producer settings as a properties file, for a system that takes them as one."""
        props = run_dir / f"{prefix}-producer-{label(topic)}.properties"
        props.write_text(_properties(self.common.producer()))
        return props


class Limit(Replicator):
    name = "limit"
    exits_when_done = True
    translates = False
    lists_topics = True

    def command(self, run_dir: Path, topic: str, *, count: int | None) -> list[str]:
        props = self.producer_file(run_dir, topic, "limit")
        b = self.common.bootstraps
        return self.jvm.command(
            "CopyLoop",
            b[SOURCE],
            b[TARGET],
            topic,
            ",".join(remote(t) for t in topic.split(",")),
            str(count or 0),
            str(self.common.limit_threads),
            str(props),
            heap=LIMIT_HEAP,
        )


class Transport(Replicator):
    """Not a replicator: a Python copy loop over the Java clients (``bench/transport_loop.py``), for
    ``bench/latency_probe.py --system transport`` (docs/decisions.md, "Java clients as the task's
    transport"). As many tasks as the limit loop has threads; ``shared_jvm``: one JVM for all of them."""

    exits_when_done = False
    translates = False
    lists_topics = True

    def __init__(self, common: Common, jvm: Jvm, *, shared_jvm: bool = False) -> None:
        super().__init__(common, jvm)
        self.shared_jvm = shared_jvm
        self.name = "transport_shared_jvm" if shared_jvm else "transport"

    def command(self, run_dir: Path, topic: str, *, count: int | None) -> list[str]:
        props = self.producer_file(run_dir, topic, "transport")
        b = self.common.bootstraps
        return [
            sys.executable,
            str(BENCH / "transport_loop.py"),
            b[SOURCE],
            b[TARGET],
            topic,
            ",".join(remote(t) for t in topic.split(",")),
            f"--tasks={self.common.limit_threads}",
            f"--classpath={self.jvm.classpath()}",
            f"--producer={props}",
            *(f"--java-option={o}" for o in (*TRANSPORT_HEAP, *KAFKA_JVM_FLAGS, *self.logging())),
            *(["--shared-jvm"] if self.shared_jvm else []),
        ]

    def logging(self) -> tuple[str, ...]:
        """The bench's log4j2 file, which logs to stderr: log4j2's default logs to stdout, the frames' pipe."""
        return f"-Dlog4j2.configurationFile={self.jvm.log4j}", "-Dbench.log.level=WARN"


class SparkRealTime(Replicator):
    """Not a replicator: Spark's Real-time Mode copying the topics with Spark's own Kafka sink
    (``bench/realtime_mode.py``), for ``bench/latency_probe.py --system spark-realtime``."""

    name = "spark_realtime"
    exits_when_done = False
    translates = False
    lists_topics = True

    def command(self, run_dir: Path, topic: str, *, count: int | None) -> list[str]:
        props = self.producer_file(run_dir, topic, "realtime")
        b = self.common.bootstraps
        return [
            sys.executable,
            str(BENCH / "realtime_mode.py"),
            b[SOURCE],
            b[TARGET],
            topic,
            f"--producer={props}",
            f"--workdir={run_dir / 'realtime-mode'}",
        ]


class MirrorMaker2(Replicator):
    name = "mm2"
    exits_when_done = False
    translates = True

    def config(self, topic: str) -> dict[str, str]:
        c = self.common
        conf = {
            "clusters": f"{SOURCE}, {TARGET}",
            f"{SOURCE}.bootstrap.servers": c.bootstraps[SOURCE],
            f"{TARGET}.bootstrap.servers": c.bootstraps[TARGET],
            f"{SOURCE}->{TARGET}.enabled": "true",
            f"{SOURCE}->{TARGET}.topics": topic,
            f"{TARGET}->{SOURCE}.enabled": "false",
            "tasks.max": str(c.tasks_max),
            # Single-broker clusters.
            "replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "config.storage.replication.factor": "1",
            # The dev brokers run without an authorizer; sparkmirror syncs no ACLs either.
            "sync.topic.acls.enabled": "false",
            "emit.checkpoints.interval.seconds": str(c.checkpoint_interval_s),
            "refresh.groups.interval.seconds": str(c.checkpoint_interval_s),
            **{f"{TARGET}.producer.{k}": v for k, v in c.producer().items()},
            **c.mm2_extra,
        }
        return conf

    def command(self, run_dir: Path, topic: str, *, count: int | None) -> list[str]:
        props = run_dir / f"mm2-{label(topic)}.properties"
        props.write_text(_properties(self.config(topic)))
        return self.jvm.command(
            "org.apache.kafka.connect.mirror.MirrorMaker", str(props), "--clusters", TARGET, heap=MM2_HEAP
        )

    def translate(self, run_dir: Path, topic: str) -> dict[int, int | None]:
        """Kafka's ``RemoteClusterUtils.translateOffsets`` on B, from MM2's checkpoints."""
        return mm2_client_translation(self.jvm, self.common.bootstraps[TARGET], topic)


def mm2_client_translation(jvm: Jvm, bootstrap: str, topic: str) -> dict[int, int | None]:
    cmd = jvm.command("TranslateOffsets", bootstrap, SOURCE, GROUP, "30000", heap=("-Xmx128m",), log_level="WARN")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"RemoteClusterUtils.translateOffsets failed (exit {proc.returncode}):\n{proc.stderr}")
    out: dict[int, int | None] = {}
    for line in proc.stdout.splitlines():
        name, partition, offset = line.split("\t")
        if name == remote(topic):
            out[int(partition)] = int(offset)
    return out


class Sparkmirror(Replicator):
    exits_when_done = True
    translates = True

    def __init__(self, common: Common, jvm: Jvm, *, exactly_once: bool) -> None:
        super().__init__(common, jvm)
        self.exactly_once = exactly_once
        self.name = "sparkmirror_exactly_once" if exactly_once else "sparkmirror_at_least_once"

    def config_file(self, run_dir: Path, topic: str) -> Path:
        c = self.common
        conf = {
            "clusters": f"{SOURCE}, {TARGET}",
            f"{SOURCE}.bootstrap.servers": c.bootstraps[SOURCE],
            f"{TARGET}.bootstrap.servers": c.bootstraps[TARGET],
            f"{SOURCE}->{TARGET}.enabled": "true",
            f"{SOURCE}->{TARGET}.topics": topic,
            "replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "emit.checkpoints.interval.seconds": str(c.checkpoint_interval_s),
            "sparkmirror.exactly.once": "true" if self.exactly_once else "false",
            "sparkmirror.progress.interval.seconds": "5",
            **{f"{TARGET}.producer.{k}": v for k, v in c.producer().items()},
            **c.sparkmirror_extra,
        }
        path = run_dir / f"{self.name}-{label(topic)}.properties"
        path.write_text(_properties(conf))
        return path

    def command(self, run_dir: Path, topic: str, *, count: int | None) -> list[str]:
        exe = str(Path(sys.executable).parent / "sparkmirror")
        verbose = ["-vv"] if self.common.sparkmirror_debug else []
        master = ["--master", self.common.spark_master] if self.common.spark_master else []
        return [exe, *verbose, "run", str(self.config_file(run_dir, topic)), *(["--once"] if count else []), *master]

    def translate(self, run_dir: Path, topic: str) -> dict[int, int | None]:
        """``sparkmirror offsets translate --json``: exact, from the offset map on B."""
        exe = str(Path(sys.executable).parent / "sparkmirror")
        cmd = [exe, "offsets", "translate", str(self.config_file(run_dir, topic)), "--source", SOURCE,
               "--target", TARGET, "--group", GROUP, "--json"]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"sparkmirror offsets translate failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        report = json.loads(proc.stdout)
        return {p["partition"]: p["target_offset"] for p in report["partitions"] if p["source_topic"] == topic}


def stop_system(proc: subprocess.Popen[bytes] | None) -> None:
    """Stop a system started in a session of its own (``start_new_session``): SIGTERM to its process
    group, SIGKILL a minute later if it is still there; nothing if it already exited."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    except ProcessLookupError:
        pass


#: The systems ``bench/latency_probe.py`` and ``bench/idle_flow.py`` run, by their ``--system`` name.
PROBE_SYSTEMS = (
    "sparkmirror", "sparkmirror-eos", "mm2", "limit", "transport", "transport-shared-jvm", "spark-realtime"
)


def probe_system(name: str, common: Common, jvm: Jvm) -> Replicator:
    """The system of a probe's ``--system`` name (one of :data:`PROBE_SYSTEMS`)."""
    if name == "mm2":
        return MirrorMaker2(common, jvm)
    if name == "limit":
        return Limit(common, jvm)
    if name in ("transport", "transport-shared-jvm"):
        return Transport(common, jvm, shared_jvm=name == "transport-shared-jvm")
    if name in ("sparkmirror", "sparkmirror-eos"):
        return Sparkmirror(common, jvm, exactly_once=name == "sparkmirror-eos")
    if name == "spark-realtime":
        return SparkRealTime(common, jvm)
    raise ValueError(f"no system named {name!r}: one of {', '.join(PROBE_SYSTEMS)}")


def all_replicators(common: Common, jvm: Jvm) -> list[Replicator]:
    return [
        Limit(common, jvm),
        MirrorMaker2(common, jvm),
        Sparkmirror(common, jvm, exactly_once=False),
        Sparkmirror(common, jvm, exactly_once=True),
    ]
