"""The Spark session the pipeline runs in.

Embedded by default (``local[*]`` inside the ``sparkmirror run`` process); on a
Spark cluster when a master URL is given, in which case what the executors
need (the sparkmirror package, the Python that has confluent-kafka) is shipped
or named here. The copy needs no jar beyond Spark's own: its tasks read and
write with librdkafka.
"""

from __future__ import annotations

import atexit
import logging
import os
import shlex
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from sparkmirror.config.model import is_secret_key
from sparkmirror.kafka.stores import private_dir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: Defaults chosen for a mirror, not an analytics job; each can be overridden
#: with ``sparkmirror.spark.conf.<key>``.
SPARK_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    # Spark's own retry of a failed copy task starts from the progress on the target; the producer
    # is idempotent, so a retry costs duplicates at most (none exactly once).
    "spark.task.maxFailures": "4",
    "spark.driver.memory": "1g",
    "spark.executor.memory": "1g",
    "spark.python.worker.reuse": "true",
    "spark.ui.showConsoleProgress": "false",
    # Each flow's jobs run in a pool of their own (``pool_name``): a free core goes to the flow with
    # the fewest running tasks, not to the oldest job, so a flow with a backlog does not hold every
    # core while the others wait (docs/decisions.md, "Several flows share the application").
    "spark.scheduler.mode": "FAIR",
}

#: JVM options of Spark's driver, ahead of any the operator sets (a later option wins): it schedules
#: the copy tasks and carries none of the records, which the tasks' Python reads and writes. So the
#: first compiler tier only (no C2 compiles of code that runs once a second) and no performance-data
#: sampling every 50 ms (``jps``/``jstat`` no longer list it; ``jcmd <pid>`` and ``jstack <pid>`` still
#: work). Neither conflicts with an option set elsewhere (a collector would: HotSpot refuses two), and
#: the executors' options are left to the cluster (``spark-defaults.conf``). An idle flow's JVM went
#: from 0.37-0.40 % to 0.23-0.30 % of a core in local mode (docs/performance.md, "Session 40").
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:-UsePerfData"

#: The local property that names a job's fair-scheduler pool.
SCHEDULER_POOL = "spark.scheduler.pool"


def pool_name(flow: str) -> str:
    """The fair-scheduler pool of a flow's jobs (one per flow, made by Spark at first use with weight 1)."""
    return f"sparkmirror {flow}"


def build_session(master: str, conf: Mapping[str, str], app_name: str = "sparkmirror") -> SparkSession:
    """The Spark session of a run (``conf``: ``sparkmirror.spark.conf.*``, over :data:`SPARK_DEFAULTS`)."""
    from pyspark.sql import SparkSession

    settings = dict(SPARK_DEFAULTS)
    if master.startswith("local"):
        # local[N,F]: F task attempts, as spark.task.maxFailures elsewhere.
        if "," not in master and master.startswith("local["):
            master = master[:-1] + f",{settings['spark.task.maxFailures']}]"
    settings.update(conf)
    # Executors must run a Python that has confluent-kafka.
    settings["spark.pyspark.python"] = executor_python(settings, os.environ)
    settings.setdefault("spark.pyspark.driver.python", sys.executable)
    # Dev and test set-ups live on loopback; a real cluster sets its own.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = settings["spark.pyspark.python"]
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    level = os.environ.get("SPARKMIRROR_SPARK_LOG_LEVEL", "WARN")
    settings.update(java_options(settings, _log4j2(level)))
    builder = SparkSession.builder.appName(app_name).master(master)
    public, secret = split_secret_settings(settings)
    for k, v in public.items():
        builder = builder.config(k, v)
    if secret:
        # PySpark hands every builder setting to spark-submit as `--conf k=v` (visible in `ps`);
        # secrets (cloud storage keys, ...) go through a 0600 properties file instead.
        path = _write_properties(secret)
        rest = os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--properties-file {shlex.quote(str(path))} {rest}"
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(level)
    _quiet_expected_warnings(spark)
    if not master.startswith("local"):
        spark.sparkContext.addPyFile(str(_package_zip()))
    log.info("Spark %s session on %s", spark.version, master)
    return spark


