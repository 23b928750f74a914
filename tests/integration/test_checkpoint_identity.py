"""A checkpoint belongs to the clusters it was written for.

Pointing a flow's checkpoint at another source cluster under the same alias
would make Spark skip that many records of every partition; the run refuses.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kafka_helpers import Rec, create_topics, produce, unique, write_config
from sparkmirror.config import load_config
from sparkmirror.pipeline.driver.mirror import Mirror
from sparkmirror.pipeline.exceptions import FlowFailed


def test_checkpoint_of_another_source_cluster_is_refused(bootstraps, spark, tmp_path: Path, checkpoints) -> None:
    topic = unique("ident")
    create_topics(bootstraps["A"], {topic: 1})
    produce(bootstraps["A"], topic, 0, [Rec(b"k", b"v", (), int(time.time() * 1000))])
    extra = f"A->B.topics = {topic}\n"
    first = write_config(
        tmp_path / "a.properties", bootstraps["A"], bootstraps["B"], checkpoints=checkpoints, extra=extra
    )
    assert Mirror(load_config(first), once=True).run()[0].progress.records == 1

    # Same alias A, same checkpoint location, but another cluster behind it.
    other = unique("other")
    create_topics(bootstraps["B"], {other: 1})
    swapped = write_config(
        tmp_path / "b.properties",
        bootstraps["B"],
        bootstraps["A"],
        checkpoints=checkpoints,
        extra=f"A->B.topics = {other}\n",
    )
    with pytest.raises(FlowFailed, match="was written for source cluster id"):
        Mirror(load_config(swapped), once=True).run()
