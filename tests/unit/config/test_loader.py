"""Loading mm2.properties: MM2 semantics, precedence, errors, secrets, unknown keys."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sparkmirror.config import ClusterConfig, FlowConfig, MirrorConfig, SparkSettings, load_config
from sparkmirror.core import DefaultReplicationPolicy, IdentityReplicationPolicy
from sparkmirror.errors import ConfigError

PASSWORD = "s3cr3t-Pa55w0rd"

# The facts of Apache Kafka 4.x's config/connect-mirror-maker.properties (same keys and values).
MM2_EXAMPLE = """\
# Sample MirrorMaker 2 top-level configuration (keys and values as shipped with Kafka)
clusters = A, B

# connection information for each cluster
A.bootstrap.servers = A_host1:9092, A_host2:9092, A_host3:9092
B.bootstrap.servers = B_host1:9092, B_host2:9092, B_host3:9092

# enable and configure individual replication flows
A->B.enabled = true
A->B.topics = .*

B->A.enabled = true
B->A.topics = .*

replication.factor=1

checkpoints.topic.replication.factor=1
heartbeats.topic.replication.factor=1
offset-syncs.topic.replication.factor=1

offset.storage.replication.factor=1
status.storage.replication.factor=1
config.storage.replication.factor=1

# replication.policy.separator = _
# sync.topic.acls.enabled = false
# emit.heartbeats.interval.seconds = 5
"""

BASE = """\
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
"""


def load(text: str, **kwargs: object) -> MirrorConfig:
    return load_config(text, **kwargs)  # type: ignore[arg-type]


def error(text: str, **kwargs: object) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        load(text, **kwargs)
    assert err.value.exit_code == 2
    return err.value


# -- MM2 compatibility ----------------------------------------------------------------------------


def test_mm2_example_file_loads(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = load(MM2_EXAMPLE)
    assert config.unknown_keys == ()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [f.name for f in config.flows] == ["A->B", "B->A"]
    assert list(config.clusters) == ["A", "B"]
    assert config.clusters["A"].bootstrap_servers == "A_host1:9092, A_host2:9092, A_host3:9092"
    for flow in config.flows:
        assert flow.replication_factor == 1
        assert flow.checkpoints_topic_replication_factor == 1
        assert flow.heartbeats_topic_replication_factor == 1
        assert flow.offset_syncs_topic_replication_factor == 1
        assert flow.topics == (".*",)
        assert isinstance(flow.policy, DefaultReplicationPolicy)


def test_mm2_example_file_from_path(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(MM2_EXAMPLE, encoding="utf-8")
    assert len(load_config(path).flows) == 2
    assert len(load_config(str(path)).flows) == 2


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config("/nonexistent/mm2.properties")


def test_mapping_input() -> None:
    config = load_config({"clusters": "A,B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
                          "B->A.enabled": "TRUE"})  # fmt: skip
    assert [f.name for f in config.flows] == ["B->A"]


def test_mm2_defaults() -> None:
    flow = load(BASE).flows[0]
    assert flow.name == "A->B" and flow.source == "A" and flow.target == "B"
    assert flow.replication_factor == 2
    assert flow.refresh_topics_enabled is True
    assert flow.refresh_topics_interval_seconds == 600
    assert flow.sync_topic_configs_enabled is True
    assert flow.sync_topic_configs_interval_seconds == 600
    assert flow.emit_checkpoints_interval_seconds == 60
    assert flow.sync_group_offsets_enabled is False
    assert flow.replication_policy_separator == "."
    assert flow.errors_tolerance == "none"
    assert flow.dead_letter_topic == "sparkmirror-dlq.A"
    assert flow.topic_filter.matches("orders") and not flow.topic_filter.matches("__x")
    assert not flow.group_filter.matches("console-consumer-1")
    assert not flow.config_property_filter.should_replicate("min.insync.replicas")
    assert flow.spark == SparkSettings()
    assert flow.spark.master == "local[*]"
    assert flow.spark.source_loss == "report"
    assert flow.spark.stop_on_flow_failure is False
    assert flow.spark.commit_interval_ms is None and flow.commit_interval_ms == 1000  # at least once
    assert flow.spark.batch_max_records == 2_000_000
    assert flow.spark.progress_interval_seconds == 10


def test_flow_enabled_only_when_true() -> None:
    config = load(BASE + "B->A.topics = x\nA->B.topics = y\n")
    assert [f.name for f in config.flows] == ["A->B"]
    assert [f.name for f in config.all_flows] == ["A->B", "B->A"]
    assert config.flow("B->A").enabled is False
    assert load(BASE.replace("A->B.enabled = true", "A->B.enabled = false")).flows == ()


def test_top_level_enabled_does_not_enable_flows() -> None:
    assert load(BASE.replace("A->B.enabled = true", "A->B.topics = x") + "enabled = true\n").flows == ()


def test_flows_in_file_order() -> None:
    text = "clusters = A, B, C\nA.bootstrap.servers=a:1\nB.bootstrap.servers=b:1\nC.bootstrap.servers=c:1\n"
    text += "C->A.enabled=true\nA->B.enabled=true\nB->C.enabled=true\n"
    assert [f.name for f in load(text).flows] == ["C->A", "A->B", "B->C"]


# -- flow overrides -------------------------------------------------------------------------------


def test_flow_keys_override_global_ones() -> None:
    text = (
        BASE
        + """\
