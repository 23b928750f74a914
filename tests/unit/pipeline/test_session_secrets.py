"""Secret Spark settings never reach spark-submit's command line: they go through a 0600 properties file."""

from __future__ import annotations

import stat
from collections.abc import Iterator

import pytest

from sparkmirror.config.properties import parse_properties
from sparkmirror.kafka import stores
from sparkmirror.pipeline.session import _write_properties, split_secret_settings


@pytest.fixture(autouse=True)
def _fresh_private_dir() -> Iterator[None]:
    stores.cleanup()
    yield
    stores.cleanup()


def test_cloud_storage_keys_are_secret_and_the_rest_is_not() -> None:
    public, secret = split_secret_settings(
        {
            "spark.hadoop.fs.s3a.access.key": "AKIA-x",
            "spark.hadoop.fs.s3a.secret.key": "s3-Secret",
            "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net": "az-Secret",
            "spark.authenticate.secret": "spark-Secret",
            "spark.driver.memory": "2g",
            "spark.jars": "/a.jar",
        }
    )
    assert public == {"spark.driver.memory": "2g", "spark.jars": "/a.jar"}
    assert set(secret) == {
        "spark.hadoop.fs.s3a.access.key",
        "spark.hadoop.fs.s3a.secret.key",
        "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net",
        "spark.authenticate.secret",
    }


def test_the_properties_file_is_private_and_reads_back_exactly() -> None:
    values = {"spark.hadoop.fs.s3a.secret.key": " a=b:c#d!e\\f\ng", "spark.authenticate.secret": "plain"}
    path = _write_properties(values)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert parse_properties(path.read_text(), source=str(path)) == values
