"""A checkpoint belongs to the clusters it was written for.

Micro-batch engine: pointing a flow's Spark checkpoint at another source cluster under the same
alias would make Spark skip that many records of every partition; the run refuses. The streaming
engine keeps no local state: the same two files on one host run side by side (issue 27), and a
source rebuilt under an old alias is the re-created topics' refusal (test_kafka_faults.py).
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
    extra = f"A->B.topics = {topic}\nsparkmirror.engine = batch\n"
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
        extra=f"A->B.topics = {other}\nsparkmirror.engine = batch\n",
    )
    with pytest.raises(FlowFailed, match="was written for source cluster id"):
        Mirror(load_config(swapped), once=True).run()


def test_two_deployments_naming_their_clusters_alike_do_not_collide_on_one_host(
    bootstraps, spark, tmp_path: Path, checkpoints
) -> None:
    topic, other = unique("first"), unique("second")
    create_topics(bootstraps["A"], {topic: 1})
    create_topics(bootstraps["B"], {other: 1})
    produce(bootstraps["A"], topic, 0, [Rec(b"k", b"v", (), int(time.time() * 1000))])
    produce(bootstraps["B"], other, 0, [Rec(b"k", b"w", (), int(time.time() * 1000))])
    streaming = "sparkmirror.engine = streaming\n"
    first = write_config(
        tmp_path / "a.properties", bootstraps["A"], bootstraps["B"], checkpoints=checkpoints,
        extra=f"A->B.topics = {topic}\n{streaming}",
    )  # fmt: skip
    # Another deployment on the same host whose A and B are other clusters (here: the same two, swapped).
    second = write_config(
        tmp_path / "b.properties", bootstraps["B"], bootstraps["A"], checkpoints=checkpoints,
        extra=f"A->B.topics = {other}\n{streaming}",
    )  # fmt: skip
    assert Mirror(load_config(first), once=True).run()[0].progress.records == 1
    assert Mirror(load_config(second), once=True).run()[0].progress.records == 1