B->A.enabled = true
topics = orders.*
topics.exclude = .*-test
groups = app.*
replication.factor = 3
replication.policy.separator = _
A->B.topics = payments
A->B.replication.factor = -1
A->B.groups.exclude = app-test
A->B.replication.policy.class = identity
A->B.errors.tolerance = ALL
A->B.errors.deadletterqueue.topic.name = dlq
"""
    )
    config = load(text)
    ab, ba = config.flow("A->B"), config.flow("B->A")
    assert ab.topics == ("payments",) and ba.topics == ("orders.*",)
    assert ab.topics_exclude == ba.topics_exclude == (".*-test",)
    assert ab.groups == ba.groups == ("app.*",)
    assert ab.groups_exclude == ("app-test",)
    assert ab.replication_factor == -1 and ba.replication_factor == 3
    assert isinstance(ab.policy, IdentityReplicationPolicy)
    assert type(ba.policy) is DefaultReplicationPolicy
    assert ba.policy.format_remote_topic("B", "t") == "B_t"
    assert ab.errors_tolerance == "all" and ab.dead_letter_topic == "dlq"
    assert ba.errors_tolerance == "none" and ba.dead_letter_topic == "sparkmirror-dlq.B"
    assert ab.policy is ab.policy  # cached


def test_empty_topics_list_selects_nothing() -> None:
    flow = load(BASE + "A->B.topics =\n").flows[0]
    assert flow.topics == ()
    assert not flow.topic_filter.matches("orders")


def test_spark_settings_global_and_per_flow() -> None:
    text = (
        BASE
        + """\
