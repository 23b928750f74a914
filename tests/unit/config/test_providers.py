"""MM2's config providers: ${file:...}, ${directory:...}, ${env:...} resolved at load; errors name the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sparkmirror.cli.main import cli
from sparkmirror.config import load_config
from sparkmirror.config.providers import resolve_placeholders
from sparkmirror.errors import ConfigError

SECRET = "pr0vided-S3cret"

BASE = """\
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
"""

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" password="{}";'


def _file_provider(tmp_path: Path) -> tuple[str, Path]:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text(f"mirror.password = {SECRET}\ntruststore.password=ts-{SECRET}\n")
    head = (
        "config.providers = file\n"
        "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n"
    )
    return head, secrets


def test_file_provider_resolves_inside_a_jaas_line(tmp_path: Path) -> None:
    head, secrets = _file_provider(tmp_path)
    text = BASE + head + "B.sasl.jaas.config = " + JAAS.format(f"${{file:{secrets}:mirror.password}}") + "\n"
    text += f"B.ssl.truststore.password = ${{file:{secrets}:truststore.password}}\n"
    flow = load_config(text).flows[0]
    producer = flow.target_producer_props(reveal_secrets=True)
    assert f'password="{SECRET}"' in producer["sasl.jaas.config"]
    assert producer["ssl.truststore.password"] == f"ts-{SECRET}"
    assert SECRET not in repr(flow) and SECRET not in str(flow.target_producer_props())


def test_directory_provider_reads_a_file_per_key(tmp_path: Path) -> None:
    (tmp_path / "creds").mkdir()
    (tmp_path / "creds" / "password").write_text(SECRET)
    text = BASE + (
        "config.providers = dir\nconfig.providers.dir.class = DirectoryConfigProvider\n"
        f"B.ssl.key.password = ${{dir:{tmp_path / 'creds'}:password}}\n"
    )
    flow = load_config(text).flows[0]
    assert flow.target_admin_props(reveal_secrets=True)["ssl.key.password"] == SECRET


def test_env_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRROR_PW", SECRET)
    text = BASE + (
        "config.providers = env\n"
        "config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
        "B.sasl.jaas.config = " + JAAS.format("${env:MIRROR_PW}") + "\n"
    )
    flow = load_config(text).flows[0]
    assert SECRET in flow.target_admin_props(reveal_secrets=True)["sasl.jaas.config"]


def test_several_placeholders_in_one_value_and_text_around_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("P1", "one")
    monkeypatch.setenv("P2", "two")
    props = {
        "config.providers": "env",
        "config.providers.env.class": "EnvVarConfigProvider",
        "x": "a-${env:P1}-${env:P2}",
    }
    assert resolve_placeholders(props)["x"] == "a-one-two"


def test_values_without_placeholders_and_provider_keys_are_left_alone() -> None:
    props = {"config.providers": "", "a": "b", "c": "${not a placeholder}"}
    assert resolve_placeholders(props) == props


def _error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        load_config(text)
    assert err.value.exit_code == 2
    return err.value


def test_unknown_provider_names_the_referencing_key() -> None:
    err = _error(BASE + "B.ssl.truststore.password = ${vault:secret/kafka:pw}\n")
    assert err.key == "B.ssl.truststore.password"
    assert "vault" in str(err) and "config.providers" in str(err)


def test_missing_key_in_file_names_the_key_never_a_secret(tmp_path: Path) -> None:
    head, secrets = _file_provider(tmp_path)
    err = _error(BASE + head + f"B.ssl.keystore.password = ${{file:{secrets}:no.such.key}}\n")
    assert err.key == "B.ssl.keystore.password"
    assert "no.such.key" in str(err)
    assert SECRET not in str(err)


def test_missing_file_and_missing_env_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    head, _ = _file_provider(tmp_path)
    err = _error(BASE + head + f"A.sasl.jaas.config = ${{file:{tmp_path / 'nope'}:pw}}\n")
    assert err.key == "A.sasl.jaas.config"
    monkeypatch.delenv("NO_SUCH_VAR_13", raising=False)
    err = _error(
        BASE
        + "config.providers=env\nconfig.providers.env.class=EnvVarConfigProvider\nA->B.topics=${env:NO_SUCH_VAR_13}\n"
    )
    assert err.key == "A->B.topics" and "NO_SUCH_VAR_13" in str(err)


def test_provider_without_class_or_with_an_unknown_class() -> None:
    err = _error(BASE + "config.providers = file\n")
    assert err.key == "config.providers.file.class"
    err = _error(BASE + "config.providers = v\nconfig.providers.v.class = com.example.VaultConfigProvider\n")
    assert err.key == "config.providers.v.class" and "VaultConfigProvider" in str(err)


def test_allowed_paths_are_enforced(tmp_path: Path) -> None:
    _, secrets = _file_provider(tmp_path)
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    head = (
        "config.providers = file\nconfig.providers.file.class = FileConfigProvider\n"
        f"config.providers.file.param.allowed.paths = {allowed}\n"
    )
    err = _error(BASE + head + f"B.ssl.key.password = ${{file:{secrets}:mirror.password}}\n")
    assert err.key == "B.ssl.key.password" and "allowed.paths" in str(err)
    (allowed / "s.properties").write_text(f"pw={SECRET}\n")
    flow = load_config(BASE + head + f"B.ssl.key.password = ${{file:{allowed / 's.properties'}:pw}}\n").flows[0]
    assert flow.target_admin_props(reveal_secrets=True)["ssl.key.password"] == SECRET


def test_env_allowlist_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME_SECRET", SECRET)
    head = (
        "config.providers = env\nconfig.providers.env.class = EnvVarConfigProvider\n"
        "config.providers.env.param.allowlist.pattern = KAFKA_.*\n"
    )
    err = _error(BASE + head + "B.ssl.key.password = ${env:HOME_SECRET}\n")
    assert err.key == "B.ssl.key.password" and SECRET not in str(err)


def test_cli_exits_2_naming_the_key_without_a_traceback(tmp_path: Path) -> None:
    head, secrets = _file_provider(tmp_path)
    cfg = tmp_path / "mm2.properties"
    cfg.write_text(BASE + head + f"B.ssl.truststore.password = ${{file:{secrets}:missing}}\n")
    result = CliRunner().invoke(cli, ["run", str(cfg)], catch_exceptions=False)
    assert result.exit_code == 2
    assert "B.ssl.truststore.password" in result.output
    assert "Traceback" not in result.output and SECRET not in result.output
