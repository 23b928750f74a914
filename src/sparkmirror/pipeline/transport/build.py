"""The transport's jar: ``java/TransportServer.java`` compiled once, into the jar cache, with ``javac``.

The jar is named by a hash of its source and of the jars it is compiled against (Kafka's clients), so a
changed source compiles again and a finished jar is never rebuilt. Compiling needs a JDK once; running
needs a Java 17 runtime where the tasks run.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import tempfile
import zipfile
from pathlib import Path

from sparkmirror.artifacts.cache import cache_root, transport_artifacts
from sparkmirror.artifacts.jdk import jdk_tool
from sparkmirror.errors import SetupError

log = logging.getLogger(__name__)

SOURCES = (Path(__file__).parent / "java" / "TransportServer.java",)
JAR_NAME = "sparkmirror-transport.jar"
MAIN_CLASS = "TransportServer"


def _fingerprint(classpath: list[Path]) -> str:
    digest = hashlib.sha256()
    for source in SOURCES:
        digest.update(source.read_bytes())
    for jar in classpath:
        digest.update(jar.name.encode())
    return digest.hexdigest()[:16]


def classpath() -> list[Path]:
    """The transport JVM's classpath: its own jar (compiled now if this source has none yet), then Kafka's
    clients and their dependencies."""
    clients = transport_artifacts().jars()
    return [transport_jar(clients), *clients]


def transport_jar(clients: list[Path]) -> Path:
    folder = cache_root() / "jars" / f"sparkmirror-transport-{_fingerprint(clients)}"
    jar = folder / JAR_NAME
    if jar.exists():
        return jar
    javac = jdk_tool("javac")
    if javac is None:
        raise SetupError(
            "sparkmirror.transport = java needs a JDK's `javac` once, to compile the transport (Java 17 or "
            "later); or set sparkmirror.transport = librdkafka"
        )
    log.info("compiling the transport into %s", jar)
    with tempfile.TemporaryDirectory(prefix="sparkmirror-javac-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        cmd = [javac, "--release", "17", "-nowarn", "-d", str(classes), "-cp", ":".join(map(str, clients))]
        proc = subprocess.run([*cmd, *map(str, SOURCES)], capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            raise SetupError(f"compiling the transport failed (javac exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        folder.mkdir(parents=True, exist_ok=True)
        # A name of this process's own, then one rename: two processes compiling at once each write their
        # own file, and the jar is complete or absent, never half-written.
        partial = folder / f"{JAR_NAME}.{os.getpid()}.partial"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: sparkmirror\n\n")
            for path in sorted(classes.rglob("*.class")):
                zf.write(path, path.relative_to(classes).as_posix())
        os.replace(partial, jar)
    return jar