B->A.enabled = true
sparkmirror.spark.master = spark://m:7077
sparkmirror.spark.conf.spark.executor.memory = 1g
sparkmirror.spark.conf.spark.sql.shuffle.partitions = 4
sparkmirror.commit.interval.ms = 500
A->B.sparkmirror.commit.interval.ms = 50
A->B.sparkmirror.batch.max.records = 1000
A->B.sparkmirror.spark.conf.spark.executor.memory = 2g
"""
    )
    config = load(text)
    ab, ba = config.flow("A->B"), config.flow("B->A")
    assert config.spark.master == "spark://m:7077" and config.spark.commit_interval_ms == 500
    assert ab.spark.master == "spark://m:7077"
    assert ab.spark.commit_interval_ms == 50 and ba.spark.commit_interval_ms == 500
    assert ab.commit_interval_ms == 50 and ba.commit_interval_ms == 500
    assert ab.spark.batch_max_records == 1000 and ba.spark.batch_max_records == 2_000_000
    assert ab.spark.spark_conf() == {"spark.executor.memory": "2g", "spark.sql.shuffle.partitions": "4"}
    assert ba.spark.spark_conf()["spark.executor.memory"] == "1g"


# -- --clusters -----------------------------------------------------------------------------------


def test_clusters_option_keeps_flows_by_target() -> None:
    text = "clusters = A, B, C\nA.bootstrap.servers=a:1\nB.bootstrap.servers=b:1\n"
    text += "A->B.enabled=true\nB->A.enabled=true\nA->C.enabled=true\n"
    # C has no bootstrap servers, but no kept flow uses it.
    config = load(text, clusters=["B"])
    assert [f.name for f in config.flows] == ["A->B"]
    assert [f.name for f in load(text.replace("A->C.enabled=true", ""), clusters=["A", "B"]).flows] == [
        "A->B",
        "B->A",
    ]
    assert error(text).key == "C.bootstrap.servers"


def test_clusters_option_unknown_alias() -> None:
    err = error(BASE, clusters=["Z"])
    assert err.key == "clusters"
    assert "'Z'" in str(err) and "A, B" in str(err)


# -- client property precedence -------------------------------------------------------------------


def _props(text: str) -> FlowConfig:
    return load(BASE + text).flows[0]


def test_top_level_client_keys_are_defaults() -> None:
    flow = _props("security.protocol = SSL\n")
    for props in (flow.source_consumer_props(), flow.source_admin_props(), flow.target_producer_props(),
                  flow.target_admin_props(), flow.target_consumer_props()):  # fmt: skip
        assert props["security.protocol"] == "SSL"
    assert flow.source_consumer_props()["bootstrap.servers"] == "a:9092"
    assert flow.target_producer_props()["bootstrap.servers"] == "b:9092"


def test_top_level_role_prefix_beats_top_level_client_key() -> None:
    flow = _props("security.protocol = SSL\nconsumer.security.protocol = SASL_SSL\nproducer.linger.ms = 5\n")
    assert flow.source_consumer_props()["security.protocol"] == "SASL_SSL"
    assert flow.target_consumer_props()["security.protocol"] == "SASL_SSL"
    assert flow.source_admin_props()["security.protocol"] == "SSL"
    assert flow.target_producer_props()["linger.ms"] == "5"
    assert "linger.ms" not in flow.source_consumer_props()


def test_cluster_client_key_beats_top_level_role_prefix() -> None:
    flow = _props("consumer.security.protocol = SASL_SSL\nA.security.protocol = SSL\n")
    assert flow.source_consumer_props()["security.protocol"] == "SSL"
    assert flow.target_consumer_props()["security.protocol"] == "SASL_SSL"  # B is not A


def test_cluster_role_prefix_beats_cluster_client_key() -> None:
    flow = _props(
        "A.security.protocol = SSL\nA.consumer.security.protocol = PLAINTEXT\n"
        "A.consumer.fetch.max.bytes = 10\nB.producer.acks = all\nB.admin.retries = 3\n"
    )
    assert flow.source_consumer_props()["security.protocol"] == "PLAINTEXT"
    assert flow.source_consumer_props()["fetch.max.bytes"] == "10"
    assert flow.source_admin_props()["security.protocol"] == "SSL"
    assert flow.target_producer_props()["acks"] == "all"
    assert flow.target_admin_props()["retries"] == "3"
    assert "retries" not in flow.source_admin_props()


def test_cluster_bootstrap_beats_top_level() -> None:
    config = load_config({"clusters": "A,B", "bootstrap.servers": "shared:1", "A.bootstrap.servers": "a:1",
                          "A->B.enabled": "true"})  # fmt: skip
    assert config.clusters["A"].bootstrap_servers == "a:1"
    assert config.clusters["B"].bootstrap_servers == "shared:1"


def test_flow_level_prefixes_beat_cluster_level() -> None:
    flow = _props("""\
