"""JKS and Java-made PKCS12 stores converted for librdkafka: the stores are written by Java's keytool
(the dev clusters' material), read back through keytool and cryptography. No broker; keytool is a
process, hence this tier."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key, pkcs12

from sparkmirror.devcluster.security import SecurityMaterial
from sparkmirror.errors import ConfigError
from sparkmirror.kafka import stores
from sparkmirror.kafka.clients import librdkafka_config


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> SecurityMaterial:
    return SecurityMaterial.ensure(tmp_path_factory.mktemp("stores"))


@pytest.fixture(autouse=True)
def _fresh_private_dir() -> Iterator[None]:
    stores.cleanup()
    yield
    stores.cleanup()


@pytest.mark.parametrize("kind", ["JKS", "PKCS12"])
def test_java_trust_stores_become_the_ca_file(material: SecurityMaterial, kind: str) -> None:
    conf = librdkafka_config(
        {
            "ssl.truststore.type": kind,
            "ssl.truststore.location": str(material.truststore(kind)),
            "ssl.truststore.password": material.password("store"),
        },
        role="consumer",
    )
    assert Path(conf["ssl.ca.location"]).read_bytes() == material.ca_pem.read_bytes()


def test_jks_key_store_becomes_the_same_key_and_chain(material: SecurityMaterial) -> None:
    password = material.password("store")
    conf = librdkafka_config(
        {
            "ssl.keystore.location": str(material.keystore("mirror", "JKS")),  # type JKS: Java's default
            "ssl.keystore.password": password,
        },
        role="producer",
    )
    original = pkcs12.load_pkcs12((material.directory / "mirror.p12").read_bytes(), password.encode())
    key = load_pem_private_key(Path(conf["ssl.key.location"]).read_bytes(), conf["ssl.key.password"].encode())
    assert original.key is not None and key.public_key() == original.key.public_key()
    chain = Path(conf["ssl.certificate.location"]).read_bytes()
    assert chain.startswith(material.chain_pem("mirror").read_bytes().split(b"-----END CERTIFICATE-----")[0])


def test_wrong_jks_password_names_the_key_and_shows_no_password(material: SecurityMaterial) -> None:
    with pytest.raises(ConfigError) as err:
        librdkafka_config(
            {"ssl.keystore.location": str(material.keystore("mirror", "JKS")), "ssl.keystore.password": "n0t-It"},
            role="producer",
        )
    assert err.value.key == "ssl.keystore.password" and "n0t-It" not in str(err.value)
    assert material.password("store") not in str(err.value)


def test_a_jks_store_that_is_not_jks_names_the_location(material: SecurityMaterial) -> None:
    with pytest.raises(ConfigError) as err:
        librdkafka_config(
            {"ssl.truststore.location": str(material.ca_pem), "ssl.truststore.password": "x"}, role="consumer"
        )
    assert err.value.key in ("ssl.truststore.location", "ssl.truststore.password")
