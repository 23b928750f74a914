"""Waiting, when ``run`` starts, for every cluster the flows need to answer.

A cluster that is down at start is a normal event (both sites restart after a power cut, the
mirror's host comes up first): the run waits with back-off and says, at each attempt, which
cluster it waits for, at which address, for which flows, and for how long so far. It gives up only
after ``sparkmirror.startup.timeout.ms`` (default: never). Every failure to answer is waited for
(a cluster's DNS name may come up late too), and every attempt's line names the error, so a bad
setting is visible at once: it must never wait in silence. A cluster that refuses the credentials
stops the run at once (:class:`AccessDenied`, exit 2): waiting cannot fix it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sparkmirror.config.model import FlowConfig
from sparkmirror.errors import SparkMirrorError
from sparkmirror.kafka.access import AUTHENTICATION_CODES, AccessDenied, classify, denied, principal
from sparkmirror.kafka.factory import new_admin
from sparkmirror.kafka.flowclients import FlowClients

log = logging.getLogger(__name__)

#: Seconds between attempts (the last one repeats).
STARTUP_BACKOFF_S = (1, 2, 5, 10)
#: How long one attempt waits for an answer.
ATTEMPT_TIMEOUT_S = 5.0


class StartupTimeout(SparkMirrorError):
    """A cluster did not answer within ``sparkmirror.startup.timeout.ms``."""

    retriable = True


@dataclass
class _Cluster:
    alias: str
    bootstrap: str
    admin_config: dict[str, str]
    needed_by: list[str]


def _clusters(flows: Sequence[FlowConfig]) -> list[_Cluster]:
    out: dict[tuple[str, str], _Cluster] = {}
    for flow in flows:
        clients = FlowClients(flow)
        for alias, conf, role in (
            (flow.source, clients.source_admin_config, "source"),
            (flow.target, clients.target_admin_config, "target"),
        ):
            bootstrap = conf.get("bootstrap.servers", "")
            cluster = out.setdefault((alias, bootstrap), _Cluster(alias, bootstrap, dict(conf), []))
            cluster.needed_by.append(f"{flow.name} ({role})")
    return list(out.values())


def describe(admin_config: dict[str, str], timeout_s: float = ATTEMPT_TIMEOUT_S) -> str:
    """The cluster id, once the cluster answers; raises the client's error otherwise, and
    :class:`AccessDenied` when the cluster refuses the credentials (waiting cannot fix that)."""
    from confluent_kafka import KafkaError

    refused: list[str] = []

    def on_error(err: KafkaError) -> None:
        if err.name() in AUTHENTICATION_CODES:
            refused.append(err.str())

    admin = new_admin({**admin_config, "error_cb": on_error})  # type: ignore[dict-item]
    try:
        return str(admin.describe_cluster(request_timeout=timeout_s).result(timeout=timeout_s + 5).cluster_id)
    except Exception as exc:
        admin.poll(0)  # librdkafka hands errors to error_cb only when polled
        found = classify(str(exc)) or (("authentication", refused[0]) if refused else None)
        if found is not None:
            raise AccessDenied(f"{found[0]}: {found[1]}", authentication=found[0] == "authentication") from None
        raise


def wait_for_clusters(
    flows: Sequence[FlowConfig],
    *,
    timeout_ms: int,
    stop: threading.Event,
    probe: Callable[[dict[str, str]], str] = describe,
) -> bool:
    """Return once every cluster of ``flows`` answers (True), or when ``stop`` is set (False).

    ``timeout_ms < 0``: wait for ever. Raises :class:`StartupTimeout` naming the clusters that did
    not answer in time.
    """
    pending = _clusters(flows)
    started = time.monotonic()
    attempt = 0
    limit = "unlimited" if timeout_ms < 0 else f"{timeout_ms} ms"
    while pending:
        still: list[_Cluster] = []
        for cluster in pending:
            try:
                probe(cluster.admin_config)
            except AccessDenied as exc:
                kind = "authentication" if exc.authentication else "authorization"
                raise denied(
                    kind,
                    str(exc).split(": ", 1)[-1],
                    flow=None,
                    cluster=cluster.alias,
                    who=principal(cluster.admin_config),
                    operation="describe the cluster",
                ) from None
            except Exception as exc:  # noqa: BLE001 - any failure to answer is waited for, and said
                still.append(cluster)
                cluster_error = _first_line(exc)
                waited = time.monotonic() - started
                log.warning(
                    "waiting for cluster %s (%s), needed by flow %s, to answer: %s; waited %.0fs, next attempt "
                    "in %ds (sparkmirror.startup.timeout.ms = %s)",
                    cluster.alias,
                    cluster.bootstrap,
                    ", ".join(cluster.needed_by),
                    cluster_error,
                    waited,
                    STARTUP_BACKOFF_S[min(attempt, len(STARTUP_BACKOFF_S) - 1)],
                    limit,
                )
            else:
                if attempt:
                    log.info("cluster %s (%s) answers", cluster.alias, cluster.bootstrap)
        pending = still
        if not pending:
            return True
        waited_ms = (time.monotonic() - started) * 1000
        if 0 <= timeout_ms <= waited_ms:
            names = ", ".join(f"{c.alias} ({c.bootstrap})" for c in pending)
            raise StartupTimeout(
                f"cluster {names} did not answer within sparkmirror.startup.timeout.ms = {timeout_ms}; "
                "is it running and reachable from this host?"
            )
        delay: float = STARTUP_BACKOFF_S[min(attempt, len(STARTUP_BACKOFF_S) - 1)]
        if timeout_ms >= 0:
            delay = min(delay, max(0.1, (timeout_ms - waited_ms) / 1000))
        attempt += 1
        if stop.wait(delay):
            return False
    return True


def _first_line(exc: BaseException) -> str:
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError):  # its code and its reason
        return f"{err.name()}: {err.str()}"[:300]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0]}"[:300]
