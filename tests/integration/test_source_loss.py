"""Records deleted on the source before they were mirrored are reported, never skipped silently.

Spark's own data-loss check is off (it would also stop the flow, forever, when
a topic is deleted or newly matched); the runner compares each batch's first
offset with the previous batch's end and the source's log start offset.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from confluent_kafka import TopicPartition

from kafka_helpers import Rec, admin, create_topics, end_offsets, produce, unique, wait_for, write_config
from sparkmirror.config import load_config
from sparkmirror.pipeline.driver.mirror import Mirror


def test_records_deleted_before_mirroring_are_reported(bootstraps, spark, tmp_path: Path, checkpoints, caplog):
    topic = unique("lost")
    create_topics(bootstraps["A"], {topic: 1})
    ts = int(time.time() * 1000)
    produce(bootstraps["A"], topic, 0, [Rec(b"k", f"{i}".encode(), (), ts) for i in range(100)])
    # A long trigger interval leaves a quiet window after the first batch.
    cfg = write_config(
        tmp_path / "mm2.properties",
        bootstraps["A"],
        bootstraps["B"],
        checkpoints=checkpoints,
        extra=f"A->B.topics = {topic}\nsparkmirror.trigger.interval.ms = 20000\n",
    )
    mirror = Mirror(load_config(cfg))
    thread = threading.Thread(target=mirror.run, daemon=True)
    with caplog.at_level(logging.ERROR, logger="sparkmirror.pipeline.job"):
        thread.start()
        try:
            wait_for(
                lambda: end_offsets(bootstraps["B"], f"A.{topic}").get(0) == 100,
                timeout_s=120,
                what="the first batch",
                interval_s=0.3,
            )
            produce(bootstraps["A"], topic, 0, [Rec(b"k", f"{i}".encode(), (), ts) for i in range(100, 200)])
            client = admin(bootstraps["A"])
            for fut in client.delete_records([TopicPartition(topic, 0, 150)]).values():
                fut.result()
            wait_for(
                lambda: end_offsets(bootstraps["B"], f"A.{topic}").get(0) == 150,
                timeout_s=120,
                what="the records that survived",
            )
            runner = mirror.runners[0]
            wait_for(lambda: runner.progress.lost_on_source == 50, timeout_s=10, what="the loss to be counted")
        finally:
            mirror.request_stop()
            thread.join(120)
    assert any(f"{topic}[0] offsets 100..149 were deleted on the source" in r.getMessage() for r in caplog.records)
