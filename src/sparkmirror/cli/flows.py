"""The flows a command acts on: ``--flow A->B`` (repeatable), else every enabled flow of the file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from sparkmirror.config.model import FlowConfig, MirrorConfig


#: ``--flow A->B`` (repeatable), for every command that acts on some of the file's flows.
flows_option = click.option(
    "--flow", "flows", multiple=True, metavar="A->B", help="Only this flow (repeatable); default: every enabled flow."
)

#: ``--mm2-offsets-topic``: Connect's offsets topic on the target where MirrorMaker 2 keeps its positions.
mm2_offsets_topic_option = click.option(
    "--mm2-offsets-topic",
    default="",
    metavar="TOPIC",
    help="Connect's offsets topic on the target that holds MirrorMaker 2's positions (default: offset.storage.topic, "
    "else MM2's dedicated-mode mm2-offsets.<source>.internal).",
)


def chosen_flows(cfg: MirrorConfig, config: Path, names: Sequence[str]) -> list[FlowConfig]:
    """``names`` (``A->B``, spaces ignored) as flows of ``cfg``, or its enabled flows; ConfigError (exit 2)
    for a name the file has no flow for, or nothing to act on."""
    from sparkmirror.errors import ConfigError

    chosen = list(cfg.flows)
    if names:
        chosen = []
        for name in names:
            try:
                chosen.append(cfg.flow(name.replace(" ", "")))
            except KeyError:
                known = ", ".join(f.name for f in cfg.all_flows) or "none"
                raise ConfigError(f"--flow {name}: {config} names no such flow (flows: {known})") from None
    if not chosen:
        raise ConfigError(f"{config}: no enabled flow (set e.g. A->B.enabled = true, or pass --flow)")
    return chosen
