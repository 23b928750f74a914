"""The run's one exit code when several flows stopped with different codes (docs/faults.md)."""

from __future__ import annotations

import pytest

from sparkmirror.errors import ConfigError
from sparkmirror.kafka.access import AccessDenied
from sparkmirror.pipeline.exceptions import (
    FlowFailed,
    FlowsFailed,
    InstanceConflict,
    SourceLossError,
    TopicRecreatedError,
    run_exit_code,
    stopped_flows_error,
)


def test_flows_that_share_a_code_end_the_run_with_it() -> None:
    for code in (1, 2, 5, 6, 7):
        assert run_exit_code([code, code]) == code


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        ([1, 6], 6),
        ([6, 5], 5),
        ([5, 7, 6], 7),
        ([1, 7], 7),
        ([7, 2, 5], 2),
        ([1, 5], 5),
    ],
)
def test_different_codes_end_the_run_with_the_first_by_precedence(codes: list[int], expected: int) -> None:
    assert run_exit_code(codes) == expected
    assert run_exit_code(reversed(codes)) == expected  # not the order the flows stopped in


def test_one_stopped_flow_ends_the_run_with_its_own_error() -> None:
    error = TopicRecreatedError("flow=A->B source topic t was deleted and re-created")
    assert stopped_flows_error([error]) is error
    assert stopped_flows_error([]) is None


def test_several_stopped_flows_name_every_error_and_pick_one_code() -> None:
    errors = [
        InstanceConflict("flow=A->B is already running: host=h pid=1 holds its lease"),
        SourceLossError("flow=B->A t[0] offsets 10..19 were deleted"),
        AccessDenied("flow=C->A cluster A refused User:app: not authorized", authentication=False),
    ]
    combined = stopped_flows_error(errors)
    assert isinstance(combined, FlowsFailed) and isinstance(combined, FlowFailed)
    assert combined.exit_code == 5
    assert str(combined).startswith("3 flows stopped: ")
    assert all(str(e) in str(combined) for e in errors)
    assert stopped_flows_error([FlowFailed("x"), ConfigError("y", key="k")]).exit_code == 2  # type: ignore[union-attr]
    assert stopped_flows_error([FlowFailed("x"), FlowFailed("y")]).exit_code == 1  # type: ignore[union-attr]


def test_the_combined_error_keeps_its_code_through_pickling() -> None:
    import pickle

    again = pickle.loads(pickle.dumps(FlowsFailed("2 flows stopped: a; b", 7)))
    assert (str(again), again.exit_code) == ("2 flows stopped: a; b", 7)


def test_run_counts_report_mode_losses_with_a_stopped_flow(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flow stopped because another instance runs it (6) while another flow lost records on the
    source in report mode (5): the run exits 5, and its error says both."""
    from types import SimpleNamespace

    from click.testing import CliRunner

    from sparkmirror.cli.main import cli
    from sparkmirror.pipeline.driver.mirror import Mirror

    def flow(name: str, lost: int, failure: Exception | None) -> SimpleNamespace:
        progress = SimpleNamespace(flow=name, records=0, commits=0, lag=0, lost_on_source=lost, losses=[])
        return SimpleNamespace(
            progress=progress, failure=failure, subscribed={}, clients=SimpleNamespace(close=lambda: None)
        )

    conflict = InstanceConflict("flow=B->A is already running: host=h pid=1 holds its lease")

    def run(self: Mirror, **_kw: object) -> None:
        self.runners = [flow("A->B", 50, None), flow("B->A", 0, conflict)]  # type: ignore[list-item]
        raise conflict

    monkeypatch.setattr(Mirror, "run", run)
    cfg = tmp_path / "mm2.properties"
    cfg.write_text("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
                   "A->B.enabled = true\nB->A.enabled = true\n")  # fmt: skip
    result = CliRunner().invoke(cli, ["run", str(cfg)], catch_exceptions=False)
    assert result.exit_code == 5, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "already running" in errors[0] and "50 records expired" in errors[0], result.output
