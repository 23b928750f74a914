"""The JVM writer's jar: compiled once per source, into the jar cache, with the JDK's ``javac``.

The jar is named by a hash of its source and of the jars it was compiled against (pyspark's and the
Kafka connector's), so a new pyspark or a changed source compiles again; a finished jar is never
rebuilt. Needs a JDK (``javac``) on the driver only: the jar reaches executors as a Spark jar.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from sparkmirror.artifacts.cache import cache_root, spark_kafka_artifacts
from sparkmirror.errors import SetupError

log = logging.getLogger(__name__)

SOURCES = (Path(__file__).parent / "java" / "RangeCopier.java",)
JAR_NAME = "sparkmirror-jvm-writer.jar"


def _pyspark_jars() -> list[Path]:
    import pyspark

    return sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))


def _classpath() -> list[Path]:
    return [*_pyspark_jars(), *spark_kafka_artifacts().jars()]


def _fingerprint(classpath: list[Path]) -> str:
    digest = hashlib.sha256()
    for source in SOURCES:
        digest.update(source.read_bytes())
    for jar in classpath:
        digest.update(jar.name.encode())
    return digest.hexdigest()[:16]


def writer_jar() -> Path:
    """The compiled writer's jar (compiled now if this source has no jar yet)."""
    classpath = _classpath()
    folder = cache_root() / "jars" / f"sparkmirror-jvm-writer-{_fingerprint(classpath)}"
    jar = folder / JAR_NAME
    if jar.exists():
        return jar
    javac = shutil.which("javac")
    if javac is None:
        raise SetupError(
            "sparkmirror.writer = jvm needs a JDK's `javac` on the driver once, to compile the writer "
            "(Java 17 or later); or set sparkmirror.sink.writer = python"
        )
    log.info("compiling the JVM writer into %s", jar)
    with tempfile.TemporaryDirectory(prefix="sparkmirror-javac-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        cmd = [javac, "--release", "17", "-nowarn", "-d", str(classes), "-cp", ":".join(map(str, classpath))]
        proc = subprocess.run([*cmd, *map(str, SOURCES)], capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            raise SetupError(f"compiling the JVM writer failed (javac exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        folder.mkdir(parents=True, exist_ok=True)
        # A name of this process's own, then one rename: two runs compiling at once each write their own
        # file, and the jar is complete or absent, never half-written.
        partial = folder / f"{JAR_NAME}.{os.getpid()}.partial"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: sparkmirror\n\n")
            for path in sorted(classes.rglob("*.class")):
                zf.write(path, path.relative_to(classes).as_posix())
        os.replace(partial, jar)
    return jar
