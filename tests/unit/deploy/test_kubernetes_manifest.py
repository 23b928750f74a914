"""deploy/kubernetes/: the manifest is valid Kubernetes, and its parts agree with each other and the image.

Every object is validated offline against the Kubernetes OpenAPI schemas that `kubernetes-validate`
bundles (strict: an unknown field is an error), for the oldest and the newest Kubernetes release it
knows. Then what a schema cannot see: names that must match (service account, role, volumes,
secret), the configuration map's mm2.properties loading with sparkmirror's own loader, its Spark
settings pointing at this manifest's image, service and namespace, and the paths of the Dockerfile.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import ValidationError, all_versions, latest_version

from sparkmirror.config.loader import load_config
from sparkmirror.pipeline.driver.mirror import RUN_STOP_BOUND_S

DEPLOY = Path(__file__).resolve().parents[3] / "deploy" / "kubernetes"
MANIFEST = DEPLOY / "sparkmirror.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"
ENTRYPOINT = DEPLOY / "entrypoint.sh"
#: The oldest Kubernetes release still supported upstream when this was written, and the newest bundled.
VERSIONS = ("1.31.0", latest_version())


def _objects() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def _one(kind: str) -> dict[str, Any]:
    found = [o for o in _objects() if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def _properties() -> dict[str, str]:
    """The ConfigMap's mm2.properties as key -> value (continuation lines joined), for the checks below."""
    text = _one("ConfigMap")["data"]["mm2.properties"]
    out: dict[str, str] = {}
    for line in re.sub(r"\\\n\s*", "", text).splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def _driver() -> dict[str, Any]:
    return _one("Deployment")["spec"]["template"]["spec"]["containers"][0]


def _dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    for line in text.splitlines():
        if line.startswith("ENV "):
            env.update(re.findall(r"(\w+)=(\S+)", line))
    return env


def test_the_schema_versions_are_bundled() -> None:
    # Offline: the schemas come with the package; a version it lacks would need the network.
    assert set(VERSIONS) <= set(all_versions())


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_is_valid_kubernetes(version: str) -> None:
    kinds = []
    for obj in _objects():
        kubernetes_validate.validate(obj, version, strict=True)
        kinds.append(obj["kind"])
    assert sorted(kinds) == sorted(
        ["Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Service",
         "Deployment"]
    )  # fmt: skip


@pytest.mark.parametrize(
    "mistake",
    [
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(imagePullPolicyy="Always"),  # unknown field
        lambda d: d["spec"].update(replicas="one"),  # wrong type
        lambda d: d["spec"]["template"]["spec"]["containers"][0].pop("name"),  # required field
    ],
    ids=["unknown-field", "wrong-type", "missing-required"],
)
def test_the_validator_refuses_a_wrong_deployment(mistake: Any) -> None:
    deployment = copy.deepcopy(_one("Deployment"))
    mistake(deployment)
    with pytest.raises(ValidationError):
        kubernetes_validate.validate(deployment, latest_version(), strict=True)


