"""A task's waits on the target: each one bounded, each one saying what it waits for.

A task waits on the target for its progress (reading it; at least once, committing it) and,
exactly once, for the steps of its transactions (``init_transactions``, ``send_offsets_to_transaction``,
``commit_transaction``). Every such wait goes through
here: it has a deadline, it logs a warning every :data:`WARN_EVERY_S` seconds naming what it
waits for (flow, topic, partition, group, the target's brokers), and past the deadline it fails
the task with a retriable :class:`WriteError`. Spark then retries the task with new clients
(the failed ones are forgotten) from the progress on the target; if its retries fail too, the job
fails and the supervisor starts a new one, also from the progress on the target. The sink's
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

The refresh does not always help: after the whole target was down (every broker SIGKILLed, started
again 30 s later) a call went on waiting with every broker back in the producer's metadata. So a
call that has not answered for :data:`PROBE_AFTER_S` is also checked against another client: a
``probe`` asks the same group's coordinator through it (exactly-once: a consumer of the progress
group made for each probe, whose ``committed()`` looks for the coordinator anew; the task's own
progress consumer, asked until session 45, waited on the old coordinator as long as the producer,
so such a wait ran to its limit). If the coordinator has answered at every probe for
:data:`PROBE_CONFIRM_S` while the call still does not, the wait is librdkafka's, not Kafka's (a
call that began before an outage had that long to reconnect), and the task fails at once with the
same retriable error as at the deadline (the retry's ``init_transactions`` fences the stuck
producer and aborts its transaction). :data:`PROBE_AFTER_S` lies above the longest wait seen from
a busy but healthy transaction coordinator (28 s writing the first commit's markers on 1,000
fresh partitions, docs/performance.md), so a slow Kafka costs at most one needless retry, never a
duplicate.

A producer that reported losing every broker of the target (``_ALL_BROKERS_DOWN``, to its
``error_cb``: :class:`~sparkmirror.kafka.factory.BrokersWatch`) is not given the call at all: the
finish fails the task before it, and again before the commit (``commit._fail_if_brokers_lost``), the
same retriable failure as a stuck call's, 40 s sooner.

What it must never do: take a call that did not answer for one that succeeded, fail a call that
answered, or let a task wait on the target for minutes without saying so.
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
#: Longest single attempt of a call that takes a timeout (librdkafka's own timeouts): no longer than
#: the warning interval, so a call that blocks (``commit_transaction`` flushing what the group
#: produced to a slow target) times out and says so before the next warning is due. After a timeout
#: ``init_transactions`` and ``commit_transaction`` resume where they were and ``committed()`` is
#: only asked again; ``send_offsets_to_transaction`` does not resume, and its caller gives it more.
ATTEMPT_S = WARN_EVERY_S
#: Retries this soon after the first attempt are routine (a coordinator moving or loading): debug level.
QUIET_S = 10.0
#: A call that has not answered for this long is checked against another client (``probe``): past the
#: longest wait a busy but healthy coordinator caused here (28 s, docs/performance.md).
PROBE_AFTER_S = 30.0
#: ... and the other client must have had its answers for this long, with none missed, while the call
#: still has none: a call that began before an outage gets the time to reconnect once the target is back.
PROBE_CONFIRM_S = 10.0
#: A probe's own request waits at most this long (it runs in the waiting thread, between warnings).
PROBE_TIMEOUT_S = 5.0


def _retriable(exc: BaseException) -> bool:
    """Kafka says it may pass (coordinators moving or loading, timeouts, leaders changing)."""
    from confluent_kafka import KafkaError, KafkaException

    if not isinstance(exc, KafkaException) or not exc.args or not isinstance(exc.args[0], KafkaError):
        return False
    err = exc.args[0]
    if err.fatal() or err.txn_requires_abort():
        return False
    # A consumer's or producer's coordinator request reports these as not retriable, yet they pass
    # once the coordinator has moved or loaded (see kafka/retry.py). A timed-out attempt too: the
    # consumer's ``committed()`` raises it without the retriable flag, and each attempt is cut to
    # :data:`ATTEMPT_S` so that the wait is said; the caller's limit still bounds the whole wait.
    moving = {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError._TIMED_OUT,
    }
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
    probe: Callable[[float], str | None] | None = None,
    warn_every_s: float = WARN_EVERY_S,
    nudge_every_s: float = NUDGE_EVERY_S,
    probe_after_s: float = PROBE_AFTER_S,
    probe_confirm_s: float = PROBE_CONFIRM_S,
) -> T:
    """``call()`` in a thread of its own; its result, or its exception, within ``limit_s``.

    While it does not answer: ``nudge()`` every ``nudge_every_s``, a warning with ``detail()``
    every ``warn_every_s``. Past ``limit_s`` raises a retriable :class:`WriteError`; the call's
    thread is left to finish (or not) on its own, and the caller must not use its client again.

    Once the call has waited ``probe_after_s``, ``probe(seconds)`` is asked right after each nudge
    (so no more often): it asks what the call waits for through another client, within
    ``seconds``, and returns what answered (a phrase for the log) or ``None``. Answers at every
    probe for ``probe_confirm_s`` while the call still has none mean the call is stuck in its
    client: the same retriable :class:`WriteError`, at once. A probe that fails or has no answer
    proves nothing (and starts that span again); a call that answered is returned, whatever the
    probe said.
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
    deadline = started + limit_s
    next_warning = started + warn_every_s
    periodic = nudge is not None or probe is not None
    next_nudge = started + nudge_every_s
    answering_since: float | None = None  # the probe has had answers since then, none missed
    while True:
        now = time.monotonic()
        wake = min(next_warning, next_nudge if periodic else next_warning, deadline)
        if answered.wait(max(0.0, wake - now)):
            break
        now = time.monotonic()
        other_answered: str | None = None
        if periodic and now >= next_nudge:
            if nudge is not None:
                try:
                    nudge()
                except Exception as exc:  # noqa: BLE001 - only a help; the wait goes on and says so
                    log.debug("%s: metadata refresh failed: %s", what, exc)
            if probe is not None and time.monotonic() - started >= probe_after_s and not answered.is_set():
                answer = _probe(probe, what, max(0.1, min(PROBE_TIMEOUT_S, deadline - time.monotonic())))
                if answer is None:
                    answering_since = None
                elif answering_since is None:
                    answering_since = time.monotonic()
                elif time.monotonic() - answering_since >= probe_confirm_s:
                    other_answered = f"{answer} (for {time.monotonic() - answering_since:.0f}s)"
            next_nudge = time.monotonic() + nudge_every_s
        if answered.is_set():
            break
        now = time.monotonic()
        waited = now - started
        about = _detail(detail)
        if answered.is_set():  # describing the wait takes a moment (a metadata request)
            break
        if other_answered is not None:
            message = (
                f"{what}: no answer for {waited:.0f}s, while {other_answered}: the call is taken as stuck "
                f"inside librdkafka (librdkafka issue #5511), not waiting for Kafka{about}; the task fails and "
                "Spark writes its range again with new clients"
            )
            log.warning("%s", message)
            raise WriteError(message, terminal=False)
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


def _probe(probe: Callable[[float], str | None], what: str, timeout_s: float) -> str | None:
    """What answered the probe, or ``None`` (no answer, or the probe failed: that proves nothing)."""
    try:
        return probe(timeout_s)
    except Exception as exc:  # noqa: BLE001 - a probe only ever shortens a wait; its failure is no proof
        log.debug("%s: probe failed: %s", what, exc)
        return None


def retry_within(
    call: Callable[[float], T],
    *,
    what: str,
    limit_s: float,
    detail: Callable[[], str] | None = None,
    max_delay_s: float = 5.0,
    quiet_s: float = QUIET_S,
    attempt_s: float = ATTEMPT_S,
) -> T:
    """``call(seconds left)`` again while Kafka says its error may pass, for at most ``limit_s``.

    For librdkafka calls that keep their own timeout (``init_transactions``, ``committed``,
    ``commit_transaction``): each attempt gets at most ``attempt_s`` of the time left. Every
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
            return call(max(min(1.0, attempt_s), min(attempt_s, left)))
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
