"""`sparkmirror pause|resume|throttle mm2.properties`: act on running flows from any host.

Each command writes the flow's control record to its target cluster
(:mod:`sparkmirror.control.store`); the running mirror follows it and applies it within about a
second, whichever host it runs on, and ``status`` shows it. Nothing is lost or skipped: a paused
partition is read again from where it stopped, a throttled one later. Exit codes: 0 written, 1 the
target refused (the line names the principal and the ACL to grant) or could not be reached, 2 usage
or configuration error.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sparkmirror.cli.flows import flows_option

if TYPE_CHECKING:
    from sparkmirror.core.control import FlowControl

_CONFIG = click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
_TOPICS = click.option(
    "--topics",
    default=None,
    metavar="REGEX",
    help="Only the source topics this regex matches in full (as MM2's topics key); default: the whole flow.",
)


def _apply(
    config: Path,
    flows: tuple[str, ...],
    edit: str,
    apply: Callable[[FlowControl, int, str], FlowControl],
    said: Callable[[FlowControl], str],
) -> None:
    from sparkmirror.cli.flows import chosen_flows
    from sparkmirror.config import load_config
    from sparkmirror.control.store import change
    from sparkmirror.core.control import CONTROL_TOPIC
    from sparkmirror.kafka.flowclients import FlowClients

    chosen = chosen_flows(load_config(config), config, flows)
    for flow in chosen:
        clients = FlowClients(flow)
        try:
            _before, after = change(clients, edit, apply)
        finally:
            clients.close()
        click.echo(
            f"flow={flow.name}: {said(after)} (written to {CONTROL_TOPIC} on {flow.target}; a running mirror "
            "applies it within seconds, `sparkmirror status` shows it)"
        )


def _paused_line(c: FlowControl) -> str:
    if c.paused:
        return "paused: no source partition is read" + (
            f" (topics paused by pattern too: {', '.join(c.paused_topics)})" if c.paused_topics else ""
        )
    if c.paused_topics:
        return f"paused topics matching {', '.join(repr(t) for t in c.paused_topics)}; the others are copied"
    return "running: nothing paused"


def _pattern(topics: str | None) -> str | None:
    if topics is None:
        return None
    from sparkmirror.core.control import compile_topics
    from sparkmirror.core.exceptions import FormatError

    try:
        compile_topics(topics)
    except FormatError as exc:
        raise click.BadParameter(str(exc).removeprefix(f"--topics {topics!r}: "), param_hint="--topics") from None
    return topics


@click.command()
@_CONFIG
@flows_option
@_TOPICS
def pause(config: Path, flows: tuple[str, ...], topics: str | None) -> None:
    """Pause flows (or some of their topics): nothing is read until `resume`; the flow keeps its lease,
    checkpoints, metrics and status (`paused`)."""
    pattern = _pattern(topics)
    _apply(config, flows, "pause", lambda c, at, by: c.pause(pattern, at_ms=at, by=by), _paused_line)


@click.command()
@_CONFIG
@flows_option
@_TOPICS
def resume(config: Path, flows: tuple[str, ...], topics: str | None) -> None:
    """Resume paused flows (or the topics paused with exactly that --topics pattern), from where they stopped."""
    pattern = _pattern(topics)

    def apply(c: FlowControl, at: int, by: str) -> FlowControl:
        try:
            return c.resume(pattern, at_ms=at, by=by)
        except ValueError as exc:
            raise click.BadParameter(f"flow {c.flow}: {exc}", param_hint="--topics") from None

    _apply(config, flows, "resume", apply, _paused_line)


@click.command()
@_CONFIG
@flows_option
@click.option(
    "--bytes-per-second",
    "rate",
    type=click.IntRange(min=0),
    default=None,
    help="Most key and value bytes per second the flow copies, across all its tasks (0: no limit).",
)
@click.option(
    "--reset", is_flag=True, help="Back to the configuration's limit (sparkmirror.throttle.bytes.per.second)."
)
def throttle(config: Path, flows: tuple[str, ...], rate: int | None, reset: bool) -> None:
    """Change running flows' byte limit without a restart (checkpoints, heartbeats, status never wait for it)."""
    if (rate is None) == (not reset):
        raise click.UsageError("give either --bytes-per-second N or --reset")

    def said(c: FlowControl) -> str:
        if c.bytes_per_second is None:
            return "byte limit: the configuration's (sparkmirror.throttle.bytes.per.second)"
        if c.bytes_per_second == 0:
            return "byte limit: none (the configuration's is lifted)"
        return f"byte limit: {c.bytes_per_second:,} bytes/s across the flow's tasks"

    _apply(config, flows, "throttle", lambda c, at, by: c.throttle(None if reset else rate, at_ms=at, by=by), said)
