"""Two deployments on one host whose files name their clusters alike do not collide (issue 27).

sparkmirror keeps no local state: where each flow stands is on its target. Under the retired
micro-batch engine Spark's checkpoint sat in a directory keyed by the aliases, and the second
deployment refused to start ("the checkpoint ... was written for source cluster id ...") although
it had nothing to do with the first. A source rebuilt under an old alias is the re-created topics'
refusal (test_kafka_faults.py).
"""

from __future__ import annotations

import time
from pathlib import Path

from kafka_helpers import Rec, create_topics, produce, unique, write_config
from sparkmirror.config import load_config
from sparkmirror.pipeline.driver.mirror import Mirror


def test_two_deployments_naming_their_clusters_alike_do_not_collide_on_one_host(
    bootstraps, spark, tmp_path: Path
) -> None:
    topic, other = unique("first"), unique("second")
    create_topics(bootstraps["A"], {topic: 1})
    create_topics(bootstraps["B"], {other: 1})
    produce(bootstraps["A"], topic, 0, [Rec(b"k", b"v", (), int(time.time() * 1000))])
    produce(bootstraps["B"], other, 0, [Rec(b"k", b"w", (), int(time.time() * 1000))])
    first = write_config(tmp_path / "a.properties", bootstraps["A"], bootstraps["B"], extra=f"A->B.topics = {topic}\n")
    # Another deployment on the same host whose A and B are other clusters (here: the same two, swapped).
    second = write_config(tmp_path / "b.properties", bootstraps["B"], bootstraps["A"], extra=f"A->B.topics = {other}\n")
    assert Mirror(load_config(first), once=True).run()[0].progress.records == 1
    assert Mirror(load_config(second), once=True).run()[0].progress.records == 1
