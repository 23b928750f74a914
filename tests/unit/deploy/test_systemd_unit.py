"""deploy/systemd/: the unit agrees with how `sparkmirror run` stops and exits.

What systemd's own check (tests/integration/test_systemd_verify.py) cannot know: that SIGTERM reaches
`sparkmirror run` alone (docs/deployment.md), that the stop timeout outlasts the run's own stop bound,
and that the exit codes the unit does not restart on are those of the errors a restart cannot mend.
"""

from __future__ import annotations

import configparser
from pathlib import Path

from sparkmirror.errors import ConfigError
from sparkmirror.kafka.lease import LeaseHeld
from sparkmirror.kafka.topicids import TopicRecreated
from sparkmirror.pipeline.driver.stream import STOP_BOUND_S
from sparkmirror.pipeline.exceptions import InstanceConflict, SourceLossError, TopicRecreatedError

UNIT = Path(__file__).resolve().parents[3] / "deploy" / "systemd" / "sparkmirror.service"
#: Seconds left after the tasks' stop for Spark's own and the run's summary, before systemd's SIGKILL.
SPARK_STOP_S = 20


def _service() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd's keys are case-sensitive
    parser.read_string(UNIT.read_text())
    return parser["Service"]


def test_sigterm_reaches_the_run_alone_and_the_stop_outlasts_its_bound() -> None:
    service = _service()
    assert service["ExecStart"].split()[1:3] == ["run", "/etc/sparkmirror/mm2.properties"]
    assert service["KillMode"] == "mixed"
    assert service.get("KillSignal", "SIGTERM") == "SIGTERM"
    assert int(service["TimeoutStopSec"]) >= STOP_BOUND_S + SPARK_STOP_S


def test_the_codes_not_restarted_on_are_the_errors_a_restart_cannot_mend() -> None:
    service = _service()
    assert service["Restart"] == "on-failure"  # not after exit code 0: stopped on request, or --once done
    prevented = {int(code) for code in service["RestartPreventExitStatus"].split()}
    assert prevented == {ConfigError.exit_code, SourceLossError.exit_code, TopicRecreatedError.exit_code}
    assert TopicRecreated.exit_code == TopicRecreatedError.exit_code
    # Another instance's lease: restarted, so this one takes over once the other stops.
    assert LeaseHeld.exit_code == InstanceConflict.exit_code not in prevented
