"""Internal topics that sparkmirror reads back whole at every start are created so that the log
cleaner can keep them near their live size (kafka/internal.py, COMPACTED_READ_BACK)."""

from __future__ import annotations

from pathlib import Path

from kafka_helpers import admin, unique
from sparkmirror.checkpoints.emitter import CheckpointEmitter
from sparkmirror.config import load_config
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.offsets.store import OffsetMapStore


def _config(bootstrap: str, name: str) -> str:
    from confluent_kafka.admin import ConfigResource

    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    client = admin(bootstrap)  # held until the answer is in: a client let go of cancels its requests
    entries = client.describe_configs([res])[res].result()
    return ",".join(f"{k}={entries[k].value}" for k in ("cleanup.policy", "segment.bytes", "segment.ms"))


def test_offset_map_and_checkpoints_topics_roll_small_segments(bootstraps, tmp_path: Path) -> None:
    source = unique("Src").replace("-", "")  # a fresh alias: the flow's internal topics are new on B
    cfg = tmp_path / "mm2.properties"
    cfg.write_text(
        f"clusters = {source}, B\n{source}.bootstrap.servers = {bootstraps['A']}\n"
        f"B.bootstrap.servers = {bootstraps['B']}\n{source}->B.enabled = true\n"
        "replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "checkpoints.topic.replication.factor = 1\n"
    )
    clients = FlowClients(load_config(cfg).flows[0])
    try:
        store, emitter = OffsetMapStore(clients), CheckpointEmitter(clients, OffsetMapStore(clients))
        store.ensure_topic()
        emitter.ensure_topic()
        for topic in (store.topic, emitter.topic):
            assert source in topic
            assert _config(bootstraps["B"], topic) == "cleanup.policy=compact,segment.bytes=8388608,segment.ms=3600000"
    finally:
        clients.close()
