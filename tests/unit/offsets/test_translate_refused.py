"""translate: a source that refuses our credentials is said, not taken for a source that is down."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sparkmirror.kafka.access import AccessDenied
from sparkmirror.offsets.translate import _raise_if_refused


class _Admin:
    def list_topics(self, timeout: float) -> None:
        raise RuntimeError("KafkaError{code=_TRANSPORT}")


def _clients(failure: tuple[str, str] | None) -> SimpleNamespace:
    return SimpleNamespace(
        source_admin=_Admin(),
        authentication_failure=lambda: failure,
        flow=SimpleNamespace(name="A->B", source="A"),
        source_admin_config={"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "mirror"},
    )


def test_a_refused_login_on_the_source_is_an_authentication_error() -> None:
    with pytest.raises(AccessDenied, match="flow=A->B cluster A refused authentication as User:mirror") as err:
        _raise_if_refused(_clients(("source", "invalid credentials")))  # type: ignore[arg-type]
    assert err.value.exit_code == 2


def test_a_source_that_is_down_falls_back_to_checkpoints() -> None:
    _raise_if_refused(_clients(None))  # type: ignore[arg-type]  # returns: the caller uses checkpoints
