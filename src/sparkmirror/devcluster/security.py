"""Secured local clusters: a CA, certificates, stores, users and the brokers' security settings.

``DevClusters.up(..., security="sasl_ssl" | "ssl")`` asks this module for everything a secured
cluster needs, kept in ``<dev dir>/security/`` and shared by every cluster of that directory
(one CA, so one trust store serves A and B):

- ``ca.pem`` (the CA), ``truststore.jks`` and ``truststore.p12`` (the same CA, made by Java's
  keytool so that they are genuine Java stores);
- the brokers' key store (``broker.p12``) for ``CN=broker`` with the names ``localhost`` and
  ``127.0.0.1`` (host name verification stays on);
- per user (``mirror``, ``app``) a client certificate in ``<user>.p12``, ``<user>.jks`` and
  ``<user>-key.pem`` (PKCS8, encrypted with the store password) + ``<user>-chain.pem``;
- ``credentials.properties`` (mode 0600): ``store.password`` and ``<user>.password``, the file
  that ``dev up`` points the printed settings at (``${file:...}``, MM2's config provider).

Users: ``broker`` (the brokers to each other) and ``mirror`` are super users; ``app`` has no ACL,
so the ``StandardAuthorizer`` refuses it whatever it asks. SCRAM-SHA-512 and SCRAM-SHA-256
credentials are added when the storage is formatted (``--add-scram``, through a Java argument
file so that no password is on a command line); PLAIN users live in the broker's (0600)
properties. Development only: the passwords are random per directory, but they sit in files.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sparkmirror.config.properties import parse_properties
from sparkmirror.errors import DevClusterError

__all__ = ["SECURITY_MODES", "SecurityMaterial", "USERS"]

#: What ``dev up --security`` accepts.
SECURITY_MODES = ("plaintext", "ssl", "sasl_ssl")
#: Client users besides ``broker``: ``mirror`` (a super user) and ``app`` (no rights).
USERS = ("mirror", "app")
SUPER_USERS = ("broker", "mirror")
_SCRAM = ("SCRAM-SHA-512", "SCRAM-SHA-256")
_PRINCIPAL_RULES = "RULE:^CN=([^,]*)$/$1/,DEFAULT"


def _write_private(path: Path, data: bytes | str) -> None:
    raw = data.encode() if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(raw)


@dataclass(frozen=True)
class SecurityMaterial:
    """The files of ``<dev dir>/security`` and the passwords in ``credentials.properties``."""

    directory: Path

    @classmethod
    def ensure(cls, dev_dir: Path) -> SecurityMaterial:
        """The material below ``dev_dir``, made on first use."""
        material = cls(Path(dev_dir) / "security")
        if not material.credentials_file.exists():
            material._make()
        return material

    # -- files ------------------------------------------------------------------------------------
    @property
    def credentials_file(self) -> Path:
        return self.directory / "credentials.properties"

    @property
    def oauth_port_file(self) -> Path:
        return self.directory / "oauth.port"

    def oauth_url(self, path: str) -> str:
        """``token`` or ``jwks``: the URL of the dev token endpoint (its port is chosen once)."""
        return f"http://127.0.0.1:{self.oauth_port_file.read_text().strip()}/{path}"

    def jvm_options(self) -> list[str]:
        """System properties a JVM needs to use the dev token endpoint (Kafka 4 refuses other URLs)."""
        if not self.oauth_port_file.exists():
            return []
        urls = ",".join(self.oauth_url(p) for p in ("token", "jwks"))
        return [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={urls}"]

    @property
    def ca_pem(self) -> Path:
        return self.directory / "ca.pem"

    def truststore(self, kind: str = "JKS") -> Path:
        return self.directory / ("truststore.jks" if kind.upper() == "JKS" else "truststore.p12")

    def keystore(self, user: str, kind: str = "JKS") -> Path:
        ext = {"JKS": "jks", "PKCS12": "p12"}[kind.upper()]
        return self.directory / f"{user}.{ext}"

    def key_pem(self, user: str) -> Path:
        return self.directory / f"{user}-key.pem"

    def chain_pem(self, user: str) -> Path:
        return self.directory / f"{user}-chain.pem"

    def _credentials(self) -> dict[str, str]:
        return parse_properties(self.credentials_file.read_text(), source=str(self.credentials_file))

    def password(self, user: str) -> str:
        """``user``'s SASL password (``store`` for the stores' password)."""
        return self._credentials()[f"{user}.password"]

    # -- making -----------------------------------------------------------------------------------
    def _make(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.hazmat.primitives.serialization import (
            BestAvailableEncryption,
            Encoding,
            PrivateFormat,
            pkcs12,
        )
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        passwords = {u: secrets.token_urlsafe(18) for u in ("store", "broker", *USERS)}
        store_pw = passwords["store"].encode()
        now = datetime.datetime.now(datetime.UTC)
        valid = (now - datetime.timedelta(days=1), now + datetime.timedelta(days=365))

        ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sparkmirror dev CA")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(valid[0])
            .not_valid_after(valid[1])
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        self.ca_pem.write_bytes(ca.public_bytes(Encoding.PEM))

        for user in ("broker", *USERS):
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            builder = (
                x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user)]))
                .issuer_name(ca_name)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(valid[0])
                .not_valid_after(valid[1])
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(
                    x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                    critical=False,
                )
            )
            if user == "broker":
                builder = builder.add_extension(
                    x509.SubjectAlternativeName(
                        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                    ),
                    critical=False,
                )
            cert = builder.sign(ca_key, hashes.SHA256())
            p12 = pkcs12.serialize_key_and_certificates(
                user.encode(), key, cert, [ca], BestAvailableEncryption(store_pw)
            )
            _write_private(self.directory / f"{user}.p12", p12)
            _write_private(
                self.key_pem(user),
                key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(store_pw)),
            )
            self.chain_pem(user).write_bytes(cert.public_bytes(Encoding.PEM) + ca.public_bytes(Encoding.PEM))

        self._keytool(passwords["store"])
        _write_private(self.credentials_file, "".join(f"{u}.password={p}\n" for u, p in passwords.items()))

    def _keytool(self, store_password: str) -> None:
        """Java stores made by Java: the CA trust stores, and JKS copies of the users' key stores."""
        keytool = shutil.which("keytool")
        if keytool is None:
            raise DevClusterError("keytool (Java 17+) is not on PATH; secured dev clusters need it for JKS stores")
        env = {**os.environ, "SPARKMIRROR_STOREPASS": store_password}
        commands = [
            [keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", str(self.ca_pem),
             "-keystore", str(self.truststore(kind)), "-storetype", kind, "-storepass:env", "SPARKMIRROR_STOREPASS"]
            for kind in ("JKS", "PKCS12")
        ]  # fmt: skip
        for user in USERS:
            commands.append(
                [keytool, "-importkeystore", "-noprompt",
                 "-srckeystore", str(self.directory / f"{user}.p12"), "-srcstoretype", "PKCS12",
                 "-srcstorepass:env", "SPARKMIRROR_STOREPASS",
                 "-destkeystore", str(self.keystore(user, "JKS")), "-deststoretype", "JKS",
                 "-deststorepass:env", "SPARKMIRROR_STOREPASS"]
            )  # fmt: skip
        for cmd in commands:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
            if proc.returncode != 0:
                store = cmd[cmd.index("-keystore" if "-keystore" in cmd else "-destkeystore") + 1]
                raise DevClusterError(f"keytool failed making {store}: {proc.stderr[-500:]}")

    # -- brokers ----------------------------------------------------------------------------------
    def broker_properties(self, security: str, port: int, controller_port: int) -> dict[str, str]:
        """The security part of a broker's ``server.properties`` (it holds passwords: keep it 0600)."""
        listener = security.upper()
        store_pw = self.password("store")
        props = {
            "listeners": f"{listener}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"{listener}://127.0.0.1:{port}",
            "inter.broker.listener.name": listener,
            "listener.security.protocol.map": f"{listener}:{listener},CONTROLLER:SSL",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.directory / "broker.p12"),
            "ssl.keystore.password": store_pw,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_pem),
            "ssl.principal.mapping.rules": _PRINCIPAL_RULES,
            # The controllers and brokers know each other by their certificates.
            "listener.name.controller.ssl.client.auth": "required",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": ";".join(f"User:{u}" for u in SUPER_USERS),
            "allow.everyone.if.no.acl.found": "false",
        }
        if security == "ssl":
            props["listener.name.ssl.ssl.client.auth"] = "required"
            return props
        users = " ".join(f'user_{u}="{self.password(u)}"' for u in ("broker", *USERS))
        oauth = {}
        if self.oauth_port_file.exists():
            # OAUTHBEARER: tokens from the dev token endpoint, validated with its JWKS.
            handler = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
            oauth = {
                "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": (
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
                ),
                "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": handler,
                "sasl.oauthbearer.jwks.endpoint.url": self.oauth_url("jwks"),
                "sasl.oauthbearer.expected.audience": "kafka",
                "sasl.oauthbearer.expected.issuer": "sparkmirror-dev",
            }
        broker_pw = self.password("broker")
        props.update(
            {
                "sasl.enabled.mechanisms": ",".join([*_SCRAM, "PLAIN", *(["OAUTHBEARER"] if oauth else [])]),
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "listener.name.sasl_ssl.plain.sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="broker" password="{broker_pw}" {users};'
                ),
                **{
                    f"listener.name.sasl_ssl.{m.lower()}.sasl.jaas.config": (
                        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                    )
                    for m in _SCRAM
                },
                **oauth,
            }
        )
        return props

    def format_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments adding the SCRAM users (they hold passwords)."""
        args = []
        for mechanism in _SCRAM:
            for user in ("broker", *USERS):
                args += ["--add-scram", f"{mechanism}=[name={user},password={self.password(user)}]"]
        return args

    # -- clients ----------------------------------------------------------------------------------
    def client_properties(
        self, security: str, user: str = "mirror", *, mechanism: str = "SCRAM-SHA-512", store: str = "JKS",
        reference: bool = False,
    ) -> dict[str, str]:  # fmt: skip
        """Java client settings (MM2 keys) for ``user``; ``reference``: passwords as
        ``${file:<credentials>:<user>.password}`` (needs ``config.providers = file``)."""

        def pw(name: str) -> str:
            return f"${{file:{self.credentials_file}:{name}.password}}" if reference else self.password(name)

        props = {
            "security.protocol": security.upper(),
            "ssl.truststore.type": store,
            "ssl.truststore.location": str(self.truststore(store)) if store != "PEM" else str(self.ca_pem),
        }
        if store != "PEM":
            props["ssl.truststore.password"] = pw("store")
        if security == "ssl":
            if store == "PEM":
                props.update(
                    {
                        "ssl.keystore.type": "PEM",
                        "ssl.keystore.key": self.key_pem(user).read_text(),
                        "ssl.keystore.certificate.chain": self.chain_pem(user).read_text(),
                        "ssl.key.password": pw("store"),
                    }
                )
            else:
                props.update(
                    {
                        "ssl.keystore.type": store,
                        "ssl.keystore.location": str(self.keystore(user, store)),
                        "ssl.keystore.password": pw("store"),
                    }
                )
            return props
        props["sasl.mechanism"] = mechanism
        if mechanism == "OAUTHBEARER":
            props["sasl.login.callback.handler.class"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
            )
            props["sasl.oauthbearer.token.endpoint.url"] = self.oauth_url("token")
            props["sasl.jaas.config"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                f'clientId="{user}" clientSecret="{pw(user)}" scope="kafka";'
            )
            return props
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        props["sasl.jaas.config"] = (
            f'org.apache.kafka.common.security.{module} required username="{user}" password="{pw(user)}";'
        )
        return props

    def librdkafka_settings(self, security: str, user: str = "mirror") -> dict[str, str]:
        """confluent-kafka settings for ``user`` (the dev cluster's own readiness check, tests)."""
        conf = {"security.protocol": security.upper(), "ssl.ca.location": str(self.ca_pem)}
        if security == "ssl":
            conf.update(
                {
                    "ssl.key.location": str(self.key_pem(user)),
                    "ssl.key.password": self.password("store"),
                    "ssl.certificate.location": str(self.chain_pem(user)),
                }
            )
        else:
            conf.update(
                {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": self.password(user)}
            )
        return conf


def check_mode(security: str) -> str:
    mode = security.lower()
    if mode not in SECURITY_MODES:
        raise DevClusterError(f"--security must be one of {', '.join(SECURITY_MODES)}, got {security!r}")
    return mode


def mm2_lines(material: SecurityMaterial, security: str, bootstraps: Mapping[str, str]) -> list[str]:
    """``mm2.properties`` lines for the clusters, passwords through MM2's file config provider."""
    lines = [
        "config.providers = file",
        "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider",
    ]
    props = material.client_properties(security, reference=True)
    for alias, bootstrap in bootstraps.items():
        lines.append(f"{alias}.bootstrap.servers = {bootstrap}")
        lines += [f"{alias}.{k} = {v}" for k, v in props.items()]
    return lines
