"""mm2.properties texts that unit tests share, and a loader for them (no cluster is contacted)."""

from __future__ import annotations

from pathlib import Path

from sparkmirror.config import load_config
from sparkmirror.config.model import MirrorConfig

#: The smallest flow A->B (no cluster is contacted).
PLAIN_A_TO_B = """
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
"""

#: Flow A->B whose target B takes SASL PLAIN with a password that must never be shown.
SECURED_TARGET = """
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
B.sasl.mechanism = PLAIN
B.security.protocol = SASL_PLAINTEXT
B.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="s3cr3t-pw";
A.consumer.fetch.min.bytes = 1
"""


def load_props(tmp_path: Path, text: str) -> MirrorConfig:
    """``text`` written to ``tmp_path/mm2.properties`` and loaded."""
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    return load_config(path)
