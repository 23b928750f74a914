"""Authentication and authorization failures recognised in librdkafka's and Java's errors; the principal named."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from sparkmirror.kafka.access import AccessDenied, classify, denied, principal


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (
            'KafkaError{code=TOPIC_AUTHORIZATION_FAILED,val=29,str="Broker: Topic authorization failed"}',
            "authorization",
        ),
        ("KafkaError{code=GROUP_AUTHORIZATION_FAILED,val=30}", "authorization"),
        ('KafkaError{code=_AUTHENTICATION,val=-169,str="SASL authentication error"}', "authentication"),
        (
            "Caused by: org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed",
            "authentication",
        ),
        (
            "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access topics: [t]",
            "authorization",
        ),
        ("org.apache.kafka.common.errors.TransactionalIdAuthorizationException", "authorization"),
    ],
)
def test_access_failures_are_recognised(text: str, kind: str) -> None:
    found = classify(text)
    assert found is not None and found[0] == kind


@pytest.mark.parametrize("text", ["KafkaError{code=_TIMED_OUT}", "TimeoutException: broker down", ""])
def test_other_failures_are_not(text: str) -> None:
    assert classify(text) is None


def test_principal_from_sasl_settings_never_shows_the_password() -> None:
    conf = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "mirror",
            "sasl.password": "pw-Secret"}  # fmt: skip
    assert principal(conf) == "User:mirror"
    assert principal({"security.protocol": "PLAINTEXT"}) == "User:ANONYMOUS"
    oauth = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.client.id": "c1"}
    assert "client c1" in principal(oauth)


def test_principal_of_a_certificate_is_its_subject(tmp_path: Path) -> None:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mirror")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    chain = tmp_path / "chain.pem"
    chain.write_bytes(cert.public_bytes(Encoding.PEM))
    assert principal({"security.protocol": "SSL", "ssl.certificate.location": str(chain)}).startswith("User:CN=mirror")


def test_the_line_names_flow_cluster_principal_operation_and_exit_codes() -> None:
    err = denied("authorization", "TOPIC_AUTHORIZATION_FAILED", flow="A->B", cluster="B", who="User:app",
                 operation="create or alter the remote topics")  # fmt: skip
    assert str(err).startswith("flow=A->B cluster B refused User:app: not authorized to create or alter the remote")
    assert err.exit_code == 1
    auth = denied("authentication", "bad", flow="A->B", cluster="A", who="User:x", operation="describe the cluster")
    assert auth.exit_code == 2 and "authentication as User:x" in str(auth)
    again = pickle.loads(pickle.dumps(auth))
    assert isinstance(again, AccessDenied) and again.exit_code == 2 and str(again) == str(auth)
