"""deploy/systemd/sparkmirror.service is a unit systemd accepts: `systemd-analyze verify` (Debian's systemd
package, `make tools`), with the unit's command pointed at this checkout's `sparkmirror` since
/opt/sparkmirror is not here. It catches a misspelt key or a bad value; tests/unit/deploy/test_systemd_unit.py
checks what the unit says against the code.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

UNIT = Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "sparkmirror.service"


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: `make tools` installs Debian's systemd package"
    here = Path(sys.executable).with_name("sparkmirror")
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("/opt/sparkmirror/venv/bin/sparkmirror", str(here)))
    # --recursive-errors=no: the unit's own errors, not those of the units it names (network-online.target).
    command = [analyze, "verify", "--man=no", "--recursive-errors=no", str(unit)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    # An unknown key or a bad value is only a warning on stderr (exit code 0): both must be empty.
    assert (done.returncode, done.stderr.strip()) == (0, "")
