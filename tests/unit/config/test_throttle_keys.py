"""The throttle's keys: each flow's limit (top level, per flow), and a target cluster's across its flows."""

from __future__ import annotations

import pytest

from sparkmirror.config import load_config
from sparkmirror.errors import ConfigError

BASE = """\
clusters = A, B, C
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
C.bootstrap.servers = c:9092
A->B.enabled = true
C->B.enabled = true
"""


def _flows(extra: str) -> dict[str, tuple[int | None, int | None]]:
    cfg = load_config(BASE + extra)
    return {f.name: (f.spark.throttle_bytes_per_second, f.target_throttle_bytes_per_second) for f in cfg.flows}


def test_no_limit_by_default() -> None:
    assert _flows("") == {"A->B": (None, None), "C->B": (None, None)}


def test_the_top_level_limit_is_each_flows_and_a_flow_key_overrides_it() -> None:
    flows = _flows("sparkmirror.throttle.bytes.per.second = 1000\nA->B.sparkmirror.throttle.bytes.per.second = 50\n")
    assert flows == {"A->B": (50, None), "C->B": (1000, None)}


def test_a_target_clusters_limit_reaches_every_flow_into_it() -> None:
    flows = _flows("B.sparkmirror.throttle.bytes.per.second = 7000\n")
    assert flows == {"A->B": (None, 7000), "C->B": (None, 7000)}
    assert load_config(BASE + "B.sparkmirror.throttle.bytes.per.second = 7000\n").unknown_keys == ()


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ("sparkmirror.throttle.bytes.per.second = 0\n", "sparkmirror.throttle.bytes.per.second"),
        ("A->B.sparkmirror.throttle.bytes.per.second = fast\n", "A->B.sparkmirror.throttle.bytes.per.second"),
        ("B.sparkmirror.throttle.bytes.per.second = -5\n", "B.sparkmirror.throttle.bytes.per.second"),
    ],
)
def test_a_bad_limit_names_its_key(extra: str, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(BASE + extra)
    assert err.value.key == key
    assert str(err.value).startswith(key)