A.consumer.max.poll.records = 10
A.admin.request.timeout.ms = 1
B.producer.linger.ms = 1
B.consumer.fetch.min.bytes = 1
A->B.source.cluster.security.protocol = SSL
A->B.target.cluster.security.protocol = SASL_SSL
A->B.consumer.max.poll.records = 20
A->B.producer.linger.ms = 2
A->B.admin.request.timeout.ms = 2
A->B.target.consumer.fetch.min.bytes = 2
""")
    sc = flow.source_consumer_props()
    assert sc["max.poll.records"] == "20" and sc["security.protocol"] == "SSL"
    assert flow.target_producer_props()["linger.ms"] == "2"
    assert flow.target_producer_props()["security.protocol"] == "SASL_SSL"
    assert flow.source_admin_props()["request.timeout.ms"] == "2"
    assert flow.target_admin_props()["request.timeout.ms"] == "2"
    assert flow.target_consumer_props()["fetch.min.bytes"] == "2"
    assert "max.poll.records" not in flow.target_consumer_props()


def test_flow_side_role_prefix_beats_flow_role_prefix() -> None:
    flow = _props("""\
A->B.consumer.max.poll.records = 20
A->B.source.consumer.max.poll.records = 30
A->B.producer.acks = 1
A->B.target.producer.acks = all
A->B.admin.retries = 1
A->B.source.admin.retries = 2
A->B.target.admin.retries = 3
A->B.source.cluster.security.protocol = SSL
A->B.consumer.security.protocol = SASL_SSL
""")
    assert flow.source_consumer_props()["max.poll.records"] == "30"
    assert flow.source_consumer_props()["security.protocol"] == "SASL_SSL"
    assert flow.target_producer_props()["acks"] == "all"
    assert flow.source_admin_props()["retries"] == "2"
    assert flow.target_admin_props()["retries"] == "3"


def test_flow_level_client_keys_do_not_leak_to_other_flows() -> None:
    config = load(BASE + "B->A.enabled = true\nA->B.consumer.max.poll.records = 7\n")
    assert "max.poll.records" not in config.flow("B->A").source_consumer_props()


def test_mm2_connector_keys_are_not_client_properties() -> None:
    config = load(BASE + "consumer.poll.timeout.ms = 500\nadmin.timeout.ms = 1000\n")
    flow = config.flows[0]
    assert "poll.timeout.ms" not in flow.source_consumer_props()
    assert "timeout.ms" not in flow.source_admin_props()
    assert config.unknown_keys == ()


# -- errors ---------------------------------------------------------------------------------------


def test_wrong_integer() -> None:
    err = error(BASE + "replication.factor = abc\n")
    assert err.key == "replication.factor"
    assert str(err) == "replication.factor: expected an integer, got 'abc'"


def test_wrong_integer_flow_level() -> None:
    err = error(BASE + "A->B.refresh.topics.interval.seconds = soon\n")
    assert err.key == "A->B.refresh.topics.interval.seconds"
    assert "expected an integer, got 'soon'" in str(err)


def test_wrong_boolean() -> None:
    err = error(BASE + "sync.topic.configs.enabled = yes\n")
    assert err.key == "sync.topic.configs.enabled"
    assert "expected a boolean (true or false), got 'yes'" in str(err)


@pytest.mark.parametrize("value", ["0", "-2"])
def test_replication_factor_range(value: str) -> None:
    err = error(BASE + f"A->B.replication.factor = {value}\n")
    assert err.key == "A->B.replication.factor"
    assert "positive integer or -1" in str(err)


def test_interval_range() -> None:
    err = error(BASE + "refresh.topics.interval.seconds = 0\n")
    assert err.key == "refresh.topics.interval.seconds"
    assert "greater than or equal to 1" in str(err)


def test_bad_errors_tolerance() -> None:
    err = error(BASE + "errors.tolerance = some\n")
    assert err.key == "errors.tolerance"
    assert "expected one of none, all, got 'some'" in str(err)


def test_bad_regex_names_key() -> None:
    err = error(BASE + "A->B.topics = orders, (unclosed\n")
    assert err.key == "A->B.topics"
    assert "(unclosed" in str(err)
    err = error(BASE + "groups.exclude = [x\n")
    assert err.key == "groups.exclude"


def test_empty_separator() -> None:
    err = error(BASE + "A->B.replication.policy.separator =\n")
    assert err.key == "A->B.replication.policy.separator"


def test_bad_policy_class_flow_level() -> None:
    assert error(BASE + "A->B.replication.policy.class = x.Y\n").key == "A->B.replication.policy.class"


def test_bad_policy_class() -> None:
    err = error(BASE + "replication.policy.class = com.example.Custom\n")
    assert err.key == "replication.policy.class"
    assert "com.example.Custom" in str(err) and "IdentityReplicationPolicy" in str(err)


def test_flow_with_unknown_alias() -> None:
    err = error(BASE + "A->C.enabled = true\n")
    assert err.key == "A->C.enabled"
    assert "'C'" in str(err) and "known aliases: A, B" in str(err)
    assert error(BASE + "X->B.topics = t\n").key == "X->B.topics"


def test_flow_to_itself() -> None:
    assert error(BASE + "A->A.enabled = true\n").key == "A->A.enabled"


def test_missing_bootstrap_servers() -> None:
    err = error("clusters = A, B\nA.bootstrap.servers = a:1\nA->B.enabled = true\n")
    assert err.key == "B.bootstrap.servers"
    assert "A->B" in str(err) and "host:port" in str(err)


def test_missing_bootstrap_ok_for_disabled_flow() -> None:
    config = load("clusters = A, B\nA.bootstrap.servers = a:1\nA->B.enabled = false\n")
    assert config.flows == () and config.clusters["B"].bootstrap_servers == ""


def test_missing_clusters() -> None:
    err = error("A.bootstrap.servers = a:1\n")
    assert err.key == "clusters" and "required" in str(err)
    assert error("clusters =\n").key == "clusters"
    assert error("clusters = A.B\n").key == "clusters"


@pytest.mark.parametrize(
    "line",
    [
        "sparkmirror.spark.mastr = local",
        "A->B.sparkmirror.commit.interval = 5",
        "sparkmirror.spark.conf. = x",
    ],
)
def test_unknown_sparkmirror_key_is_an_error(line: str) -> None:
    err = error(BASE + line + "\n")
    assert err.key == line.split(" = ")[0]
    assert "unknown sparkmirror key" in str(err) and "sparkmirror.spark.master" in str(err)


def test_sparkmirror_value_errors() -> None:
    assert error(BASE + "sparkmirror.batch.max.records = lots\n").key == "sparkmirror.batch.max.records"
    err = error(BASE + "A->B.sparkmirror.batch.max.records = 0\n")
    assert err.key == "A->B.sparkmirror.batch.max.records"
    assert "greater than or equal to 1" in str(err)


def test_error_is_picklable() -> None:
    import pickle

    err = error(BASE + "replication.factor = abc\n")
    copy = pickle.loads(pickle.dumps(err))
    assert copy.key == "replication.factor" and str(copy) == str(err)


# -- unknown keys ---------------------------------------------------------------------------------


def test_unknown_keys_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    text = (
        BASE
        + """\
