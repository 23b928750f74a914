"""py4j's debug lines never print a call's arguments (the writers' plans hold client secrets), also at -vvv."""

from __future__ import annotations

import logging

import pytest

from sparkmirror.cli.main import _setup_logging


def test_py4j_call_arguments_are_not_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    _setup_logging(3)
    with caplog.at_level(logging.DEBUG):
        for name in ("py4j.clientserver", "py4j.java_gateway"):
            logging.getLogger(name).debug('Command to send: c\nz:x\ncopy\ns{"sasl.jaas.config": "pw"}')
            logging.getLogger(name).debug("Answer received: !yspw")
            logging.getLogger(name).debug("Python Server ready to receive messages")
    text = caplog.text
    assert "pw" not in text
    assert text.count("Python Server ready") == 2
