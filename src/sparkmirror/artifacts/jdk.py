"""Where a JDK's tools are: ``$JAVA_HOME/bin`` first, then ``PATH``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def jdk_tool(name: str) -> str | None:
    """The path of the JDK tool ``name`` (``java``, ``javac``, ``keytool``), or None when there is none."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).exists():
        return str(Path(home) / "bin" / name)
    return shutil.which(name)