def java_options(settings: Mapping[str, str], log4j2: Path) -> dict[str, str]:
    """The driver's ``extraJavaOptions``: :data:`JVM_OPTIONS` ahead of the operator's own (which win
    where they repeat one); its log4j2 configuration unless the operator names one. The driver JVM
    starts here: its log4j starts at our level, instead of Spark's default profile, which prints its
    own banner and WARN lines before setLogLevel can act. In local mode the executor is this JVM."""
    options = f"{JVM_OPTIONS} {settings.get('spark.driver.extraJavaOptions', '')}".strip()
    if "log4j2.configurationFile" not in options:
        options += f" -Dlog4j2.configurationFile=file:{log4j2}"
    return {"spark.driver.extraJavaOptions": options}


def executor_python(settings: Mapping[str, str], environ: Mapping[str, str]) -> str:
    """The Python the executors' workers run: ``spark.pyspark.python`` when set (on a cluster, e.g.
    ``./environment/bin/python`` of a packed venv shipped with ``spark.archives``,
    docs/deployment.md), else ``PYSPARK_PYTHON``, else this interpreter (local mode, or a cluster
    whose nodes have the same venv at the same path).

    PySpark takes the executors' Python from ``PYSPARK_PYTHON`` in the driver's environment
    (``SparkContext.pythonExec``), not from the setting: :func:`build_session` sets both to this,
    so that the setting given with ``--spark-conf`` is the one that runs.
    """
    return settings.get("spark.pyspark.python") or environ.get("PYSPARK_PYTHON") or sys.executable


def split_secret_settings(settings: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(settings safe on a command line, secret settings): a key that names a credential
    (``config.model.is_secret_key``: ``...secret.key``, ``...access.key``, ``...password``) is secret."""
    public = {k: v for k, v in settings.items() if not is_secret_key(k)}
    return public, {k: v for k, v in settings.items() if is_secret_key(k)}


def _write_properties(settings: Mapping[str, str]) -> Path:
    """A spark-submit properties file in the process's private directory (0700; the file 0600)."""
    path = private_dir() / "spark-secrets.conf"
    text = "".join(f"{_escape(k)}={_escape(v)}\n" for k, v in settings.items())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def _escape(text: str) -> str:
    """java.util.Properties escaping (backslash first), so any value reads back as it was."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    out = out.replace("=", "\\=").replace(":", "\\:").replace("#", "\\#").replace("!", "\\!")
    return ("\\" + out) if out.startswith(" ") else out


#: Spark loggers whose warnings describe how sparkmirror is meant to run. FairSchedulableBuilder warns
#: once per pool that it made the pool with default settings (weight 1, no minimum share): what each
#: flow's pool is meant to be.
_EXPECTED_WARNINGS = ("org.apache.spark.scheduler.FairSchedulableBuilder",)


def _quiet_expected_warnings(spark: SparkSession) -> None:
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        error = jvm.org.apache.logging.log4j.Level.ERROR
        for name in _EXPECTED_WARNINGS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, error)
    except Exception as exc:  # noqa: BLE001 - another logging backend: the lines stay, nothing breaks
        log.debug("could not quiet %s: %s", ", ".join(_EXPECTED_WARNINGS), exc)


def _log4j2(level: str) -> Path:
    """A log4j2 configuration for the driver JVM until ``setLogLevel(level)`` takes over.

    The root stays at WARN here: pyspark counts as Spark's shell, and Spark resets a shell's root
    level to WARN with a printed notice when the two differ. Start-up warnings that describe this
    machine rather than the mirror (no native Hadoop library) are raised to ``level``.
    """
    directory = Path(tempfile.mkdtemp(prefix="sparkmirror-log4j2."))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)  # read once, when the JVM starts
    out = directory / "log4j2.properties"
    out.write_text(
        f"""rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = {"error" if level.upper() in ("WARN", "ERROR", "FATAL", "OFF") else level.lower()}
"""
    )
    return out


def _package_zip() -> Path:
    """Zip the sparkmirror package so executors elsewhere can import it."""
    import sparkmirror

    root = Path(sparkmirror.__file__).parent
    out = Path(tempfile.mkdtemp(prefix="sparkmirror-py.")) / "sparkmirror.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in root.rglob("*.py"):
            zf.write(f, Path("sparkmirror") / f.relative_to(root))
    return out
