"""Java's trust and key stores (PKCS12, PEM by file and inline) as the PEM files librdkafka reads.

JKS goes through Java's keytool (a process): tests/integration/test_store_conversion.py.
"""

from __future__ import annotations

import datetime
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
    pkcs12,
)
from cryptography.x509.oid import NameOID

from sparkmirror.errors import ConfigError
from sparkmirror.kafka import stores
from sparkmirror.kafka.clients import jaas_options, librdkafka_config

STORE_PW = "st0re-Secret-pw"
KEY_PW = "k3y-Secret-pw"


@dataclass
class Material:
    ca_pem: bytes
    key: ec.EllipticCurvePrivateKey
    cert_pem: bytes
    p12: Path
    truststore_p12: Path


@pytest.fixture(autouse=True)
def _fresh_private_dir() -> Iterator[None]:
    stores.cleanup()
    yield
    stores.cleanup()


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> Material:
    tmp = tmp_path_factory.mktemp("stores")
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder().subject_name(_name("ca")).issuer_name(_name("ca")).public_key(ca_key.public_key())
        .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder().subject_name(_name("mirror")).issuer_name(_name("ca")).public_key(key.public_key())
        .serial_number(2).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    p12 = tmp / "mirror.p12"
    p12.write_bytes(
        pkcs12.serialize_key_and_certificates(b"mirror", key, cert, [ca], BestAvailableEncryption(STORE_PW.encode()))
    )
    truststore = tmp / "truststore.p12"
    truststore.write_bytes(
        pkcs12.serialize_key_and_certificates(b"ca", None, ca, None, BestAvailableEncryption(STORE_PW.encode()))
    )
    return Material(ca.public_bytes(Encoding.PEM), key, cert.public_bytes(Encoding.PEM), p12, truststore)


def _private(path: str) -> None:
    assert stat.S_IMODE(Path(path).stat().st_mode) == 0o600
    assert stat.S_IMODE(Path(path).parent.stat().st_mode) == 0o700


def test_pkcs12_trust_store_becomes_a_ca_file(material: Material) -> None:
    conf = librdkafka_config(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(material.truststore_p12),
            "ssl.truststore.password": STORE_PW,
        },
        role="consumer",
    )
    assert set(conf) == {"security.protocol", "ssl.ca.location"}
    assert Path(conf["ssl.ca.location"]).read_bytes() == material.ca_pem
    _private(conf["ssl.ca.location"])


def test_pkcs12_key_store_becomes_an_encrypted_key_and_its_chain(material: Material) -> None:
    conf = librdkafka_config(
        {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(material.p12),
            "ssl.keystore.password": STORE_PW,
            "ssl.key.password": KEY_PW,
        },
        role="producer",
    )
    assert conf["ssl.key.password"] == KEY_PW
    key_file = Path(conf["ssl.key.location"])
    assert b"ENCRYPTED PRIVATE KEY" in key_file.read_bytes()
    key = load_pem_private_key(key_file.read_bytes(), KEY_PW.encode())
    assert key.public_key() == material.key.public_key()
    chain = Path(conf["ssl.certificate.location"]).read_bytes()
    assert chain == material.cert_pem + material.ca_pem  # leaf first, then the CA
    _private(conf["ssl.key.location"])


def test_wrong_store_password_names_the_password_key_not_the_value(material: Material) -> None:
    with pytest.raises(ConfigError) as err:
        librdkafka_config(
            {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(material.p12), "ssl.keystore.password": "x"},
            role="producer",
        )
    assert err.value.key == "ssl.keystore.password"
    assert "x" not in str(err.value).split(":")[-1].split()  # the value is not quoted


def test_pem_trust_store_by_location_is_used_as_it_is(tmp_path: Path, material: Material) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(material.ca_pem)
    conf = librdkafka_config({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca)}, role="admin")
    assert conf == {"ssl.ca.location": str(ca)}


def test_inline_pem_certificates_key_and_chain(material: Material) -> None:
    key_pem = material.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(KEY_PW.encode()))
    conf = librdkafka_config(
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": material.ca_pem.decode(),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": key_pem.decode(),
            "ssl.keystore.certificate.chain": (material.cert_pem + material.ca_pem).decode(),
            "ssl.key.password": KEY_PW,
        },
        role="consumer",
    )
    assert Path(conf["ssl.ca.location"]).read_bytes() == material.ca_pem
    assert Path(conf["ssl.certificate.location"]).read_bytes() == material.cert_pem + material.ca_pem
    key = load_pem_private_key(Path(conf["ssl.key.location"]).read_bytes(), KEY_PW.encode())
    assert key.public_key() == material.key.public_key()
    assert conf["ssl.key.password"] == KEY_PW
    assert not any(k.startswith(("ssl.keystore", "ssl.truststore")) for k in conf)


