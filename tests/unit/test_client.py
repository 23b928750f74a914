"""The client API's pure parts: MM2's MirrorClient semantics from topic names, the checkpoint
index's rules, policy resolution and the client's configuration (no broker, no process)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sparkmirror.client as client_module
from sparkmirror.client import MirrorClient, clear_cache, client_for
from sparkmirror.core.formats import Checkpoint
from sparkmirror.core.mirrorclient import (
    CheckpointIndex,
    TopicPartition,
    all_sources,
    checkpoint_topics_in,
    count_hops,
    heartbeat_topics_in,
    remote_topics_in,
    replication_hops_in,
    resolve_policy,
    upstream_clusters_in,
)
from sparkmirror.core.policy import DefaultReplicationPolicy, IdentityReplicationPolicy
from sparkmirror.errors import ConfigError

DEFAULT = DefaultReplicationPolicy()


# -- hops ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "alias", "hops"),
    [
        ("A.heartbeats", "A", 1),
        ("B.A.heartbeats", "A", 2),
        ("B.A.heartbeats", "B", 1),
        ("C.B.A.heartbeats", "A", 3),
        ("heartbeats", "A", -1),  # local: leads nowhere
        ("B.heartbeats", "A", -1),
        ("A.orders", "A", 1),  # count_hops itself does not care what the topic is
    ],
)
def test_count_hops_follows_the_replication_path(topic: str, alias: str, hops: int) -> None:
    assert count_hops(topic, alias, DEFAULT) == hops


def test_count_hops_never_reaches_an_alias_past_a_loop() -> None:
    # A.B.A.heartbeats passes A twice; C is not on the path, and the loop must end.
    assert count_hops("A.B.A.heartbeats", "C", DEFAULT) == -1
    assert count_hops("A.B.A.heartbeats", "B", DEFAULT) == 2


def test_count_hops_with_an_identity_policy_stops_at_its_loop() -> None:
    # The identity policy names every non-heartbeat topic's source the same alias, forever.
    policy = IdentityReplicationPolicy(source_cluster_alias="A")
    assert count_hops("orders", "A", policy) == 1
    assert count_hops("orders", "B", policy) == -1


def test_replication_hops_is_the_shortest_path_over_heartbeat_topics_only() -> None:
    topics = ["C.B.A.heartbeats", "B.A.heartbeats", "A.orders", "heartbeats", "X.checkpoints.internal"]
    assert replication_hops_in(topics, "A", DEFAULT) == 2  # A.orders is remote but not a heartbeat
    assert replication_hops_in(topics, "B", DEFAULT) == 1
    assert replication_hops_in(topics, "C", DEFAULT) == 1
    assert replication_hops_in(topics, "Z", DEFAULT) == -1
    assert replication_hops_in([], "A", DEFAULT) == -1


def test_replication_hops_with_a_custom_separator() -> None:
    policy = DefaultReplicationPolicy("_")
    assert replication_hops_in(["B_A_heartbeats", "A.heartbeats"], "A", policy) == 2


# -- topic classification ----------------------------------------------------------------------


def test_heartbeat_topics_are_heartbeats_and_its_remote_copies() -> None:
    topics = ["heartbeats", "A.heartbeats", "B.A.heartbeats", "A.orders", "myheartbeats", "A.heartbeats.x", "hb"]
    assert heartbeat_topics_in(topics, DEFAULT) == {"heartbeats", "A.heartbeats", "B.A.heartbeats"}


def test_heartbeat_topics_under_the_identity_policy_keep_the_prefix() -> None:
    policy = IdentityReplicationPolicy()
    assert heartbeat_topics_in(["A.heartbeats", "heartbeats", "orders"], policy) == {"A.heartbeats", "heartbeats"}


def test_checkpoint_topics_follow_the_internal_separator_setting() -> None:
    topics = ["A.checkpoints.internal", "B_checkpoints_internal", "A.orders", "mm2-offset-syncs.A.internal"]
    assert checkpoint_topics_in(topics, DEFAULT) == {"A.checkpoints.internal"}
    assert checkpoint_topics_in(topics, DefaultReplicationPolicy("_")) == {"B_checkpoints_internal"}
    legacy = DefaultReplicationPolicy("_", internal_topic_separator_enabled=False)
    assert checkpoint_topics_in(topics, legacy) == {"A.checkpoints.internal"}


def test_upstream_clusters_are_every_source_along_each_heartbeat_path() -> None:
    topics = ["A.heartbeats", "C.B.heartbeats", "D.orders", "heartbeats", "E.checkpoints.internal"]
    assert upstream_clusters_in(topics, DEFAULT) == {"A", "B", "C"}  # D.orders is no heartbeat
    assert upstream_clusters_in([], DEFAULT) == set()


def test_all_sources_of_a_looping_path_end() -> None:
    assert all_sources("A.B.A.heartbeats", DEFAULT) == {"A", "B"}
    assert all_sources("heartbeats", DEFAULT) == set()
    assert all_sources("orders", IdentityReplicationPolicy(source_cluster_alias="A")) == {"A"}


def test_remote_topics_leave_internal_topics_out() -> None:
    topics = ["A.orders", "B.A.orders", "orders", "A.checkpoints.internal", "A.heartbeats", "__consumer_offsets"]
    assert remote_topics_in(topics, DEFAULT) == {"A.orders", "B.A.orders", "A.heartbeats"}
    assert remote_topics_in(topics, DEFAULT, "B") == {"B.A.orders"}


# -- the policy a client uses -------------------------------------------------------------------


def test_resolve_policy_defaults_to_mm2s() -> None:
    policy, rest = resolve_policy(None)
    assert policy == DefaultReplicationPolicy()
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert rest == {}


def test_resolve_policy_reads_mirror_client_keys_and_leaves_the_rest() -> None:
    config = {
        "replication.policy.separator": "_",
        "replication.policy.internal.topic.separator.enabled": "false",
        "security.protocol": "SSL",
    }
    policy, rest = resolve_policy(config)
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.format_remote_topic("A", "t") == "A_t"
    assert rest == {"security.protocol": "SSL"}
    assert "replication.policy.separator" in config  # the caller's mapping is untouched


def test_resolve_policy_keyword_arguments_win_over_properties() -> None:
    config = {"replication.policy.separator": "_", "replication.policy.class": "identity"}
    policy, _ = resolve_policy(config, "default", "-", True)
    assert type(policy) is DefaultReplicationPolicy
    assert policy.checkpoints_topic("A") == "A-checkpoints-internal"


def test_resolve_policy_accepts_kafkas_class_names_and_instances() -> None:
    policy, _ = resolve_policy(
        {"replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"}
    )
    assert type(policy) is IdentityReplicationPolicy
    mine = DefaultReplicationPolicy("__")
    assert resolve_policy({"replication.policy.separator": "_"}, mine)[0] is mine


def test_resolve_policy_rejects_bad_values_naming_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        resolve_policy({"replication.policy.internal.topic.separator.enabled": "maybe"})
    assert err.value.key == "replication.policy.internal.topic.separator.enabled"
    with pytest.raises(ConfigError) as err:
        resolve_policy({}, "com.example.MyPolicy")
    assert err.value.key == "replication.policy.class"


# -- the checkpoint index -----------------------------------------------------------------------


def _cp(group: str, partition: int, downstream: int, topic: str = "A.orders") -> Checkpoint:
    return Checkpoint(group, topic, partition, downstream + 10, downstream)


def _feed(index: CheckpointIndex, *checkpoints: Checkpoint) -> None:
    for c in checkpoints:
        index.apply(c.key_bytes(), c.value_bytes())


def test_index_latest_record_wins_even_when_lower() -> None:
    index = CheckpointIndex()
    _feed(index, _cp("g", 0, 50), _cp("g", 0, 70), _cp("g", 0, 30))
    assert index.offsets("g") == {TopicPartition("A.orders", 0): 30}
    assert index.records_read == 3
    assert len(index) == 1


def test_index_keeps_groups_topics_and_partitions_apart() -> None:
    index = CheckpointIndex()
    _feed(index, _cp("g", 0, 1), _cp("g", 1, 2), _cp("g", 0, 3, topic="A.payments"), _cp("h", 0, 4))
    assert index.offsets("g") == {
        TopicPartition("A.orders", 0): 1,
        TopicPartition("A.orders", 1): 2,
        TopicPartition("A.payments", 0): 3,
    }
    assert index.offsets("h") == {TopicPartition("A.orders", 0): 4}
    assert index.offsets("absent") == {}
    assert index.groups() == {"g", "h"}


def test_index_tombstone_deletes_its_key_only() -> None:
    index = CheckpointIndex()
    _feed(index, _cp("g", 0, 1), _cp("g", 1, 2), _cp("h", 0, 3))
    index.apply(_cp("g", 0, 0).key_bytes(), None)
    assert index.offsets("g") == {TopicPartition("A.orders", 1): 2}
    index.apply(_cp("g", 1, 0).key_bytes(), None)
    assert index.offsets("g") == {}
    assert index.groups() == {"h"}  # a group without checkpoints is gone
    index.apply(_cp("nobody", 0, 0).key_bytes(), None)  # deleting what is absent changes nothing
    assert index.records_read == 6 and index.records_skipped == 0


def test_index_checkpoint_after_tombstone_comes_back() -> None:
    index = CheckpointIndex()
    _feed(index, _cp("g", 0, 1))
    index.apply(_cp("g", 0, 0).key_bytes(), None)
    _feed(index, _cp("g", 0, 9))
    assert index.offsets("g") == {TopicPartition("A.orders", 0): 9}


def test_index_skips_and_counts_records_that_are_not_checkpoints() -> None:
    index = CheckpointIndex()
    good = _cp("g", 0, 5)
    index.apply(b"garbage", good.value_bytes())
    index.apply(good.key_bytes(), b"\x00\x07garbage")  # unknown version
    index.apply(None, good.value_bytes())
    index.apply(b"\x00", None)  # a tombstone whose key is no checkpoint's
    _feed(index, good)
    assert index.offsets("g") == {TopicPartition("A.orders", 0): 5}
    assert (index.records_read, index.records_skipped) == (5, 4)


def test_index_checkpoints_carry_metadata_and_are_copies() -> None:
    index = CheckpointIndex()
    c = Checkpoint("g", "A.orders", 0, 100, 90, metadata="m")
    _feed(index, c)
    got = index.checkpoints("g")
    assert got == {TopicPartition("A.orders", 0): c}
    got.clear()
    index.offsets("g").clear()
    assert index.checkpoints("g") == {TopicPartition("A.orders", 0): c}


def test_index_clear_forgets_everything_but_counts_on() -> None:
    index = CheckpointIndex()
    _feed(index, _cp("g", 0, 1))
    index.clear()
    assert index.groups() == set() and index.records_read == 1


_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["g", "h"]),
        st.integers(0, 2),
        st.one_of(st.none(), st.integers(0, 1_000_000)),  # None: a tombstone
    ),
    max_size=60,
)


@given(_EVENTS)
def test_index_equals_the_last_record_per_key(events: list[tuple[str, int, int | None]]) -> None:
    index = CheckpointIndex()
    model: dict[tuple[str, int], int] = {}
    for group, partition, offset in events:
        c = _cp(group, partition, offset or 0)
        index.apply(c.key_bytes(), None if offset is None else c.value_bytes())
        if offset is None:
            model.pop((group, partition), None)
        else:
            model[(group, partition)] = offset
    for group in ("g", "h"):
        expected = {TopicPartition("A.orders", p): o for (g, p), o in model.items() if g == group}
        assert index.offsets(group) == expected
    assert index.records_read == len(events)


def test_topic_partition_is_a_hashable_tuple() -> None:
    tp = TopicPartition("A.orders", 3)
    assert tp == ("A.orders", 3) and {tp: 1}[("A.orders", 3)] == 1
    assert client_module.TopicPartition is TopicPartition


# -- the client, without a broker -------------------------------------------------------------


def test_importing_the_client_imports_no_kafka_client_or_spark() -> None:
    tree = ast.parse(Path(client_module.__file__).read_text())
    top_level = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    names = [a.name for n in top_level if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in top_level if isinstance(n, ast.ImportFrom)]
    assert not [n for n in names if n.startswith(("confluent_kafka", "pyspark"))], names


def test_client_names_its_checkpoints_topic_from_the_policy() -> None:
    mc = MirrorClient("127.0.0.1:1", config={"replication.policy.separator": "_"})
    try:
        assert mc.policy.checkpoints_topic("A") == "A_checkpoints_internal"
        assert mc._tail("A").topic == "A_checkpoints_internal"
    finally:
        mc.close()


def test_client_translates_java_style_security_keys_and_hides_them() -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="app" password="s3cret";'
    config = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": jaas,
        "consumer.fetch.max.bytes": "1048576",
        "admin.request.timeout.ms": "5000",
    }
    mc = MirrorClient("127.0.0.1:1", config=config)
    try:
        assert mc._consumer_conf["sasl.username"] == "app"
        assert mc._consumer_conf["sasl.password"] == "s3cret"
        assert mc._consumer_conf["fetch.max.bytes"] == "1048576"
        assert "request.timeout.ms" not in mc._consumer_conf
        assert mc._admin_conf["request.timeout.ms"] == "5000"
        assert mc._admin_conf["sasl.password"] == "s3cret"
        assert mc._consumer_conf["isolation.level"] == "read_committed"
        assert "s3cret" not in repr(mc) and "s3cret" not in str(mc)
    finally:
        mc.close()


def test_a_refused_configuration_names_the_key_never_the_value() -> None:
    mc = MirrorClient("127.0.0.1:1", config={"security.protocol": "s3cret-value"})
    try:
        with pytest.raises(ConfigError) as err:
            mc._admin_client()
        assert err.value.key == "security.protocol"
        assert "s3cret" not in str(err.value)
    finally:
        mc.close()
    mc = MirrorClient("127.0.0.1:1", config={"no.such.key": "s3cret-value"})
    try:
        with pytest.raises(ConfigError) as err:
            mc._tail("A")._open(timeout_s=0.1)  # the consumer refuses it before any connection
        assert err.value.key == "no.such.key" and "s3cret" not in str(err.value)
    finally:
        mc.close()


def test_unusable_jaas_config_is_refused_without_its_text() -> None:
    jaas = 'com.example.Kerberos required password="s3cret";'
    with pytest.raises(ConfigError) as err:
        MirrorClient("127.0.0.1:1", config={"sasl.jaas.config": jaas})
    assert err.value.key == "sasl.jaas.config" and "s3cret" not in str(err.value)


def test_module_functions_share_one_client_per_cluster_config_and_policy() -> None:
    clear_cache()
    try:
        a = client_for("127.0.0.1:1")
        assert client_for("127.0.0.1:1") is a
        assert client_for("127.0.0.1:1", replication_policy="default", separator=".") is a
        assert client_for("127.0.0.1:1", separator="_") is not a
        assert client_for("127.0.0.1:1", config={"client.id": "x"}) is not a
        assert client_for("127.0.0.1:2") is not a
        clear_cache()
        assert client_for("127.0.0.1:1") is not a
        with pytest.raises(client_module.ClientError, match="closed"):
            a.translate_offsets("A", "g")
    finally:
        clear_cache()


def test_a_closed_client_refuses_lookups() -> None:
    with MirrorClient("127.0.0.1:1") as mc:
        pass
    with pytest.raises(client_module.ClientError, match="closed"):
        mc.translate_offsets("A", "g")
    with pytest.raises(client_module.ClientError, match="closed"):
        mc.topics()
    mc.close()  # twice is fine
