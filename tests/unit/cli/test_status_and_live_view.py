"""`sparkmirror status`'s usage errors, its human rendering, and `run`'s live view, without a cluster."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

from click.testing import CliRunner
from rich.console import Console

from sparkmirror.cli.main import cli
from sparkmirror.cli.run import LiveView
from sparkmirror.core.status import FlowStatus, PartitionLag
from sparkmirror.status.reader import FlowReport, GroupCheckpoint

CONFIG = """\
clusters = A, B
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:2
A->B.enabled = true
"""
NOW = 1_800_000_000_000


def test_status_of_a_flow_the_file_does_not_name_exits_2_naming_the_flows(tmp_path: Path) -> None:
    cfg = tmp_path / "mm2.properties"
    cfg.write_text(CONFIG)
    done = CliRunner().invoke(cli, ["status", str(cfg), "--flow", "A->C"], catch_exceptions=False)
    assert done.exit_code == 2
    assert "--flow A->C" in done.output and "A->B" in done.output


def test_status_rejects_a_negative_max_lag(tmp_path: Path) -> None:
    cfg = tmp_path / "mm2.properties"
    cfg.write_text(CONFIG)
    done = CliRunner().invoke(cli, ["status", str(cfg), "--max-lag", "-1"])
    assert done.exit_code == 2 and "--max-lag" in done.output


def test_the_human_status_lists_only_lagging_partitions_and_never_reads_names_as_markup(capsys) -> None:
    from sparkmirror.cli.status import render_reports

    status = FlowStatus("A->B", "restarting", "h1", 7, NOW - 9_000, NOW - 1_000, 10_000, error="[bold]boom[/bold]")
    report = FlowReport(
        "A->B",
        "at-least-once",
        "restarting",
        "on h1 pid 7, reported 1s ago",
        status,
        [PartitionLag("orders", 0, 0, 10, 10), PartitionLag("orders", 1, 0, 10, 4, NOW - 30_000)],
        [GroupCheckpoint("[red]app[/red]", 2, NOW - 5_000)],
    )
    render_reports([report], NOW, verdict="healthy")
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("orders")]
    assert len(rows) == 1 and rows[0].split()[1:] == ["1", "10", "4", "6", "30.0"], rows
    assert "[bold]boom[/bold]" in out and "[red]app[/red]" in out
    assert out.rstrip().endswith("health: healthy")


def test_the_live_view_shows_a_row_per_flow() -> None:
    progress = SimpleNamespace(flow="A->B", records=1234, lag=5, restarts=1, last_checkpoint_at=None, rate=lambda: 99.0)
    runner = SimpleNamespace(progress=progress, status=SimpleNamespace(state="running"))
    view = LiveView()
    view.console = Console(file=io.StringIO(), width=120)
    view.live.console = view.console
    view.update([runner])  # type: ignore[list-item]
    view.console.print(view.live.renderable)
    text = view.console.file.getvalue()  # type: ignore[attr-defined]
    assert "A->B" in text and "running" in text and "1,234" in text and "99" in text
