"""Replication policies: remote names, cycles, internal topics, heartbeats (MM2 semantics)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sparkmirror.core import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    TopicFilter,
    is_cycle,
    policy_from_name,
    should_replicate_topic,
)
from sparkmirror.errors import ConfigError

_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=20)


def test_default_policy_remote_names() -> None:
    policy = DefaultReplicationPolicy()
    assert policy.format_remote_topic("A", "orders") == "A.orders"
    assert policy.topic_source("A.orders") == "A"
    assert policy.upstream_topic("A.orders") == "orders"
    assert policy.topic_source("orders") is None
    assert policy.upstream_topic("orders") is None
    assert policy.original_topic("B.A.orders") == "orders"
    assert policy.upstream_topic("B.A.orders") == "A.orders"
    assert policy.original_topic("orders") == "orders"


def test_default_policy_trailing_separator_is_not_remote() -> None:
    # Java's String.split drops trailing empty strings.
    policy = DefaultReplicationPolicy()
    assert policy.topic_source("A.") is None
    assert policy.topic_source("A..") is None
    assert policy.topic_source("") is None
    assert policy.topic_source("a..b") == "a"


def test_custom_separator() -> None:
    policy = DefaultReplicationPolicy("__")
    assert policy.format_remote_topic("us-west", "a.b") == "us-west__a.b"
    assert policy.topic_source("us-west__a.b") == "us-west"
    assert policy.upstream_topic("us-west__a.b") == "a.b"
    assert policy.topic_source("a.b") is None
    assert policy.checkpoints_topic("A") == "A__checkpoints__internal"
    assert policy.offset_syncs_topic("A") == "mm2-offset-syncs__A__internal"
    assert policy.is_checkpoints_topic("A__checkpoints__internal")
    assert policy.is_internal_topic("mm2-offset-syncs__A__internal")


def test_internal_topic_separator_disabled_keeps_dots() -> None:
    policy = DefaultReplicationPolicy("_", internal_topic_separator_enabled=False)
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.offset_syncs_topic("A") == "mm2-offset-syncs.A.internal"
    assert policy.format_remote_topic("A", "t") == "A_t"


def test_empty_separator_rejected() -> None:
    with pytest.raises(ConfigError) as err:
        DefaultReplicationPolicy("")
    assert err.value.key == "replication.policy.separator"


@given(alias=_NAME, topic=_NAME)
def test_default_policy_round_trip(alias: str, topic: str) -> None:
    policy = DefaultReplicationPolicy()
    remote = policy.format_remote_topic(alias, topic)
    assert policy.topic_source(remote) == alias
    assert policy.upstream_topic(remote) == topic
    assert policy.original_topic(remote) == topic


@given(aliases=st.lists(_NAME, min_size=1, max_size=4), topic=_NAME, sep=st.sampled_from([".", "_", "__", "-"]))
def test_default_policy_multi_hop_round_trip(aliases: list[str], topic: str, sep: str) -> None:
    # Names that contain separator characters are ambiguous in MM2 too ("_" + "__" + "0").
    assume(not any(c in name for c in sep for name in [*aliases, topic]))
    policy = DefaultReplicationPolicy(sep)
    name = topic
    for alias in aliases:
        name = policy.format_remote_topic(alias, name)
    assert policy.original_topic(name) == topic
    assert policy.topic_source(name) == aliases[-1]


def test_identity_policy_keeps_names() -> None:
    policy = IdentityReplicationPolicy()
    assert policy.format_remote_topic("A", "orders") == "orders"
    assert policy.topic_source("orders") is None
    assert policy.upstream_topic("orders") == "orders"
    assert policy.original_topic("orders") == "orders"


def test_identity_policy_heartbeats_like_default() -> None:
    policy = IdentityReplicationPolicy()
    assert policy.format_remote_topic("A", "heartbeats") == "A.heartbeats"
    assert policy.topic_source("A.heartbeats") == "A"
    assert policy.upstream_topic("A.heartbeats") == "heartbeats"
    assert policy.is_heartbeats_topic("B.A.heartbeats")
    assert policy.original_topic("B.A.heartbeats") == "heartbeats"


def test_identity_policy_with_source_alias() -> None:
    policy = IdentityReplicationPolicy(source_cluster_alias="A")
    assert policy.topic_source("orders") == "A"
    assert is_cycle(policy, "orders", "A")
    assert not is_cycle(policy, "orders", "B")


@pytest.mark.parametrize(
    "topic",
    [
        "__consumer_offsets",
        "__transaction_state",
        ".hidden",
        "connect-offsets-internal",
        "something.internal",
        "A.checkpoints.internal",
        "mm2-offset-syncs.B.internal",
        "mm2-offsets.A.internal",
        "mm2-configs.A.internal",
        "mm2-status.A.internal",
    ],
)
def test_internal_topics(topic: str) -> None:
    assert DefaultReplicationPolicy().is_internal_topic(topic)
    assert IdentityReplicationPolicy().is_internal_topic(topic)


@pytest.mark.parametrize("topic", ["orders", "A.orders", "heartbeats", "A.heartbeats", "internal", "x_internal"])
def test_not_internal_topics(topic: str) -> None:
    assert not DefaultReplicationPolicy().is_internal_topic(topic)


def test_mm2_topic_names() -> None:
    policy = DefaultReplicationPolicy()
    assert policy.heartbeats_topic() == "heartbeats"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert policy.is_checkpoints_topic("A.checkpoints.internal")
    assert not policy.is_checkpoints_topic("A.checkpoints")
    assert policy.is_heartbeats_topic("heartbeats")
    assert policy.is_heartbeats_topic("A.heartbeats")
    assert policy.is_heartbeats_topic("B.A.heartbeats")
    assert not policy.is_heartbeats_topic("my-heartbeats")


def test_cycle_a_b_pair() -> None:
    policy = DefaultReplicationPolicy()
    # On B, topic A.orders came from A: mirroring B->A would send it home.
    assert is_cycle(policy, "A.orders", "A")
    assert not is_cycle(policy, "orders", "A")
    assert not is_cycle(policy, "B.orders", "A")


def test_cycle_chain_a_b_c() -> None:
    policy = DefaultReplicationPolicy()
    # On C, "B.A.orders" is A's orders via B; C->A and C->B would both close a loop.
    assert is_cycle(policy, "B.A.orders", "A")
    assert is_cycle(policy, "B.A.orders", "B")
    assert not is_cycle(policy, "B.A.orders", "D")


def test_identity_policy_never_detects_cycles() -> None:
    assert not is_cycle(IdentityReplicationPolicy(), "orders", "A")


def test_should_replicate_topic_rules() -> None:
    policy = DefaultReplicationPolicy()
    everything = TopicFilter()
    kwargs = {"source_alias": "B", "target_alias": "A", "policy": policy, "topic_filter": everything}
    assert should_replicate_topic("orders", **kwargs)  # type: ignore[arg-type]
    assert not should_replicate_topic("A.orders", **kwargs)  # type: ignore[arg-type]
    assert not should_replicate_topic("__consumer_offsets", **kwargs)  # type: ignore[arg-type]
    assert not should_replicate_topic("B.checkpoints.internal", **kwargs)  # type: ignore[arg-type]


def test_heartbeats_replicated_even_when_filter_excludes_them() -> None:
    policy = DefaultReplicationPolicy()
    narrow = TopicFilter(["orders"], [])
    common = {"source_alias": "A", "target_alias": "B", "policy": policy, "topic_filter": narrow}
    assert should_replicate_topic("heartbeats", **common)  # type: ignore[arg-type]
    assert should_replicate_topic("C.heartbeats", **common)  # type: ignore[arg-type]
    assert not should_replicate_topic("payments", **common)  # type: ignore[arg-type]
    assert not should_replicate_topic(
        "heartbeats",
        heartbeats_replication_enabled=False,
        **common,  # type: ignore[arg-type]
    )
    # ...but never back to where they came from.
    assert not should_replicate_topic("B.heartbeats", **common)  # type: ignore[arg-type]


def test_should_replicate_rejects_same_cluster() -> None:
    with pytest.raises(ValueError):
        should_replicate_topic(
            "t",
            source_alias="A",
            target_alias="A",
            policy=DefaultReplicationPolicy(),
            topic_filter=TopicFilter(),
        )


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("org.apache.kafka.connect.mirror.DefaultReplicationPolicy", DefaultReplicationPolicy),
        ("org.apache.kafka.connect.mirror.IdentityReplicationPolicy", IdentityReplicationPolicy),
        ("DefaultReplicationPolicy", DefaultReplicationPolicy),
        ("IdentityReplicationPolicy", IdentityReplicationPolicy),
        ("default", DefaultReplicationPolicy),
        ("IDENTITY", IdentityReplicationPolicy),
        (" Default ", DefaultReplicationPolicy),
    ],
)
def test_policy_from_name(name: str, cls: type) -> None:
    policy = policy_from_name(name, "_")
    assert type(policy) is cls
    assert isinstance(policy, DefaultReplicationPolicy) and policy.separator == "_"


def test_policy_from_name_rejects_unknown() -> None:
    with pytest.raises(ConfigError) as err:
        policy_from_name("com.example.MyPolicy", ".")
    assert err.value.key == "replication.policy.class"
    assert "com.example.MyPolicy" in str(err.value)
    assert "IdentityReplicationPolicy" in str(err.value) and "default" in str(err.value)
    assert err.value.exit_code == 2


def test_core_imports_no_spark_and_no_kafka_client() -> None:
    import ast
    from pathlib import Path

    import sparkmirror.core

    forbidden = {"pyspark", "confluent_kafka", "kafka", "py4j"}
    for path in Path(sparkmirror.core.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not {n.split(".")[0] for n in names} & forbidden, (path.name, names)
