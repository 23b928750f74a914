"""Every Kafka client sparkmirror makes, made here: librdkafka's log goes through Python logging.

Without a ``logger`` librdkafka writes its own lines to stderr (``%4|…|GETPID|…``), whatever the
CLI's verbosity, and after the process's last line. With one, confluent-kafka hands each line to
:class:`LibrdkafkaLog` when the client is polled, on the thread that polls. Lines that say a
broker cannot be reached or is still starting are logged one level lower (INFO): sparkmirror
says itself what it waits for, and ``-v`` shows them. A unit test keeps every client of the
package coming from here.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

#: The Python logger librdkafka's lines go to (the CLI sets its level from ``-v``).
LOGGER_NAME = "sparkmirror.kafka.librdkafka"

#: Transient states every client goes through when a broker restarts or a cluster is down.
_TRANSIENT = re.compile(
    r"Connection refused|Disconnected|brokers are down|Failed to resolve|Coordinator load in progress|"
    r"Failed to acquire idempotence PID|timed out|Connection setup timed out|Broker transport failure"
)


def close_within(close: Callable[[], object], seconds: float, what: str) -> bool:
    """Run a client's ``close`` in a thread of its own and wait at most ``seconds``; False if it is
    still waiting, left behind. After brokers were lost librdkafka's close (and destroy) can wait on
    a coordinator or a broker thread for minutes, or for ever (librdkafka #4519); a stop must not.
    An error from ``close`` is logged at debug and counts as closed."""

    def run() -> None:
        try:
            close()
        except Exception as exc:  # noqa: BLE001 - closing after the cluster went away
            logging.getLogger(__name__).debug("closing %s: %s", what, exc)

    closer = threading.Thread(target=run, name=f"close {what}", daemon=True)
    closer.start()
    closer.join(seconds)
    return not closer.is_alive()


class LibrdkafkaLog:
    """The ``logger`` confluent-kafka calls; picklable (Spark ships it inside client settings)."""

    def __init__(self, name: str = LOGGER_NAME) -> None:
        self.name = name

    def log(self, level: int, msg: str, *args: object) -> None:
        target = logging.getLogger(self.name)
        text = msg % args if args else msg
        if level > logging.INFO and _TRANSIENT.search(text):
            level = logging.INFO
        if target.isEnabledFor(level):
            target.log(level, "%s", text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LibrdkafkaLog) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"LibrdkafkaLog({self.name})"


_LOG = LibrdkafkaLog()

#: What a client setting's value may be (confluent-kafka takes strings, numbers and booleans).
Setting = str | int | float | bool


def _with_log(conf: Mapping[str, Setting]) -> dict[str, object]:
    # librdkafka's level 6 (notice) lines are about its own housekeeping; one of them, printed
    # straight to stderr while a client is destroyed, reports log lines still queued for the
    # logger. Up to warnings unless the settings ask for more (``log_level``, ``debug``).
    return {"log_level": "4", **conf, "logger": _LOG}


class BrokersWatch:
    """A producer's ``error_cb``: when it last lost every broker of its cluster (librdkafka's
    ``_ALL_BROKERS_DOWN``), on the clock of :func:`time.monotonic`. Each error is logged with the line
    librdkafka writes itself when a client has no ``error_cb`` (``ERROR [client] description: text``,
    through :class:`LibrdkafkaLog`: transient ones at INFO).

    Exactly once a transaction's offsets call can wait on the coordinator librdkafka knew before such a
    loss, with every broker back (``pipeline/executor/waits.py``); the commit asks this first."""

    def __init__(self, client: str) -> None:
        self.client = client
        self.lost_at: float | None = None

    def __call__(self, err: object) -> None:
        from confluent_kafka import KafkaError

        if isinstance(err, KafkaError):
            if err.code() == KafkaError._ALL_BROKERS_DOWN:
                self.lost_at = time.monotonic()
            described = KafkaError(err.code()).str()  # librdkafka's description of the code
            _LOG.log(logging.ERROR, "%s", f"ERROR [{self.client}] {described}: {err.str()}")


def new_producer(conf: Mapping[str, Setting], *, watch: BrokersWatch | None = None) -> Producer:
    """A producer; with ``watch``, its ``error_cb`` (:class:`BrokersWatch`)."""
    from confluent_kafka import Producer

    settings = _with_log(conf)
    if watch is not None:
        settings["error_cb"] = watch
    return Producer(settings)


def new_consumer(conf: Mapping[str, Setting]) -> Consumer:
    from confluent_kafka import Consumer

    return Consumer(_with_log(conf))


def new_admin(conf: Mapping[str, Setting]) -> AdminClient:
    from confluent_kafka.admin import AdminClient

    return AdminClient(_with_log(conf))  # type: ignore[arg-type]  # its stub omits the documented ``logger``
