"""A failover plan's view of one cluster: checked, quiet settings that never show a secret."""

from __future__ import annotations

import pytest

from sample_configs import SECURED_TARGET, load_props
from sparkmirror.errors import ConfigError
from sparkmirror.failover.plan import Cluster


def _config(tmp_path):  # type: ignore[no-untyped-def]
    return load_props(tmp_path, SECURED_TARGET)


def test_failover_cluster_repr_shows_no_secret(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cluster = Cluster.of(_config(tmp_path), "B")
    assert cluster.consumer["sasl.password"] == "s3cr3t-pw"  # revealed into the client settings only
    assert repr(cluster) == "Cluster(B)" and "s3cr3t" not in str(cluster)
    assert cluster.consumer["log_level"] == cluster.admin_config["log_level"] == "3"


def test_failover_cluster_without_bootstrap_is_a_config_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError) as refused:
        Cluster.of(_config(tmp_path), "C")
    assert refused.value.key == "C.bootstrap.servers"
