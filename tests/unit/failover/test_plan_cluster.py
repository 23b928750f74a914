"""A failover plan's view of one cluster: checked, quiet settings that never show a secret."""

from __future__ import annotations

import pytest

from sparkmirror.config import load_config
from sparkmirror.errors import ConfigError
from sparkmirror.failover.plan import Cluster

PROPS = """
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
B.sasl.mechanism = PLAIN
B.security.protocol = SASL_PLAINTEXT
B.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="s3cr3t-pw";
"""


def _config(tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "mm2.properties"
    path.write_text(PROPS)
    return load_config(path)


def test_failover_cluster_repr_shows_no_secret(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cluster = Cluster.of(_config(tmp_path), "B")
    assert cluster.consumer["sasl.password"] == "s3cr3t-pw"  # revealed into the client settings only
    assert repr(cluster) == "Cluster(B)" and "s3cr3t" not in str(cluster)
    assert cluster.consumer["log_level"] == cluster.admin_config["log_level"] == "3"


def test_failover_cluster_without_bootstrap_is_a_config_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError) as refused:
        Cluster.of(_config(tmp_path), "C")
    assert refused.value.key == "C.bootstrap.servers"
