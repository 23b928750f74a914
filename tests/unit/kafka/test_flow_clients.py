"""The one builder of a flow's client settings: what it builds, and that it never shows a secret."""

from __future__ import annotations

import pytest

from sample_configs import SECURED_TARGET, load_props
from sparkmirror.core.naming import is_own_group, offset_map_topic, progress_group, transactional_id
from sparkmirror.errors import ConfigError
from sparkmirror.kafka.flowclients import ClusterClients, FlowClients


def _flow(tmp_path, extra: str = ""):  # type: ignore[no-untyped-def]
    return load_props(tmp_path, SECURED_TARGET + extra).flows[0]


def test_flow_clients_build_every_role_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    clients = FlowClients(_flow(tmp_path))
    assert clients.source_consumer["bootstrap.servers"] == "a:9092"
    assert clients.target_consumer["bootstrap.servers"] == "b:9092"
    assert clients.target_producer["acks"] == "all"
    assert clients.target_producer["sasl.password"] == "s3cr3t-pw"
    assert "transactional.id" not in clients.internal_producer


def test_flow_clients_repr_shows_no_secret(tmp_path) -> None:  # type: ignore[no-untyped-def]
    clients = FlowClients(_flow(tmp_path))
    assert "s3cr3t" not in repr(clients) and "s3cr3t" not in str(clients)


def test_flow_clients_build_a_setting_on_first_use_and_validate_builds_them_all(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A read-only caller (translate) builds only what it reads; the run refuses a bad setting before Spark starts.
    clients = FlowClients(_flow(tmp_path, "A.producer.acks = 1\n"))
    assert clients.target_consumer["bootstrap.servers"] == "b:9092"
    with pytest.raises(ConfigError) as refused:
        clients.validate()
    assert refused.value.key == "A.producer.acks"


def test_cluster_clients_quiet_and_repr_shows_no_secret(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cluster = _flow(tmp_path).target_cluster
    quiet = ClusterClients(cluster, quiet=True)
    assert quiet.consumer["log_level"] == quiet.admin_config["log_level"] == "3"
    assert "log_level" not in ClusterClients(cluster).consumer
    assert quiet.consumer["sasl.password"] == "s3cr3t-pw"
    assert repr(quiet) == "ClusterClients(B)" and "s3cr3t" not in str(quiet)


def test_naming_rules() -> None:
    assert offset_map_topic("A") == "sparkmirror-offset-map.A.internal"
    assert progress_group("A", "B") == "__sparkmirror.progress.A-B"
    assert transactional_id("A", "B", "a/b c", 3) == "sparkmirror-A-B-a_b_c-3"
    assert is_own_group(progress_group("A", "B")) and is_own_group("spark-kafka-source-x")
    assert not is_own_group("orders-app")
