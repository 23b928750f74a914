"""The one builder of a flow's client settings: what it builds, and that it never shows a secret."""

from __future__ import annotations

from sparkmirror.config import load_config
from sparkmirror.core.naming import is_own_group, offset_map_topic, progress_group, transactional_id
from sparkmirror.kafka.flowclients import FlowClients

PROPS = """
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
B.sasl.mechanism = PLAIN
B.security.protocol = SASL_PLAINTEXT
B.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="s3cr3t-pw";
A.consumer.fetch.min.bytes = 1
"""


def _flow(tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "mm2.properties"
    path.write_text(PROPS)
    return load_config(path).flows[0]


def test_flow_clients_build_every_role_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    clients = FlowClients(_flow(tmp_path))
    assert clients.source_consumer["bootstrap.servers"] == "a:9092"
    assert clients.target_consumer["bootstrap.servers"] == "b:9092"
    assert clients.target_producer["acks"] == "all"
    assert clients.target_producer["sasl.password"] == "s3cr3t-pw"
    assert clients.spark_source_options()["kafka.bootstrap.servers"] == "a:9092"
    assert "kafka.group.id" not in clients.spark_source_options()
    assert "transactional.id" not in clients.internal_producer


def test_flow_clients_repr_shows_no_secret(tmp_path) -> None:  # type: ignore[no-untyped-def]
    clients = FlowClients(_flow(tmp_path))
    assert "s3cr3t" not in repr(clients) and "s3cr3t" not in str(clients)


def test_naming_rules() -> None:
    assert offset_map_topic("A") == "sparkmirror-offset-map.A.internal"
    assert progress_group("A", "B") == "__sparkmirror.progress.A-B"
    assert transactional_id("A", "B", "a/b c", 3) == "sparkmirror-A-B-a_b_c-3"
    assert is_own_group(progress_group("A", "B")) and is_own_group("spark-kafka-source-x")
    assert not is_own_group("orders-app")