def test_pem_key_store_by_location_holds_key_and_chain(tmp_path: Path, material: Material) -> None:
    both = tmp_path / "mirror.pem"
    both.write_bytes(material.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) + material.cert_pem)
    conf = librdkafka_config({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(both)}, role="consumer")
    assert Path(conf["ssl.certificate.location"]).read_bytes() == material.cert_pem
    assert "ssl.key.password" not in conf
    _private(conf["ssl.key.location"])


def test_encrypted_inline_key_without_password_names_ssl_key_password(material: Material) -> None:
    key_pem = material.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(KEY_PW.encode()))
    with pytest.raises(ConfigError) as err:
        librdkafka_config(
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.key": key_pem.decode(),
                "ssl.keystore.certificate.chain": material.cert_pem.decode(),
            },
            role="consumer",
        )
    assert err.value.key == "ssl.key.password"
    assert "PRIVATE KEY" not in str(err.value)


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"ssl.truststore.type": "JCEKS", "ssl.truststore.location": "/x"}, "ssl.truststore.type"),
        ({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": "/no/such.p12"}, "ssl.truststore.location"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "k"}, "ssl.keystore.certificate.chain"),
        ({"ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----"}, "ssl.truststore.type"),
        ({"ssl.endpoint.identification.algorithm": "dns"}, "ssl.endpoint.identification.algorithm"),
    ],
)
def test_store_settings_that_cannot_work_name_their_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        librdkafka_config(props, role="consumer")
    assert err.value.key == key
    assert err.value.exit_code == 2


def test_conversion_is_done_once_per_store(material: Material) -> None:
    props = {
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(material.truststore_p12),
        "ssl.truststore.password": STORE_PW,
    }
    first = librdkafka_config(props, role="consumer")
    Path(first["ssl.ca.location"]).write_bytes(material.ca_pem + b"\n")  # touched: a second run would rewrite it
    assert librdkafka_config(props, role="producer") == first
    assert Path(first["ssl.ca.location"]).read_bytes().endswith(b"\n\n")


def test_private_dir_is_removed_by_cleanup(material: Material) -> None:
    conf = librdkafka_config({"ssl.truststore.certificates": material.ca_pem.decode(), "ssl.truststore.type": "PEM"},
                             role="consumer")  # fmt: skip
    directory = Path(conf["ssl.ca.location"]).parent
    assert directory.is_dir()
    stores.cleanup()
    assert not directory.exists()


@pytest.mark.parametrize(("java", "rdkafka"), [("", "none"), ("https", "https"), ("HTTPS", "https")])
def test_endpoint_identification_algorithm(java: str, rdkafka: str) -> None:
    conf = librdkafka_config({"ssl.endpoint.identification.algorithm": java}, role="consumer")
    assert conf == {"ssl.endpoint.identification.algorithm": rdkafka}


def test_scram_and_plain_jaas_lines_with_quotes_and_escapes() -> None:
    jaas = r'org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" password="a\"b\\c";'
    conf = librdkafka_config({"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas}, role="consumer")
    assert conf == {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "mirror", "sasl.password": 'a"b\\c'}
    assert jaas_options('x required username=bare password="p w";') == {"username": "bare", "password": "p w"}


def test_oauthbearer_client_credentials_become_librdkafka_oidc() -> None:
    conf = librdkafka_config(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
            ),
            "sasl.oauthbearer.token.endpoint.url": "https://127.0.0.1:8443/token",
            "sasl.oauthbearer.jwks.endpoint.url": "https://127.0.0.1:8443/jwks",  # the broker's, not a client's
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'clientId="mirror" clientSecret="oauth-Secret" scope="kafka";'
            ),
        },
        role="consumer",
    )
    assert conf == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": "https://127.0.0.1:8443/token",
        "sasl.oauthbearer.client.id": "mirror",
        "sasl.oauthbearer.client.secret": "oauth-Secret",
        "sasl.oauthbearer.scope": "kafka",
    }
