"""Session-wide fixtures: real Kafka clusters A and B, started once.

Set SOURCE_BOOTSTRAP and TARGET_BOOTSTRAP to use clusters that already run;
otherwise the project's own dev-cluster code starts two on loopback.
"""

from __future__ import annotations

import os
import random
import socket
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from sparkmirror.devcluster.cluster import DevClusters

#: Attempts to start a test's clusters on fresh ports (start_clusters).
START_ATTEMPTS = 3


def _free_base_port(span: int = 40) -> int:
    for _ in range(200):
        base = random.randrange(20000, 32000 - span, 10)  # below the ephemeral range (32768+)
        ok = True
        for port in range(base, base + span):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port range on 127.0.0.1")


def start_clusters(clusters: DevClusters, aliases: list[str], **kwargs: Any) -> dict[str, str]:
    """``clusters.up(aliases, ...)`` on a fresh free port range, tried again on new ports when a
    broker exits during its start-up.

    The port range is checked free before the brokers are formatted and started, seconds later on
    a loaded host; a CI run once lost a module's every test to a broker that exited at start-up
    (its log was not in CI's output). Such a start is not what any test is about: the broker's log
    tail is kept as a warning (shown in pytest's summary) and the cluster started again elsewhere.
    Any other error, or a third failed start, fails the test as before.
    """
    from sparkmirror.errors import DevClusterError

    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return clusters.up(aliases, base_port=_free_base_port(), **kwargs)
        except DevClusterError as exc:
            if "exited during start-up" not in str(exc) or attempt == START_ATTEMPTS:
                raise
            warnings.warn(f"start {attempt} of clusters {aliases} failed, trying new ports: {exc}", stacklevel=2)
            clusters.down([a for a in aliases if a in clusters.status()], kill=True)
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def dev_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from sparkmirror.devcluster.cluster import DevClusters

    clusters = DevClusters(tmp_path_factory.mktemp("devclusters"))
    yield clusters
    clusters.down()


@pytest.fixture(scope="session")
def bootstraps(dev_clusters: object) -> dict[str, str]:
    """{"A": ..., "B": ...}: the source and target clusters."""
    src, tgt = os.environ.get("SOURCE_BOOTSTRAP"), os.environ.get("TARGET_BOOTSTRAP")
    if src and tgt:
        return {"A": src, "B": tgt}
    return start_clusters(dev_clusters, ["A", "B"])  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One embedded Spark session for in-process integration tests."""
    from sparkmirror.pipeline.session import build_session

    session = build_session("local[2]", {})
    yield session
    session.stop()


_TIERS = ("unit", "integration", "e2e")

_SESSION_START = time.monotonic()
#: The last test of each module, in run order (set once collected).
_LAST_IN_MODULE: set[str] = set()
#: The run's configuration (pytest_configure), for the hooks that get none.
_CONFIG: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG.append(config)


def _note_last_in_module(nodeids: list[str]) -> None:
    modules = [n.split("::")[0] for n in nodeids]
    following = [*modules[1:], ""]
    _LAST_IN_MODULE.update(n for n, m, f in zip(nodeids, modules, following, strict=True) if m != f)


def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """On two workers (``make test``) the controller collects nothing itself: each module's last test
    comes from the workers' collection."""
    _note_last_in_module(ids)


@pytest.hookimpl(trylast=True)  # after the terminal reporter has written the module's progress
def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    """End each module's line with the minutes since the run began: a run that CI stops at its time
    limit prints no --durations table, and this still tells where the time went. On two workers the
    progress is a line of dots, so a module's end gets a line of its own."""
    if nodeid not in _LAST_IN_MODULE or not _CONFIG or _CONFIG[0].get_verbosity() != 0:
        return
    reporter = _CONFIG[0].pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    minutes = f"{(time.monotonic() - _SESSION_START) / 60:.1f} min"
    if _CONFIG[0].pluginmanager.has_plugin("dsession"):  # xdist's controller
        reporter.write(f"\n{nodeid.split('::')[0]} done at {minutes}\n", flush=True)
    else:
        reporter.write(f" {minutes}", flush=True)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every tier asked for (directly, or through ``tests``) must collect tests.

    pytest already fails on "no tests collected"; this also fails when one
    tier silently loses its tests (a broken import path, a renamed folder).
    """
    root = Path(__file__).parent
    args = {Path(a.split("::")[0]).absolute() for a in config.args}
    requested = [t for t in _TIERS if root in args or root / t in args]
    counts = dict.fromkeys(requested, 0)
    for item in items:
        rel = Path(str(item.path)).relative_to(root)
        if rel.parts and rel.parts[0] in counts:
            counts[rel.parts[0]] += 1
    _note_last_in_module([i.nodeid for i in items])
    empty = [t for t, n in counts.items() if n == 0]
    if empty:
        raise pytest.UsageError(f"no tests collected in tests/{', tests/'.join(empty)}")


@pytest.fixture(scope="session")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """Clusters A and B with SASL_SSL (SCRAM and PLAIN over TLS) and ACLs; started only for the
    tests that ask for them (tests/secured_helpers.py)."""
    from secured_helpers import Secured
    from sparkmirror.devcluster.cluster import DevClusters

    clusters = DevClusters(tmp_path_factory.mktemp("secured"))
    bootstraps = start_clusters(clusters, ["A", "B"], security="sasl_ssl")
    yield Secured(clusters, "sasl_ssl", bootstraps)
    clusters.down()


@pytest.fixture(scope="session")
def mtls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One cluster M with mutual TLS (client certificates) and ACLs; started only for the tests that ask."""
    from secured_helpers import Secured
    from sparkmirror.devcluster.cluster import DevClusters

    clusters = DevClusters(tmp_path_factory.mktemp("mtls"))
    bootstraps = start_clusters(clusters, ["M"], security="ssl")
    yield Secured(clusters, "ssl", bootstraps)
    clusters.down()