def test_names_agree_across_objects() -> None:
    namespace = _one("Namespace")["metadata"]["name"]
    for obj in _objects():
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == namespace, obj["kind"]
    account = _one("ServiceAccount")["metadata"]["name"]
    binding = _one("RoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    assert binding["roleRef"]["name"] == _one("Role")["metadata"]["name"]
    pod = _one("Deployment")["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] == account
    assert _one("Service")["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == _one("ConfigMap")["metadata"]["name"]
    # sparkmirror keeps no state on the driver's disk (progress, offset map and lease are on the target).
    assert not [o for o in _objects() if o["kind"] == "PersistentVolumeClaim"]
    assert {m["name"] for m in _driver()["volumeMounts"]} == set(volumes)


def test_the_driver_may_manage_its_executor_pods() -> None:
    rules = _one("Role")["rules"]
    pods = [r for r in rules if "pods" in r["resources"] and "" in r["apiGroups"]]
    assert pods and {"create", "get", "list", "watch", "delete"} <= set(pods[0]["verbs"])


def test_the_configuration_loads_with_sparkmirrors_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ConfigMap's file is a valid sparkmirror configuration (the secret's mount replaced by a temp dir)."""
    mounts = {m["name"]: m["mountPath"] for m in _driver()["volumeMounts"]}
    secrets_dir = mounts["credentials"]
    (tmp_path / "credentials.properties").write_text("mirror.password=not-a-real-one\n")
    (tmp_path / "ca.pem").write_text("")
    text = _one("ConfigMap")["data"]["mm2.properties"].replace(secrets_dir, str(tmp_path))
    monkeypatch.setenv("POD_NAME", "sparkmirror-0")
    cfg = load_config(text)
    assert [f.name for f in cfg.flows] == ["A->B"]
    assert not cfg.unknown_keys
    spark = cfg.flows[0].spark
    assert spark.master.startswith("k8s://")
    conf = spark.spark_conf()
    assert conf["spark.kubernetes.driver.pod.name"] == "sparkmirror-0"
    assert "not-a-real-one" not in repr(cfg)


def test_spark_settings_point_at_this_manifest() -> None:
    props = _properties()
    conf = {k.removeprefix("sparkmirror.spark.conf."): v for k, v in props.items() if "spark.conf." in k}
    namespace = _one("Namespace")["metadata"]["name"]
    service = _one("Service")
    assert conf["spark.kubernetes.namespace"] == namespace
    assert conf["spark.kubernetes.container.image"] == _driver()["image"]
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == _one("ServiceAccount")["metadata"]["name"]
    assert conf["spark.driver.host"] == f"{service['metadata']['name']}.{namespace}.svc"
    assert service["spec"]["clusterIP"] == "None"  # executors reach the driver's pod itself
    service_ports = {p["port"] for p in service["spec"]["ports"]}
    container_ports = {p["containerPort"] for p in _driver()["ports"]}
    ports = (
        conf["spark.driver.port"],
        conf["spark.driver.blockManager.port"],
        props["sparkmirror.metrics.port"],
        props["sparkmirror.report.port"],  # the streaming engine's tasks report there
    )
    for port in ports:
        assert int(port) in service_ports and int(port) in container_ports, port
    # The executors mount the same secret at the same path (their librdkafka reads the trust store).
    secret = _one("Deployment")["spec"]["template"]["spec"]["volumes"]
    secret_name = next(v["secret"]["secretName"] for v in secret if "secret" in v)
    mount = next(m["mountPath"] for m in _driver()["volumeMounts"] if m["name"] == "credentials")
    assert conf[f"spark.kubernetes.executor.secrets.{secret_name}"] == mount
    assert props["config.providers.file.param.allowed.paths"] == mount


def test_the_manifest_matches_the_image() -> None:
    env = _dockerfile_env()
    docker = DOCKERFILE.read_text()
    props = _properties()
    # The executors' Python is the image's venv, which holds sparkmirror, confluent-kafka and pyspark.
    assert props["sparkmirror.spark.conf.spark.pyspark.python"] == env["PYSPARK_PYTHON"]
    assert (
        env["PYSPARK_PYTHON"].startswith("/opt/sparkmirror/venv/") and "python -m venv /opt/sparkmirror/venv" in docker
    )
    assert env["SPARK_HOME"] == "/opt/sparkmirror/venv/lib/python3.11/site-packages/pyspark"
    assert "FROM python:3.11-" in docker and "openjdk-17-jre-headless" in docker
    # The entry point Spark's executor pods run ("executor") is the script this directory holds.
    entry = re.search(r"^ENTRYPOINT \[(.*)\]$", docker, re.M)
    assert entry is not None
    assert '"/opt/sparkmirror/entrypoint.sh"' in entry.group(1)
    assert "COPY --chmod=0755 deploy/kubernetes/entrypoint.sh /opt/sparkmirror/entrypoint.sh" in docker
    assert "KubernetesExecutorBackend" in ENTRYPOINT.read_text()
    # The driver's pod runs as the image's user, and `sparkmirror run` on the mounted configuration.
    uid = re.search(r"useradd --uid (\d+)", docker)
    assert uid is not None
    assert _one("Deployment")["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(uid.group(1))
    config_mount = next(m["mountPath"] for m in _driver()["volumeMounts"] if m["name"] == "config")
    assert _driver()["args"] == ["sparkmirror", "run", config_mount]


def test_the_pod_stops_as_the_run_does() -> None:
    # Kubernetes sends SIGTERM to the container's main process only: `sparkmirror run`, exec'd by the entry
    # point (not Spark's JVM or the tasks' workers, docs/deployment.md), and SIGKILL after the grace period,
    # which must outlast the run's own stop (test_systemd_unit.py: the same bound).
    assert 'exec "$@"' in ENTRYPOINT.read_text()
    grace = _one("Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace >= RUN_STOP_BOUND_S
