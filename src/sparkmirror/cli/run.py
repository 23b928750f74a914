"""`sparkmirror run mm2.properties`: run the enabled flows until stopped.

Exit codes (beside main's 0/1/2): 5 when records expired on the source before they were mirrored
(``sparkmirror.source.loss = report``: at the end of the run; ``fail``: the flow stopped there);
6 when another instance runs a flow (it holds the flow's lease); 7 when a source topic was
deleted and re-created (``--reset-topic`` resumes); 2 also when a flow's first start finds records
on the target that nothing explains (``--existing-records``, ``--mm2-offsets-topic``). Several
flows stopped with different codes: :func:`sparkmirror.pipeline.exceptions.run_exit_code` picks one (docs/faults.md).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

import click

if TYPE_CHECKING:
    from sparkmirror.pipeline.driver.flow import Flow

log = logging.getLogger(__name__)


def parse_spark_conf(values: tuple[str, ...]) -> dict[str, str]:
    conf = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--spark-conf")
        conf[key.strip()] = value.strip()
    return conf


def print_summary(runners: Sequence[Flow]) -> None:
    from sparkmirror.kafka.inspect import topic_counts

    for r in runners:
        p = r.progress
        lag = "unknown" if p.lag is None else f"{p.lag:,}"
        click.echo(f"flow {p.flow}: {p.records:,} records mirrored in {p.commits} commits, lag {lag}")
        if p.lost_on_source:
            click.echo(f"  LOST on {r.flow.source}: {p.lost_on_source:,} records expired before they were mirrored:")
            for loss in p.losses:
                click.echo(f"    {loss}")
        if r.failure is not None:
            click.echo(f"  STOPPED: {r.failure}")
        if not r.subscribed:
            continue
        rows = topic_counts(r.flow, r.clients.source_admin, r.clients.target_admin, r.subscribed)
        width = max(len(f"{c.source_topic} -> {c.remote_topic}") for c in rows)
        policy = r.flow.policy
        users = [c for c in rows if not policy.is_heartbeats_topic(c.source_topic)]
        internal = [c for c in rows if policy.is_heartbeats_topic(c.source_topic)]
        for title, part in (("topic", users), ("internal topic", internal)):
            if not part:
                continue
            click.echo(f"  {title:<{width}}  partitions  records on {r.flow.source}  records on {r.flow.target}")
            for c in part:
                name = f"{c.source_topic} -> {c.remote_topic}"
                click.echo(f"  {name:<{width}}  {c.partitions:>10}  {c.source_records:>12,}  {c.target_records:>12,}")
        if internal:
            click.echo(
                "  (heartbeats: MM2's liveness records, written every few seconds on each cluster and mirrored "
                "like data, so their counts differ by the ones written since the copy; tools such as "
                "RemoteClusterUtils.replicationHops read them)"
            )


@click.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--clusters", default=None, help="Run only the flows whose target is one of these aliases (A,B).")
@click.option("--once", is_flag=True, help="Mirror what the source holds now, then stop.")
@click.option("--master", default=None, help="Spark master URL (default: sparkmirror.spark.master or local[*]).")
@click.option("--spark-conf", multiple=True, metavar="KEY=VALUE", help="Extra Spark setting (repeatable).")
@click.option(
    "--reset-topic",
    "reset_topics",
    multiple=True,
    metavar="TOPIC",
    help="A source topic that was deleted and re-created (the run stopped, exit 7): forget the old topic's "
    "position and mirror the new one from its beginning (repeatable; docs/faults.md).",
)
@click.option(
    "--existing-records",
    type=click.Choice(["refuse", "start-at-end", "copy-again"]),
    default="refuse",
    show_default=True,
    help="A flow's first start over remote partitions that already hold records neither sparkmirror's "
    "progress nor MirrorMaker 2's offsets explain: refuse (exit 2), start at the source's end (the records "
    "there are taken as mirrored), or copy every record again after them (docs/migrating-from-mm2.md).",
)
@click.option(
    "--mm2-offsets-topic",
    default="",
    metavar="TOPIC",
    help="Connect's offsets topic on the target that MirrorMaker 2 kept the flows' positions in, to adopt them "
    "(default: offset.storage.topic, else MM2's dedicated-mode mm2-offsets.<source>.internal).",
)
def run(
    config: Path,
    clusters: str | None,
    once: bool,
    master: str | None,
    spark_conf: tuple[str, ...],
    reset_topics: tuple[str, ...],
    existing_records: str,
    mm2_offsets_topic: str,
) -> None:
    """Mirror topics as configured in an MM2-format properties file."""
    from sparkmirror.config import load_config
    from sparkmirror.pipeline.driver.mirror import Mirror

    aliases = [a.strip() for a in clusters.split(",") if a.strip()] if clusters else None
    cfg = load_config(config, clusters=aliases)
    mirror = Mirror(
        cfg,
        once=once,
        master=master,
        spark_conf=parse_spark_conf(spark_conf),
        reset_topics=frozenset(reset_topics),
        existing_records=existing_records,  # type: ignore[arg-type]  # click.Choice checked it
        mm2_offsets_topic=mm2_offsets_topic.strip(),
    )

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: the copy tasks finish their interval, then stop", signal.Signals(signum).name)
        mirror.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def on_progress(runners: Sequence[Flow]) -> None:
        for r in runners:
            log.info(r.report_line())

    from sparkmirror.errors import SparkMirrorError
    from sparkmirror.pipeline.exceptions import FlowsFailed, SourceLossError, run_exit_code

    try:
        if sys.stderr.isatty() and not os.environ.get("CI"):
            with LiveView() as view:
                mirror.run(on_progress=view.update, progress_every_s=1.0)
        else:
            mirror.run(on_progress=on_progress)
    except SparkMirrorError as exc:
        # Records lost in report mode count too: the exit code follows the same rule as several
        # stopped flows (docs/faults.md).
        lost = sum(r.progress.lost_on_source for r in mirror.runners)
        code = run_exit_code([exc.exit_code, SourceLossError.exit_code]) if lost else exc.exit_code
        if code != exc.exit_code:
            raise FlowsFailed(
                f"{exc}; and {lost:,} records expired on the source before they were mirrored (listed above)", code
            ) from None
        raise
    finally:
        try:
            print_summary(mirror.runners)
        except Exception as exc:  # noqa: BLE001 - the summary's counts need the clusters; the exit code does not
            log.warning("run summary incomplete: %s", exc)
        for r in mirror.runners:
            r.clients.close()  # the summary's admin clients: Spark keeps the flows referenced
    lost = sum(r.progress.lost_on_source for r in mirror.runners)
    if lost:
        raise SourceLossError(
            f"{lost:,} records expired on the source before they were mirrored (listed above); "
            "raise the source topics' retention or the mirror's throughput"
        )


class LiveView:
    """On a terminal: one row per flow, redrawn every second, with the log printed above it."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(stderr=True)
        self.live = Live(console=self.console, refresh_per_second=2, redirect_stderr=True, transient=False)
        self._handlers: list[tuple[logging.StreamHandler[TextIO], TextIO]] = []

    def __enter__(self) -> LiveView:
        self.live.__enter__()
        # The log's handler holds the stderr it was given; point it at the display's proxy so
        # lines print above the table instead of through it.
        for h in logging.getLogger().handlers:
            if isinstance(h, logging.StreamHandler) and h.stream in (sys.__stderr__, self.live.console.file):
                self._handlers.append((h, h.stream))
                h.setStream(sys.stderr)
        return self

    def __exit__(self, *exc: object) -> None:
        for h, stream in self._handlers:
            h.setStream(stream)
        self.live.__exit__(None, None, None)

    def update(self, runners: Sequence[Flow]) -> None:
        from rich.table import Table

        table = Table(box=None, padding=(0, 2), header_style="bold")
        for name in ("flow", "state", "records", "records/s", "lag", "last checkpoint", "restarts"):
            table.add_column(name, justify="left" if name in ("flow", "state") else "right")
        now = time.time()
        for r in runners:
            p = r.progress
            checkpoint = "-" if p.last_checkpoint_at is None else f"{now - p.last_checkpoint_at:,.0f}s ago"
            table.add_row(
                p.flow,
                r.status.state,
                f"{p.records:,}",
                f"{p.rate():,.0f}",
                "?" if p.lag is None else f"{p.lag:,}",
                checkpoint,
                str(p.restarts),
            )
        self.live.update(table)