topics.blacklist = foo
A.topicz = x
A->B.tpoics = y
C.bootstrap.servers = c:1
emit.checkpoints.interval.seconds = 5
A->B.sync.group.offsets.enabled = true
A.offset.storage.replication.factor = 1
A.consumer.whatever.client.key = 1
tasks.max = 4
exactly.once.source.support = enabled
A->B.source.cluster.alias = A
"""
    )
    with caplog.at_level(logging.WARNING, logger="sparkmirror.config"):
        config = load(text)
    assert config.unknown_keys == ("topics.blacklist", "A.topicz", "A->B.tpoics", "C.bootstrap.servers")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    for key in config.unknown_keys:
        assert key in message
    assert config.flows[0].sync_group_offsets_enabled is True
    assert config.flows[0].emit_checkpoints_interval_seconds == 5


# -- secrets --------------------------------------------------------------------------------------

SECRET_TEXT = (
    BASE
    + f"""\
sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \\
    username="u" password="{PASSWORD}";
A.ssl.key.password = {PASSWORD}
A.ssl.keystore.key = {PASSWORD}
A.ssl.key.pem = -----BEGIN PRIVATE KEY-----{PASSWORD}
A.sasl.oauthbearer.config = scope=x principal=y secret={PASSWORD}
B.producer.ssl.truststore.password = {PASSWORD}
A->B.consumer.sasl.oauthbearer.client.credentials.client.secret = {PASSWORD}
A->B.target.admin.basic.auth.user.info = u:{PASSWORD}
sparkmirror.spark.conf.spark.authenticate.secret = {PASSWORD}
"""
)


def test_secrets_never_in_repr_or_str() -> None:
    config = load(SECRET_TEXT)
    flow = config.flows[0]
    texts = [repr(config), str(config), repr(flow), str(flow), repr(flow.source_cluster)]
    texts += [str(flow.target_cluster), repr(flow.spark), str(config.clusters), flow.model_dump_json()]
    for text in texts:
        assert PASSWORD not in text
    all_props = [flow.source_consumer_props(), flow.source_admin_props(), flow.target_producer_props()]
    all_props += [flow.target_admin_props(), flow.target_consumer_props(), flow.spark.spark_conf()]
    for props in all_props:
        assert PASSWORD not in str(props)
    assert flow.source_consumer_props()["ssl.key.password"] == "[hidden]"
    assert flow.source_consumer_props()["sasl.oauthbearer.client.credentials.client.secret"] == "[hidden]"
    assert flow.target_admin_props()["basic.auth.user.info"] == "[hidden]"


def test_secrets_revealed_on_request() -> None:
    flow = load(SECRET_TEXT).flows[0]
    assert flow.source_consumer_props(reveal_secrets=True)["ssl.key.password"] == PASSWORD
    assert flow.source_consumer_props(reveal_secrets=True)["ssl.keystore.key"] == PASSWORD
    assert PASSWORD in flow.source_consumer_props(reveal_secrets=True)["sasl.jaas.config"]
    assert flow.target_producer_props(reveal_secrets=True)["ssl.truststore.password"] == PASSWORD
    assert flow.spark.spark_conf(reveal_secrets=True)["spark.authenticate.secret"] == PASSWORD
    assert flow.source_consumer_props(reveal_secrets=True)["bootstrap.servers"] == "a:9092"


def test_secrets_not_in_error_messages() -> None:
    err = error(SECRET_TEXT + "replication.factor = nope\n")
    assert PASSWORD not in str(err) and PASSWORD not in repr(err)
    err = error(SECRET_TEXT + "A->B.replication.factor = 0\n")
    assert PASSWORD not in str(err)


def test_secrets_not_in_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        load(SECRET_TEXT + f"A.sasl_password = {PASSWORD}\n")
    assert PASSWORD not in caplog.text
    assert "A.sasl_password" in caplog.text


def test_secret_passed_directly_to_model_is_protected() -> None:
    cluster = ClusterConfig(alias="A", bootstrap_servers="a:1", consumer_props={"sasl.jaas.config": PASSWORD})
    assert PASSWORD not in repr(cluster) and PASSWORD not in str(cluster)


def test_models_are_frozen() -> None:
    from pydantic import ValidationError

    flow = load(BASE).flows[0]
    with pytest.raises(ValidationError):
        flow.replication_factor = 5  # type: ignore[misc]


def test_flow_config_pickles_with_secrets_intact() -> None:
    import pickle

    flow = load(SECRET_TEXT).flows[0]
    _ = flow.policy, flow.topic_filter  # cached values travel too
    copy = pickle.loads(pickle.dumps(flow))
    assert copy == flow
    assert copy.source_consumer_props(reveal_secrets=True)["ssl.key.password"] == PASSWORD
    assert copy.topic_filter.matches("orders")
