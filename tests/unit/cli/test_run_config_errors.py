"""`sparkmirror run` with a bad configuration: message names the key, exit code 2.

Runs the CLI in-process (click's runner); the configuration is rejected
before any cluster or Spark is contacted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sparkmirror.cli.main import cli

GOOD = """\
clusters = A, B
A.bootstrap.servers = 127.0.0.1:1
B.bootstrap.servers = 127.0.0.1:2
A->B.enabled = true
"""

PASSWORD = "s3cr3t-Pa55word"


def _run(tmp_path: Path, text: str, *args: str):
    cfg = tmp_path / "mm2.properties"
    cfg.write_text(text)
    return CliRunner().invoke(cli, ["run", str(cfg), *args], catch_exceptions=False)


@pytest.mark.parametrize(
    ("extra", "key", "expected"),
    [
        ("replication.factor = abc\n", "replication.factor", "integer"),
        ("refresh.topics.enabled = maybe\n", "refresh.topics.enabled", "bool"),
        ("A->B.topics = orders, [unclosed\n", "topics", "regex"),
        ("topics.exclude = (a\n", "topics.exclude", "regex"),
        ("A->C.enabled = true\n", "A->C", "A, B"),
        ("replication.policy.class = com.example.NoSuchPolicy\n", "replication.policy.class", "Default"),
        ("sparkmirror.commit.interval.ms = soon\n", "sparkmirror.commit.interval.ms", "integer"),
        ("sparkmirror.no.such.key = 1\n", "sparkmirror.no.such.key", ""),
    ],
)
def test_bad_value_names_the_key_and_exits_2(tmp_path: Path, extra: str, key: str, expected: str) -> None:
    result = _run(tmp_path, GOOD + extra)
    assert result.exit_code == 2, result.output
    assert key in result.output
    assert expected.lower() in result.output.lower()


def test_missing_bootstrap_servers_is_named(tmp_path: Path) -> None:
    result = _run(tmp_path, GOOD.replace("B.bootstrap.servers = 127.0.0.1:2\n", ""))
    assert result.exit_code == 2
    assert "B.bootstrap.servers" in result.output


def test_missing_clusters_key_is_named(tmp_path: Path) -> None:
    result = _run(tmp_path, GOOD.replace("clusters = A, B\n", ""))
    assert result.exit_code == 2
    assert "clusters" in result.output


def test_errors_never_show_passwords(tmp_path: Path) -> None:
    text = GOOD + (
        "A.security.protocol = SASL_SSL\n"
        "A.sasl.mechanism = PLAIN\n"
        f"A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="u" password="{PASSWORD}";\n'
        f"B.ssl.keystore.password = {PASSWORD}\n"
        "replication.factor = abc\n"
    )
    result = _run(tmp_path, text)
    assert result.exit_code == 2
    assert PASSWORD not in result.output


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["run", str(tmp_path / "nope.properties")])
    assert result.exit_code == 2
    assert "nope.properties" in result.output


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ("B.producer.no.such.property = 1\n", "B.producer.no.such.property"),
        ("B.producer.acks = 1\n", "B.producer.acks"),
        ("B.producer.enable.idempotence = false\n", "B.producer.enable.idempotence"),
        (
            "B.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n",
            "sasl.jaas.config",
        ),
        ("B.ssl.truststore.location = /etc/ssl/truststore.jks\n", "ssl.truststore.location"),
    ],
)
def test_client_settings_the_writer_cannot_use_exit_2_before_spark(tmp_path: Path, extra: str, key: str) -> None:
    result = _run(tmp_path, GOOD + extra)
    assert result.exit_code == 2, result.output
    assert key in result.output


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("topic.filter.class = com.example.MyTopicFilter\n", "topic.filter.class"),
        ("A->B.group.filter.class = com.example.MyGroupFilter\n", "A->B.group.filter.class"),
        ("config.property.filter.class = com.example.Mine\n", "config.property.filter.class"),
        (
            "transforms = mask\ntransforms.mask.type = org.apache.kafka.connect.transforms.MaskField$Value\n",
            "transforms",
        ),
        ("A->B.predicates = p\n", "A->B.predicates"),
        ("B.value.converter = org.apache.kafka.connect.json.JsonConverter\n", "B.value.converter"),
    ],
)
def test_unimplemented_keys_that_change_what_is_mirrored_are_refused(tmp_path: Path, line: str, key: str) -> None:
    result = _run(tmp_path, GOOD + line)
    assert result.exit_code == 2, result.output
    assert f"error: {key}: not supported by sparkmirror" in result.output
    assert "instead" in result.output or "remove the key" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "line",
    [
        "topic.filter.class = org.apache.kafka.connect.mirror.DefaultTopicFilter\n",
        "A->B.group.filter.class = DefaultGroupFilter\n",
        "transforms = \n",
        "key.converter = org.apache.kafka.connect.converters.ByteArrayConverter\n",
        "sync.topic.acls.enabled = true\n",
    ],
)
def test_mm2_defaults_of_those_keys_are_accepted(line: str) -> None:
    from sparkmirror.config import load_config

    assert load_config(GOOD + line).flows


def test_binary_config_file_exits_2_without_traceback(tmp_path: Path) -> None:
    cfg = tmp_path / "mm2.properties"
    cfg.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00")
    result = CliRunner().invoke(cli, ["run", str(cfg)], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert "not a properties file" in result.output
    assert "Traceback" not in result.output
