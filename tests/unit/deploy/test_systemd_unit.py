"""deploy/systemd/: the unit agrees with how `sparkmirror run` stops and exits.

What systemd's own check (tests/integration/test_systemd_verify.py) cannot know: that SIGTERM reaches
`sparkmirror run` alone (docs/deployment.md), that the stop timeout outlasts the run's own stop bound,
and that the exit codes the unit does not restart on are those of the errors a restart cannot mend.
"""

from __future__ import annotations

import re
from pathlib import Path

from sparkmirror.errors import ConfigError, SparkMirrorError
from sparkmirror.kafka.lease import LeaseHeld
from sparkmirror.kafka.topicids import TopicRecreated
from sparkmirror.pipeline.driver.mirror import RUN_STOP_BOUND_S
from sparkmirror.pipeline.exceptions import InstanceConflict, SourceLossError, TopicRecreatedError

UNIT = Path(__file__).resolve().parents[3] / "deploy" / "systemd" / "sparkmirror.service"


def _service() -> dict[str, str]:
    """The unit's [Service] section, key -> value, read as systemd reads it: comments and blank lines
    skipped, a line ending in a backslash continued, a key set twice kept as its last value (the keys
    checked here take one value)."""
    section, out = "", {}
    for line in re.sub(r"\\\n", " ", UNIT.read_text()).splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
        elif section == "[Service]":
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def test_sigterm_reaches_the_run_alone_and_the_stop_outlasts_its_bound() -> None:
    service = _service()
    assert service["ExecStart"].split()[1:3] == ["run", "/etc/sparkmirror/mm2.properties"]
    assert service["KillMode"] == "mixed"
    assert service.get("KillSignal", "SIGTERM") == "SIGTERM"
    assert int(service["TimeoutStopSec"]) >= RUN_STOP_BOUND_S


def test_the_codes_not_restarted_on_are_those_the_run_gave_up_with() -> None:
    service = _service()
    assert service["Restart"] == "on-failure"  # not after exit code 0: stopped on request, or --once done
    prevented = {int(code) for code in service["RestartPreventExitStatus"].split()}
    # The run retries what retrying can mend itself; these are what it gave up on (docs/faults.md).
    assert prevented == {
        SparkMirrorError.exit_code,  # a runtime failure retrying cannot fix
        ConfigError.exit_code,
        SourceLossError.exit_code,
        TopicRecreatedError.exit_code,
    }
    assert TopicRecreated.exit_code == TopicRecreatedError.exit_code
    # Another instance's lease: restarted, so this one takes over once the other stops.
    assert LeaseHeld.exit_code == InstanceConflict.exit_code not in prevented


def test_the_run_shares_the_hosts_temporary_directory() -> None:
    # Two runs of one flow on a host find each other through the lease's lock file there (kafka/lease.py).
    assert _service().get("PrivateTmp", "no") in ("no", "false", "0")
