"""Mirroring between secured clusters: SASL_SSL with SCRAM-SHA-512 (source) and PLAIN (target),
trust stores in JKS and PKCS12, passwords kept out of mm2.properties by MM2's file config
provider; and no secret in anything a run shows.

The clusters are the session's ``secured`` pair (tests/conftest.py), started only for these
tests; ``mirror`` is their super user, ``app`` a user without any right.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from kafka_helpers import run_cli, sparkmirror_cmd, unique
from secured_helpers import Secured, assert_no_secret
from sparkmirror.client import MirrorClient, TopicPartition
from sparkmirror.config import load_config
from sparkmirror.core.control import CONTROL_TOPIC
from sparkmirror.kafka.groups import commit_offsets
from sparkmirror.pipeline.driver.mirror import Mirror


def _config(secured: Secured, path: Path, extra: str = "") -> Path:
    """A's clients use SCRAM-SHA-512 and the JKS trust store, B's PLAIN and the PKCS12 one;
    every password through ${file:...}."""
    m = secured.material
    lines = [
        "clusters = A, B",
        "config.providers = file",
        "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider",
        f"A.bootstrap.servers = {secured.bootstraps['A']}",
        f"B.bootstrap.servers = {secured.bootstraps['B']}",
        "A->B.enabled = true",
    ]
    props = {
        "A": m.client_properties("sasl_ssl", "mirror", mechanism="SCRAM-SHA-512", store="JKS", reference=True),
        "B": m.client_properties("sasl_ssl", "mirror", mechanism="PLAIN", store="PKCS12", reference=True),
    }
    for alias, p in props.items():
        lines += [f"{alias}.{k} = {v}" for k, v in p.items()]
    lines += [
        "replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "emit.checkpoints.interval.seconds = 1",
        "emit.heartbeats.enabled = false",
        "heartbeats.replication.enabled = false",
        "sparkmirror.progress.interval.seconds = 1",
        extra,
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _run_watching_ps(
    args: list[str], timeout_s: float = 300, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run the CLI; meanwhile collect every command line on the machine (``ps``) twice a second."""
    seen: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.append(subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout)
            done.wait(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = subprocess.run(
            sparkmirror_cmd(*args), capture_output=True, text=True, timeout=timeout_s, env={**os.environ, **(env or {})}
        )
    finally:
        done.set()
        watcher.join()
    return result, "\n".join(seen)


def test_cli_mirrors_translates_and_plans_failover_without_showing_a_secret(secured: Secured, tmp_path: Path) -> None:
    topic, group = unique("sec"), unique("sec-app")
    secured.create_topics("A", {topic: 2})
    values = [f"v{i}".encode() for i in range(40)]
    secured.produce("A", topic, values, partition=0)
    secured.produce("A", topic, values[:10], partition=1)
    commit_offsets(secured.conf("A"), group, {(topic, 0): 30})
    # A cloud storage key among Spark's settings: PySpark would put it on spark-submit's command line.
    storage_key = f"s3-{uuid.uuid4().hex}"
    extra = f"A->B.topics = {topic}\nsparkmirror.spark.conf.spark.hadoop.fs.s3a.secret.key = {storage_key}\n"
    cfg = _config(secured, tmp_path / "mm2.properties", extra)

    # A temporary directory of these processes' own: other sparkmirror processes on the machine
    # make and remove theirs in /tmp at their own pace.
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    env = {"TMPDIR": str(private_tmp)}
    run, ps = _run_watching_ps(["-vv", "run", str(cfg), "--once"], env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert secured.read("B", f"A.{topic}", 0) == values
    assert secured.read("B", f"A.{topic}", 1) == values[:10]

    translate = run_cli(
        "offsets", "translate", str(cfg), "--source", "A", "--target", "B", "--group", group, "--json", env=env
    )
    assert translate.returncode == 0, translate.stderr
    report = json.loads(translate.stdout)
    assert {(p["partition"], p["target_offset"]) for p in report["partitions"]} == {(0, 30)}

    failover = run_cli(
        "-v", "failover", str(cfg), "--source", "A", "--target", "B", "--groups", group, "--json", env=env
    )
    assert failover.returncode in (0, 4), failover.stderr  # a dry run; 4: checkpoints still catching up
    assert group in failover.stdout
    status = run_cli("-v", "status", str(cfg), "--json", env=env)
    assert status.returncode == 0, status.stderr  # stopped after --once, and no lag threshold
    assert "A->B" in status.stdout

    # Each process converted the JKS and PKCS12 trust stores into its private directory, and
    # removed it at exit.
    assert list(private_tmp.glob("sparkmirror-tls-*")) == []

    # The config as loaded: reprs and strs of what holds the secrets.
    from sparkmirror.failover.plan import Cluster
    from sparkmirror.kafka.flowclients import FlowClients

    config = load_config(cfg)
    clients = FlowClients(config.flows[0])
    reprs = "\n".join(
        [repr(config), str(config), repr(config.flows[0]), str(config.clusters), repr(Cluster.of(config, "A")),
         repr(clients), repr(clients.flow.source_cluster)]
    )  # fmt: skip
    assert_no_secret(
        {
            "run stdout": run.stdout,
            "run stderr (-vv)": run.stderr,
            "command lines (ps)": ps,
            "translate --json": translate.stdout + translate.stderr,
            "failover --json": failover.stdout + failover.stderr,
            "status --json": status.stdout + status.stderr,
            "reprs": reprs,
        },
        [*secured.secrets(), storage_key],
    )


@pytest.mark.parametrize("transport", ["librdkafka", "java"])
def test_exactly_once_and_checkpoints_and_client_api_over_scram(
    secured: Secured, tmp_path: Path, transport: str
) -> None:
    """The copy tasks' clients (librdkafka's, or Kafka's Java clients in the transport JVM, which take the
    cluster's settings as written: SCRAM and a JKS trust store from A, PLAIN and a PKCS12 one to B) write
    in transactions over SASL_SSL; checkpoints and the client API read them back."""
    topic, group = unique("sec-eos"), unique("sec-eos-app")
    secured.create_topics("A", {topic: 1})
    values = [f"e{i}".encode() for i in range(25)]
    secured.produce("A", topic, values)
    commit_offsets(secured.conf("A"), group, {(topic, 0): 17})
    extra = f"A->B.topics = {topic}\nsparkmirror.exactly.once = true\nsparkmirror.transport = {transport}\n"
    cfg = _config(secured, tmp_path / "mm2.properties", extra)
    # --once: the records in transactions, then the checkpoints as of the end of the run.
    Mirror(load_config(cfg), once=True).run()
    m = secured.material
    app_config = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="mirror" password="{m.password("mirror")}";',
        "ssl.truststore.type": "JKS",
        "ssl.truststore.location": str(m.truststore("JKS")),
        "ssl.truststore.password": m.password("store"),
    }
    with MirrorClient(secured.bootstraps["B"], config=app_config, timeout_s=60) as client:
        assert client.translate_offsets("A", group) == {TopicPartition(f"A.{topic}", 0): 17}
        assert m.password("mirror") not in repr(client)
    assert secured.read("B", f"A.{topic}") == values  # read_committed: written in transactions


def test_topic_acls_are_copied_by_mm2s_rule_and_never_deleted(secured: Secured, tmp_path: Path):
    from confluent_kafka.admin import AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourceType
    from confluent_kafka.admin import ResourcePatternType as Pattern

    topic = unique("acl")
    remote = f"A.{topic}"
    secured.create_topics("A", {topic: 1})

    def binding(name: str, principal: str, op: str, perm: str = "ALLOW", pattern: str = "LITERAL") -> AclBinding:
        return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", op, perm)

    source_acls = [
        binding(topic, "User:app", "READ"),
        binding(topic, "User:app", "WRITE"),  # never copied
        binding(topic, "User:reporter", "ALL"),  # copied as READ
        binding(topic, "User:intruder", "READ", "DENY"),
        binding(topic[:8], "User:team", "DESCRIBE", pattern="PREFIXED"),
    ]
    admin_a, admin_b = secured.admin("A"), secured.admin("B")  # alive until their futures resolve
    for f in admin_a.create_acls(source_acls).values():
        f.result()
    kept = binding(remote, "User:someone", "READ")  # already on B: must survive the sync
    for f in admin_b.create_acls([kept]).values():
        f.result()
    cfg = _config(secured, tmp_path / "mm2.properties", f"A->B.topics = {topic[:8]}.*\n")
    Mirror(load_config(cfg), once=True).run()

    query = AclBindingFilter(ResourceType.TOPIC, None, Pattern.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)
    on_b = {
        (b.name, b.resource_pattern_type.name, b.principal, b.operation.name, b.permission_type.name)
        for b in admin_b.describe_acls(query, request_timeout=30).result()
        if b.name in (remote, f"A.{topic[:8]}")
    }
    assert on_b == {
        (remote, "LITERAL", "User:app", "READ", "ALLOW"),
        (remote, "LITERAL", "User:reporter", "READ", "ALLOW"),
        (remote, "LITERAL", "User:intruder", "READ", "DENY"),
        (f"A.{topic[:8]}", "PREFIXED", "User:team", "DESCRIBE", "ALLOW"),
        (remote, "LITERAL", "User:someone", "READ", "ALLOW"),
    }


def test_a_principal_without_rights_stops_the_run_with_one_line(secured: Secured, tmp_path: Path):
    topic = unique("sec-denied")
    secured.create_topics("A", {topic: 1})
    secured.produce("A", topic, [b"x"])
    cfg = _config(secured, tmp_path / "mm2.properties", f"A->B.topics = {topic}\n")
    text = cfg.read_text().replace('username="mirror" password="${file:', 'username="app" password="${file:')
    text = text.replace(":mirror.password}", ":app.password}")
    cfg.write_text(text)
    started = time.monotonic()
    code, stderr = _run_in_process(cfg)
    assert code == 1, stderr[-2000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr[-3000:]
    assert "User:app" in errors[0] and "refused" in errors[0], errors[0]
    assert "cluster A" in errors[0] or "cluster B" in errors[0], errors[0]
    assert time.monotonic() - started < 120  # Spark's start included; no hidden retry loop (minutes)
    assert_no_secret({"stderr": stderr}, secured.secrets())


def _run_in_process(cfg: Path) -> tuple[int, str]:
    """``sparkmirror run --once`` through the CLI in this process (the session's Spark is reused)."""
    import signal

    from click.testing import CliRunner

    from sparkmirror.cli.main import cli

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = CliRunner().invoke(cli, ["run", str(cfg), "--once"], catch_exceptions=False)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return result.exit_code, result.stderr


def test_wrong_password_is_an_authentication_error_naming_cluster_and_principal(secured: Secured, tmp_path: Path):
    cfg = _config(secured, tmp_path / "mm2.properties", "A->B.topics = nothing-here\n")
    text = "".join(line for line in cfg.read_text().splitlines(True) if not line.startswith("B.sasl.jaas.config"))
    text += (
        'B.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="mirror" '
        'password="wrong-Passw0rd";\n'
    )
    cfg.write_text(text)
    started = time.monotonic()
    code, stderr = _run_in_process(cfg)
    assert code == 2, stderr[-2000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr[-3000:]
    assert "cluster B" in errors[0] and "User:mirror" in errors[0] and "authentication" in errors[0].lower()
    assert "wrong-Passw0rd" not in stderr
    assert time.monotonic() - started < 120  # Spark's start included; no retry loop (minutes)


def test_mutual_tls_with_jks_stores_on_every_path(secured: Secured, mtls: Secured, tmp_path: Path):
    """M requires client certificates (JKS key and trust stores); the target A takes SCRAM with a PEM trust store."""
    topic, group = unique("mtls"), unique("mtls-app")
    mtls.create_topics("M", {topic: 1})
    values = [f"m{i}".encode() for i in range(20)]
    mtls.produce("M", topic, values)
    commit_offsets(mtls.conf("M"), group, {(topic, 0): 12})
    m, s = mtls.material, secured.material
    lines = [
        "clusters = M, A",
        "config.providers = file",
        "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider",
        f"M.bootstrap.servers = {mtls.bootstraps['M']}",
        f"A.bootstrap.servers = {secured.bootstraps['A']}",
        "M->A.enabled = true",
        f"M->A.topics = {topic}",
        *(f"M.{k} = {v}" for k, v in m.client_properties("ssl", "mirror", store="JKS", reference=True).items()),
        *(f"A.{k} = {v}" for k, v in s.client_properties("sasl_ssl", "mirror", store="PEM", reference=True).items()),
        "replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "emit.heartbeats.enabled = false",
        "heartbeats.replication.enabled = false",
    ]
    cfg = tmp_path / "mm2.properties"
    cfg.write_text("\n".join(lines) + "\n")
    # The tasks read M with librdkafka (the JKS stores converted to PEM).
    Mirror(load_config(cfg), once=True).run()
    assert secured.read("A", f"M.{topic}") == values
    translate = run_cli("offsets", "translate", str(cfg), "--source", "M", "--target", "A", "--group", group, "--json")
    assert translate.returncode == 0, translate.stderr
    assert [p["target_offset"] for p in json.loads(translate.stdout)["partitions"]] == [12]
    assert_no_secret({"translate": translate.stdout + translate.stderr}, mtls.secrets() + secured.secrets())


def test_the_lines_dev_up_prints_reach_both_clusters(secured: Secured) -> None:
    """``dev up --security sasl_ssl`` prints these lines; with a flow added they load and connect
    (passwords through ${file:...}, none in the lines)."""
    from sparkmirror.devcluster.security import mm2_lines
    from sparkmirror.kafka.flowclients import FlowClients

    lines = mm2_lines(secured.material, "sasl_ssl", secured.bootstraps)
    assert_no_secret({"dev up lines": "\n".join(lines)}, secured.secrets())
    config = load_config("\n".join(["clusters = A, B", *lines, "A->B.enabled = true"]) + "\n")
    clients = FlowClients(config.flows[0])
    try:
        clients.validate()
        assert clients.source_admin.list_topics(timeout=30).brokers
        assert clients.target_admin.list_topics(timeout=30).brokers
        assert_no_secret({"reprs": repr(clients) + repr(config) + str(config.flows[0])}, secured.secrets())
    finally:
        clients.close()


def test_oauthbearer_client_credentials_on_every_path(secured: Secured, tmp_path: Path) -> None:
    """OIDC client credentials against the dev token endpoint (signed JWTs the brokers validate with
    its JWKS): the tasks' reader and writer, the admin work and the client API (librdkafka's oidc)."""
    topic, group = unique("oauth"), unique("oauth-app")
    secured.create_topics("A", {topic: 1})
    values = [f"o{i}".encode() for i in range(15)]
    secured.produce("A", topic, values)
    commit_offsets(secured.conf("A"), group, {(topic, 0): 9})
    m = secured.material
    oauth = m.client_properties("sasl_ssl", "mirror", mechanism="OAUTHBEARER", store="PKCS12", reference=True)
    lines = [
        "clusters = A, B",
        "config.providers = file",
        "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider",
        f"A.bootstrap.servers = {secured.bootstraps['A']}",
        f"B.bootstrap.servers = {secured.bootstraps['B']}",
        *(f"{alias}.{k} = {v}" for alias in ("A", "B") for k, v in oauth.items()),
        "A->B.enabled = true",
        f"A->B.topics = {topic}",
        "replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "emit.heartbeats.enabled = false",
        "heartbeats.replication.enabled = false",
    ]
    cfg = tmp_path / "mm2.properties"
    cfg.write_text("\n".join(lines) + "\n")
    Mirror(load_config(cfg), once=True).run()
    assert secured.read("B", f"A.{topic}") == values

    translate = run_cli("offsets", "translate", str(cfg), "--source", "A", "--target", "B", "--group", group, "--json")
    assert translate.returncode == 0, translate.stderr
    assert [p["target_offset"] for p in json.loads(translate.stdout)["partitions"]] == [9]
    assert_no_secret({"translate": translate.stdout + translate.stderr}, secured.secrets())


def test_failover_says_a_refused_password_instead_of_falling_back_to_checkpoints(
    secured: Secured, tmp_path: Path
) -> None:
    """Wrong credentials for A are not an A that is down: no plan from B's checkpoints alone."""
    cfg = _config(secured, tmp_path / "mm2.properties", "A->B.topics = nothing-here\n")
    text = "".join(line for line in cfg.read_text().splitlines(True) if not line.startswith("A.sasl.jaas.config"))
    text += (
        'A.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" '
        'password="wrong-Passw0rd";\n'
    )
    cfg.write_text(text)
    for args in (["failover", str(cfg), "--source", "A", "--target", "B", "--groups", "g"],):
        result = run_cli(*args, timeout_s=300)
        assert result.returncode == 2, (args[0], result.stdout, result.stderr[-2000:])
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "cluster A refused authentication as User:mirror" in errors[0], result.stderr
        assert "wrong-Passw0rd" not in result.stdout + result.stderr


def test_a_principal_refused_the_lease_group_gets_an_authorization_error_not_lease_held(
    secured: Secured, tmp_path: Path
) -> None:
    """``app`` may use the flow's offset-map topic on B but not its lease group: the run stops at once
    with exit 1 and one line naming cluster, principal and the lease group (not exit 6, "another
    instance holds the lease", after the 30 s wait)."""
    from confluent_kafka.admin import AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourceType
    from confluent_kafka.admin import ResourcePatternType as Pattern

    from sparkmirror.core.naming import lease_group, offset_map_topic

    alias = f"L{uuid.uuid4().hex[:8]}"  # a source alias of its own: its own offset-map topic and lease group
    offset_map = offset_map_topic(alias)
    secured.create_topics("B", {offset_map: 1})
    grant = AclBinding(ResourceType.TOPIC, offset_map, Pattern.LITERAL, "User:app", "*", AclOperation.ALL,
                       AclPermissionType.ALLOW)  # fmt: skip
    admin_b = secured.admin("B")
    for f in admin_b.create_acls([grant]).values():
        f.result()
    m = secured.material
    lines = [
        f"clusters = {alias}, B",
        "config.providers = file",
        "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider",
        f"{alias}.bootstrap.servers = {secured.bootstraps['A']}",
        f"B.bootstrap.servers = {secured.bootstraps['B']}",
        *(f"{alias}.{k} = {v}" for k, v in m.client_properties("sasl_ssl", "mirror", reference=True).items()),
        *(
            f"B.{k} = {v}"
            for k, v in m.client_properties(
                "sasl_ssl", "app", mechanism="PLAIN", store="PKCS12", reference=True
            ).items()
        ),
        f"{alias}->B.enabled = true",
        f"{alias}->B.topics = nothing-here",
        "offset-syncs.topic.replication.factor = 1",
        "emit.heartbeats.enabled = false",
    ]
    cfg = tmp_path / "mm2.properties"
    cfg.write_text("\n".join(lines) + "\n")
    try:
        code, stderr = _run_in_process(cfg)
    finally:
        query = AclBindingFilter(ResourceType.TOPIC, offset_map, Pattern.LITERAL, "User:app", None, AclOperation.ANY,
                                 AclPermissionType.ANY)  # fmt: skip
        for f in admin_b.delete_acls([query]).values():
            f.result()
    assert code == 1, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr[-3000:]
    assert "cluster B refused User:app" in errors[0], errors[0]
    assert lease_group(alias, "B") in errors[0] and "GROUP_AUTHORIZATION_FAILED" in errors[0], errors[0]
    assert "already running" not in stderr
    assert_no_secret({"stderr": stderr}, secured.secrets())


def test_flow_control_commands_are_refused_to_a_principal_without_rights_on_the_target(
    secured: Secured, tmp_path: Path
):
    cfg = _config(secured, tmp_path / "mm2.properties")
    text = cfg.read_text().replace('username="mirror" password="${file:', 'username="app" password="${file:')
    cfg.write_text(text.replace(":mirror.password}", ":app.password}"))
    for exists in (False, True):
        if exists:  # as a running mirror leaves it: then the caller is refused reading it
            try:
                secured.create_topics("B", {CONTROL_TOPIC: 1})
            except KafkaException as exc:
                assert "TOPIC_ALREADY_EXISTS" in str(exc)
        done = run_cli("pause", str(cfg), "--flow", "A->B", timeout_s=180)
        assert done.returncode == 1, done.stdout + done.stderr
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
        assert "cluster B refused User:app" in errors[0] and CONTROL_TOPIC in errors[0], errors[0]
        assert_no_secret({"stderr": done.stderr, "stdout": done.stdout}, secured.secrets())
