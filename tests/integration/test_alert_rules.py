"""The alert rules in docs/operations/ are valid Prometheus rules and fire when they should.

Prometheus's own validator runs them: ``promtool check rules`` and ``promtool test rules`` (from
Debian's ``prometheus`` package; ``make test`` installs it when it is missing).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parents[2] / "docs" / "operations"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: `make tools` installs it (Debian package prometheus)")
    return subprocess.run([promtool, *args], capture_output=True, text=True, cwd=RULES, timeout=120, check=False)


def test_the_alert_rules_are_valid_prometheus_rules() -> None:
    done = _promtool("check", "rules", "alerts.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 10 rules found" in done.stdout


def test_the_alert_rules_fire_when_they_should_and_not_before() -> None:
    done = _promtool("test", "rules", "alerts.test.yml")
    assert done.returncode == 0, done.stdout + done.stderr
