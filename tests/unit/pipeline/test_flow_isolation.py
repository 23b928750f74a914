"""One flow's terminal error stops that flow only, unless sparkmirror.stop.on.flow.failure; a run's stop tells every
flow's tasks before it waits for any (no Spark, no Kafka)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sparkmirror.config import load_config
from sparkmirror.pipeline.driver.mirror import Mirror
from sparkmirror.pipeline.exceptions import FlowFailed

CONFIG = """\
clusters = A, B
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:2
A->B.enabled = true
B->A.enabled = true
"""


def _mirror(extra: str = "") -> tuple[Mirror, list[SimpleNamespace], list[str]]:
    mirror = Mirror(load_config(CONFIG + extra))
    flows = [SimpleNamespace(flow=SimpleNamespace(name=n), failure=None) for n in ("A->B", "B->A")]
    mirror.runners = flows  # type: ignore[assignment]
    return mirror, flows, []


def _supervisor(flow: SimpleNamespace, stopped: list[str]) -> SimpleNamespace:
    return SimpleNamespace(flow=flow, stop=lambda: stopped.append(flow.flow.name))


def _fail() -> None:
    raise FlowFailed("flow=A->B t[0] offset=3: refused")


def test_a_terminal_error_stops_that_flow_only() -> None:
    mirror, flows, stopped = _mirror()
    mirror._guarded(_supervisor(flows[0], stopped), _fail)  # type: ignore[arg-type]
    assert isinstance(flows[0].failure, FlowFailed)
    assert flows[1].failure is None
    assert stopped == ["A->B"]


def test_stop_on_flow_failure_stops_the_run() -> None:
    mirror, flows, stopped = _mirror("sparkmirror.stop.on.flow.failure = true\n")
    with pytest.raises(FlowFailed):
        mirror._guarded(_supervisor(flows[0], stopped), _fail)  # type: ignore[arg-type]
    assert stopped == []


def test_every_flows_tasks_are_told_before_any_flow_is_waited_for() -> None:
    mirror, _flows, _ = _mirror()
    calls: list[tuple[str, str]] = []

    def supervisor(name: str) -> SimpleNamespace:
        flow = SimpleNamespace(request_copy_stop=lambda: calls.append(("told", name)))
        return SimpleNamespace(flow=flow, stop=lambda: calls.append(("stopped", name)))

    mirror.supervisors = [supervisor("A->B"), supervisor("B->A")]  # type: ignore[list-item]
    mirror._stop_flows()
    assert calls == [("told", "A->B"), ("told", "B->A"), ("stopped", "A->B"), ("stopped", "B->A")]
