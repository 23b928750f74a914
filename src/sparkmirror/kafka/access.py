"""A cluster that refuses who we are or what we ask: recognised, and said in one line.

Authentication failures (wrong password, unknown user, refused certificate) and authorization
failures (a missing ACL) are not transient: retrying hides them behind back-off messages. This
module recognises them in librdkafka's errors and in the Java client's exceptions (those of
Spark's Kafka source, which the copy no longer reads with: its clients are librdkafka's), names
the principal a client authenticates as (from its settings, never showing a secret), and builds
the :class:`AccessDenied` error that stops a flow.

Exit codes: an authentication failure is a configuration error (2: the credentials or stores
in the file are wrong); an authorization failure is a runtime error (1: the cluster's ACLs must
change, the file may be right).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sparkmirror.errors import SparkMirrorError

__all__ = ["AUTHENTICATION_CODES", "AUTHORIZATION_CODES", "AccessDenied", "classify", "principal"]

#: librdkafka error names of an authentication failure.
AUTHENTICATION_CODES = frozenset({"_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED"})
#: librdkafka (Kafka protocol) error names of an authorization failure.
AUTHORIZATION_CODES = frozenset(
    {
        "TOPIC_AUTHORIZATION_FAILED",
        "GROUP_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
    }
)

_JAVA_AUTHENTICATION = re.compile(r"\b(Sasl|Ssl)?AuthenticationException\b:?\s*([^\n]*)")
_JAVA_AUTHORIZATION = re.compile(r"\b(Topic|Group|Cluster|TransactionalId)AuthorizationException\b:?\s*([^\n]*)")
_CODE = re.compile(r"\b(_AUTHENTICATION|SASL_AUTHENTICATION_FAILED|[A-Z_]+_AUTHORIZATION_FAILED)\b")


class AccessDenied(SparkMirrorError):
    """A cluster refused the principal (authentication) or an operation (authorization). Terminal."""

    def __init__(self, message: str, *, authentication: bool) -> None:
        super().__init__(message)
        self.authentication = authentication
        self.exit_code = 2 if authentication else 1

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (str(self.args[0]), self.authentication))


def _rebuild(message: str, authentication: bool) -> AccessDenied:
    return AccessDenied(message, authentication=authentication)


def classify(text: str) -> tuple[str, str] | None:
    """``("authentication" | "authorization", what the error says)`` when ``text`` (an error's
    text: librdkafka's or a Java stack trace) is an access failure; None otherwise."""
    m = _JAVA_AUTHENTICATION.search(text)
    if m:
        return "authentication", _short(m.group(2)) or "authentication failed"
    m = _JAVA_AUTHORIZATION.search(text)
    if m:
        return "authorization", _short(m.group(2)) or f"{m.group(1)} authorization failed"
    m = _CODE.search(text)
    if m:
        kind = "authorization" if m.group(1) in AUTHORIZATION_CODES else "authentication"
        return kind, m.group(1)
    return None


def _short(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()[:200]


def principal(conf: Mapping[str, str]) -> str:
    """Who a librdkafka client with settings ``conf`` authenticates as, as the broker would name it
    by default: ``User:<sasl username>``, ``User:<certificate subject>``, or ``User:ANONYMOUS``."""
    protocol = conf.get("security.protocol", "PLAINTEXT").upper()
    if protocol.startswith("SASL"):
        mechanism = conf.get("sasl.mechanism", conf.get("sasl.mechanisms", "GSSAPI")).upper()
        if mechanism == "OAUTHBEARER":
            client_id = conf.get("sasl.oauthbearer.client.id")
            return f"the OAUTHBEARER token of client {client_id}" if client_id else "an OAUTHBEARER token"
        user = conf.get("sasl.username")
        return f"User:{user}" if user else f"a {mechanism} principal"
    if protocol == "SSL" and conf.get("ssl.certificate.location"):
        try:
            from cryptography import x509

            with open(conf["ssl.certificate.location"], "rb") as fh:
                cert = x509.load_pem_x509_certificates(fh.read())[0]
            return f"User:{cert.subject.rfc4514_string()} (certificate subject)"
        except (OSError, ValueError, IndexError):
            return "the client certificate's principal"
    return "User:ANONYMOUS"


def denied(kind: str, detail: str, *, flow: str | None, cluster: str, who: str, operation: str) -> AccessDenied:
    """The one line that stops a flow (or a command: ``flow`` None)."""
    prefix = f"flow={flow} " if flow else ""
    if kind == "authentication":
        message = (
            f"{prefix}cluster {cluster} refused authentication as {who} ({detail}) while trying to "
            f"{operation}; check the credentials and stores of cluster {cluster} in the configuration"
        )
    else:
        message = (
            f"{prefix}cluster {cluster} refused {who}: not authorized to {operation} ({detail}); "
            f"grant the ACLs in docs/security.md on cluster {cluster}"
        )
    return AccessDenied(message, authentication=kind == "authentication")
