"""The dev token endpoint: client credentials in, an RS256 JWT out that its JWKS verifies."""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import jwt
import pytest

from sparkmirror.devcluster.oauth import AUDIENCE, ISSUER, TokenIssuer, _handler

SECRET = "cl1ent-Secret"


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(TokenIssuer(tmp_path, {"mirror": SECRET})))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _token_request(url: str, client: str, secret: str) -> urllib.request.Request:
    basic = base64.b64encode(f"{client}:{secret}".encode()).decode()
    return urllib.request.Request(
        f"{url}/token",
        data=b"grant_type=client_credentials&scope=kafka",
        headers={"Authorization": f"Basic {basic}", "Content-Type": "application/x-www-form-urlencoded"},
    )


def test_a_known_client_gets_a_token_the_jwks_verifies(endpoint: str) -> None:
    with urllib.request.urlopen(_token_request(endpoint, "mirror", SECRET)) as resp:
        body = json.load(resp)
    assert body["token_type"] == "Bearer" and body["expires_in"] > 0
    with urllib.request.urlopen(f"{endpoint}/jwks") as resp:
        jwks = json.load(resp)
    key = jwt.PyJWK(jwks["keys"][0]).key
    claims = jwt.decode(body["access_token"], key, algorithms=["RS256"], audience=AUDIENCE, issuer=ISSUER)
    assert claims["sub"] == "mirror" and claims["scope"] == "kafka"


def test_a_wrong_secret_is_refused(endpoint: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(_token_request(endpoint, "mirror", "nope"))
    assert err.value.code == 401


def test_the_signing_key_is_kept_private_and_reused(tmp_path: Path) -> None:
    first = TokenIssuer(tmp_path, {}).jwks()
    assert (tmp_path / "oauth-signing-key.pem").stat().st_mode & 0o777 == 0o600
    assert TokenIssuer(tmp_path, {}).jwks() == first
