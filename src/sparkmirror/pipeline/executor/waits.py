"""A task's waits on the target: each one bounded, each one saying what it waits for.

A task waits on the target for the steps of its transactions (``init_transactions``, the
progress, ``send_offsets_to_transaction``, ``commit_transaction``). Every such wait goes through
here: it has a deadline, it logs a warning every :data:`WARN_EVERY_S` seconds naming what it
waits for (flow, topic, partition, group, the target's brokers), and past the deadline it fails
the task with a retriable :class:`WriteError`. Spark then retries the task with new clients
(the failed ones are forgotten), and the batch is replayed if its retries fail too. The sink's
own waits (a full producer queue, the acknowledgements, the dead-letter topic's flush:
:mod:`.sink`) speak the same way, with the same interval and the helpers at the end of this module;
``delivery.timeout.ms`` and the flush limit bound them.

Why a thread for ``send_offsets_to_transaction``: librdkafka's call waits without a time limit in
the calling thread; its ``timeout`` is only looked at when the group's coordinator answers. When
that coordinator's broker drops out of the cluster's metadata (a broker killed: KRaft fences it
after ``broker.session.timeout.ms``), librdkafka (2.10 and later) retires the broker but keeps it
as the group's cached coordinator, and looks for a new coordinator only when some broker's
connection changes state (librdkafka issue #5511). With the other brokers' connections up,
nothing changes until the next periodic metadata refresh (``topic.metadata.refresh.interval.ms``,
5 minutes) learns of the restarted broker: the exactly-once broker-kill test saw a task wait like
this for minutes, silently (issue 14). So the call runs in a thread of its own, and while it does
not answer the producer's metadata is refreshed every :data:`NUDGE_EVERY_S` seconds (a broker
that came back is added, which makes librdkafka ask for the coordinator again) and the wait is
bounded. A call abandoned at the deadline keeps its thread until librdkafka answers it; its
producer is never used again.

What it must never do: take a call that did not answer for one that succeeded, or let a task
wait on the target for minutes without saying so.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from sparkmirror.pipeline.exceptions import WriteError

if TYPE_CHECKING:
    from confluent_kafka import Producer

log = logging.getLogger(__name__)

T = TypeVar("T")

#: A waiting task says what it waits for this often (seconds).
WARN_EVERY_S = 15.0
#: While ``send_offsets_to_transaction`` does not answer, the producer's metadata is refreshed this often.
NUDGE_EVERY_S = 5.0
#: Longest single attempt of a call that takes a timeout (librdkafka's own timeouts).
ATTEMPT_S = 60.0
#: Retries this soon after the first attempt are routine (a coordinator moving or loading): debug level.
QUIET_S = 10.0


def _retriable(exc: BaseException) -> bool:
    """Kafka says it may pass (coordinators moving or loading, timeouts, leaders changing)."""
    from confluent_kafka import KafkaError, KafkaException

    if not isinstance(exc, KafkaException) or not exc.args or not isinstance(exc.args[0], KafkaError):
        return False
    err = exc.args[0]
    if err.fatal() or err.txn_requires_abort():
        return False
    # A consumer's or producer's coordinator request reports these as not retriable, yet they pass
    # once the coordinator has moved or loaded (see kafka/retry.py).
    moving = {KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR}
    return bool(err.retriable()) or err.code() in moving


def _error_text(exc: BaseException) -> str:
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError):
        return f"{err.name()}: {err.str()}"
    return f"{type(exc).__name__}: {exc}"


def call_within(
    call: Callable[[], T],
    *,
    what: str,
    limit_s: float,
    detail: Callable[[], str] | None = None,
    nudge: Callable[[], None] | None = None,
    warn_every_s: float = WARN_EVERY_S,
    nudge_every_s: float = NUDGE_EVERY_S,
) -> T:
    """``call()`` in a thread of its own; its result, or its exception, within ``limit_s``.

    While it does not answer: ``nudge()`` every ``nudge_every_s``, a warning with ``detail()``
    every ``warn_every_s``. Past ``limit_s`` raises a retriable :class:`WriteError`; the call's
    thread is left to finish (or not) on its own, and the caller must not use its client again.
    """
    outcome: list[tuple[bool, object]] = []
    answered = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome.append((False, exc))
        finally:
            answered.set()

    started = time.monotonic()
    threading.Thread(target=run, name="sparkmirror-target-call", daemon=True).start()
    next_warning = started + warn_every_s
    next_nudge = started + nudge_every_s
    while True:
        now = time.monotonic()
        wake = min(next_warning, next_nudge if nudge is not None else next_warning, started + limit_s)
        if answered.wait(max(0.0, wake - now)):
            break
        now = time.monotonic()
        waited = now - started
        if nudge is not None and now >= next_nudge:
            try:
                nudge()
            except Exception as exc:  # noqa: BLE001 - only a help; the wait goes on and says so
                log.debug("%s: metadata refresh failed: %s", what, exc)
            next_nudge = time.monotonic() + nudge_every_s
        if answered.is_set():
            break
        about = _detail(detail)
        if waited >= limit_s:
            raise WriteError(
                f"{what}: no answer from the target within {limit_s:.0f}s{about}; "
                "the task fails and Spark writes its range again with new clients",
                terminal=False,
            )
        if now >= next_warning:
            log.warning("%s: no answer from the target for %.0fs (giving up at %.0fs)%s", what, waited, limit_s, about)
            next_warning += warn_every_s
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[return-value]
    raise value  # type: ignore[misc]


def retry_within(
    call: Callable[[float], T],
    *,
    what: str,
    limit_s: float,
    detail: Callable[[], str] | None = None,
    max_delay_s: float = 5.0,
    quiet_s: float = QUIET_S,
) -> T:
    """``call(seconds left)`` again while Kafka says its error may pass, for at most ``limit_s``.

    For librdkafka calls that keep their own timeout (``init_transactions``, ``committed``,
    ``commit_transaction``): each attempt gets at most :data:`ATTEMPT_S` of the time left. Every
    retry later than ``quiet_s`` after the first attempt is a warning naming the error (earlier
    ones are routine: debug); past ``limit_s`` raises a retriable :class:`WriteError`. An error
    Kafka does not call retriable is raised at once.
    """
    started = time.monotonic()
    deadline = started + limit_s
    delay = 0.2
    while True:
        left = deadline - time.monotonic()
        try:
            return call(max(1.0, min(ATTEMPT_S, left)))
        except Exception as exc:
            if not _retriable(exc):
                raise
            waited = time.monotonic() - started
            if time.monotonic() + delay >= deadline:
                raise WriteError(
                    f"{what}: the target did not answer within {limit_s:.0f}s (last: {_error_text(exc)})"
                    f"{_detail(detail)}; the task fails and Spark writes its range again with new clients",
                    terminal=False,
                ) from None
            log.log(
                logging.WARNING if waited >= quiet_s else logging.DEBUG,
                "%s: %s after %.0fs; trying again (giving up at %.0fs)%s",
                what,
                _error_text(exc),
                waited,
                limit_s,
                _detail(detail),
            )
        time.sleep(delay)
        delay = min(delay * 2, max_delay_s)


def _detail(detail: Callable[[], str] | None) -> str:
    if detail is None:
        return ""
    try:
        text = detail()
    except Exception as exc:  # noqa: BLE001 - the wait's own message must not fail
        text = f"(cannot describe: {exc})"
    return f"; {text}" if text else ""


def target_text(client: Producer, topic: str, partition: int | None = None) -> str:
    """What ``client`` knows of the target now: who leads ``topic[partition]`` (every partition of
    ``topic`` when None) and the brokers it lists.

    Asks for the topic's metadata (at most 5 s), which also adds brokers that came back; raises
    what ``list_topics`` raises.
    """
    md = client.list_topics(topic, timeout=5)
    where = topic_text(md, topic) if partition is None else partition_text(md, topic, partition)
    return f"{where}; brokers {brokers_text(md)}"


def brokers_text(metadata: object) -> str:
    """The brokers a client's metadata lists: ``1 (host:port), 2 (host:port)``."""
    brokers = getattr(metadata, "brokers", None) or {}
    return ", ".join(f"{b.id} ({b.host}:{b.port})" for _i, b in sorted(brokers.items())) or "none"


def partition_text(metadata: object, topic: str, partition: int) -> str:
    """Who leads ``topic[partition]`` according to a client's metadata, and its in-sync replicas."""
    topics = getattr(metadata, "topics", None) or {}
    tm = topics.get(topic)
    pm = tm.partitions.get(partition) if tm is not None and tm.partitions else None
    if pm is None:
        return f"{topic}[{partition}]: not in the target's metadata"
    if pm.error is not None or pm.leader < 0:
        return f"{topic}[{partition}]: no leader ({pm.error})"
    return f"{topic}[{partition}] leader broker {pm.leader}, in sync {sorted(pm.isrs)}"


def topic_text(metadata: object, topic: str, most: int = 5) -> str:
    """Who leads the first ``most`` partitions of ``topic`` according to a client's metadata."""
    topics = getattr(metadata, "topics", None) or {}
    tm = topics.get(topic)
    if tm is None or not tm.partitions:
        return f"{topic}: not in the target's metadata" + (f" ({tm.error})" if tm is not None and tm.error else "")
    partitions = sorted(tm.partitions)
    text = "; ".join(partition_text(metadata, topic, p) for p in partitions[:most])
    return text + (f"; and {len(partitions) - most} more partitions" if len(partitions) > most else "")
