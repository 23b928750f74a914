"""A local OAuth 2 token endpoint for the secured dev clusters (OAUTHBEARER, OIDC client credentials).

``POST /token`` takes the client credentials grant (client id and secret in an HTTP Basic header,
as Kafka's Java client and librdkafka send them, or in the form) and returns a JWT signed with
RS256; ``GET /jwks`` publishes the public key, which the brokers' ``OAuthBearerValidatorCallbackHandler``
fetches (``sasl.oauthbearer.jwks.endpoint.url``) to validate tokens. The clients are the dev
clusters' users, their secrets the users' passwords (``credentials.properties``); a token's
``sub`` is the client id, so the principal is ``User:<client id>`` as with SCRAM.

It runs as its own small process (``python -m sparkmirror.devcluster.oauth <security dir>
<port>``), started by ``DevClusters.up`` before secured brokers and stopped by ``down``. Loopback
only; development and tests only. It never logs a request's credentials or a token.
"""

from __future__ import annotations

import base64
import json
import logging
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["AUDIENCE", "ISSUER", "TokenIssuer", "serve"]

ISSUER = "sparkmirror-dev"
AUDIENCE = "kafka"
TOKEN_LIFETIME_S = 3600
_KID = "sparkmirror-dev-1"

log = logging.getLogger(__name__)


class TokenIssuer:
    """Signs tokens for known clients with the directory's RSA key (made on first use, 0600)."""

    def __init__(self, directory: Path, clients: dict[str, str]) -> None:
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
            load_pem_private_key,
        )

        key_file = directory / "oauth-signing-key.pem"
        if key_file.exists():
            key = load_pem_private_key(key_file.read_bytes(), None)
        else:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
            key_file.touch(mode=0o600)
            key_file.write_bytes(pem)
        assert isinstance(key, rsa.RSAPrivateKey)
        self._key = key
        self._clients = dict(clients)

    def jwks(self) -> dict[str, object]:
        numbers = self._key.public_key().public_numbers()

        def b64(n: int) -> str:
            raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
            return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

        return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": _KID, "n": b64(numbers.n),
                          "e": b64(numbers.e)}]}  # fmt: skip

    def token(self, client_id: str, client_secret: str, scope: str) -> str | None:
        """A signed access token for a known client with the right secret; None otherwise."""
        import jwt

        if self._clients.get(client_id) != client_secret:
            return None
        now = int(time.time())
        claims = {"sub": client_id, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "nbf": now,
                  "exp": now + TOKEN_LIFETIME_S, "scope": scope or "kafka"}  # fmt: skip
        return jwt.encode(claims, self._key, algorithm="RS256", headers={"kid": _KID})


def _handler(issuer: TokenIssuer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            log.debug("oauth %s %s", self.command, self.path)  # never the headers or the body

        def _reply(self, status: int, body: dict[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.split("?")[0] == "/jwks":
                self._reply(200, issuer.jwks())
            else:
                self._reply(404, {"error": "not_found"})

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            if self.path.split("?")[0] != "/token":
                self._reply(404, {"error": "not_found"})
                return
            length = int(self.headers.get("Content-Length", "0") or 0)
            form = urllib.parse.parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
            client_id = form.get("client_id", [""])[0]
            secret = form.get("client_secret", [""])[0]
            auth = self.headers.get("Authorization", "")
            if auth.lower().startswith("basic "):
                decoded = base64.b64decode(auth[6:].strip()).decode()
                user, _, password = decoded.partition(":")
                client_id, secret = urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(password)
            if form.get("grant_type", [""])[0] != "client_credentials":
                self._reply(400, {"error": "unsupported_grant_type"})
                return
            token = issuer.token(client_id, secret, form.get("scope", [""])[0])
            if token is None:
                self._reply(401, {"error": "invalid_client"})
                return
            self._reply(
                200,
                {"access_token": token, "token_type": "Bearer", "expires_in": TOKEN_LIFETIME_S,
                 "scope": form.get("scope", ["kafka"])[0] or "kafka"},
            )  # fmt: skip

    return Handler


def serve(directory: Path, port: int) -> ThreadingHTTPServer:
    """The token endpoint on 127.0.0.1:``port`` for the users of ``directory`` (not yet serving)."""
    from sparkmirror.devcluster.security import SecurityMaterial

    material = SecurityMaterial(directory)
    clients = {user: material.password(user) for user in ("broker", "mirror", "app")}
    return ThreadingHTTPServer(("127.0.0.1", port), _handler(TokenIssuer(directory, clients)))


def main(argv: list[str]) -> None:
    directory, port = Path(argv[0]), int(argv[1])
    server = serve(directory, port)
    (directory / "oauth.ready").write_text(str(port))
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
