"""Where MirrorMaker 2's offsets are read from (``offset.storage.topic``), and turning adoption off."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkmirror.config import load_config
from sparkmirror.config.model import FlowConfig
from sparkmirror.core.connect_offsets import offsets_topic

BASE = """\
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
"""


def _flow(tmp_path: Path, extra: str) -> FlowConfig:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + extra)
    return load_config(path).flows[0]


@pytest.mark.parametrize(
    ("extra", "topic"),
    [
        ("", "mm2-offsets.A.internal"),
        ("offset.storage.topic = connect-offsets\n", "connect-offsets"),
        ("B.offset.storage.topic = b-offsets\n", "b-offsets"),
        # MirrorMakerConfig: the top-level key is put over the target cluster's.
        ("B.offset.storage.topic = b-offsets\noffset.storage.topic = top\n", "top"),
    ],
)
def test_the_offsets_topic_is_read_as_mm2_reads_it(tmp_path: Path, extra: str, topic: str) -> None:
    flow = _flow(tmp_path, extra)
    assert offsets_topic(flow.source, flow.mm2_offsets_topic) == topic


def test_adoption_is_on_by_default_and_can_be_turned_off(tmp_path: Path) -> None:
    assert _flow(tmp_path, "").spark.adopt_mm2 is True
    assert _flow(tmp_path, "sparkmirror.adopt.mm2 = false\n").spark.adopt_mm2 is False
