"""Retry a Kafka client call while Kafka itself says the error is retriable.

Coordinators move and load (``NOT_COORDINATOR``,
``COORDINATOR_LOAD_IN_PROGRESS``), leaders change: such errors pass on their
own. Anything Kafka does not mark retriable is raised at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Retries within this many seconds of the first attempt are logged at debug level, later ones as warnings.
_QUIET_S = 10.0


def retry_kafka(call: Callable[[], T], *, what: str, attempts: int = 10, max_delay_s: float = 5.0) -> T:
    from confluent_kafka import KafkaError, KafkaException

    # A consumer's synchronous commit reports these as not retriable, yet they pass once the group's
    # coordinator has loaded or moved (seen: NOT_COORDINATOR on the first commit to a fresh cluster).
    coordinator_moving = {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
    }
    delay = 0.2
    started = time.monotonic()
    for attempt in range(attempts):
        try:
            return call()
        except KafkaException as exc:
            err = exc.args[0]
            if not (err.retriable() or err.code() in coordinator_moving) or attempt == attempts - 1:
                raise
            # Short waits are routine (a coordinator loading); a long one is said, with what it waits for.
            waited = time.monotonic() - started
            level = logging.WARNING if waited >= _QUIET_S else logging.DEBUG
            log.log(level, "%s: %s (%s) after %.0fs; retrying in %.1fs", what, err.name(), err.str(), waited, delay)
            time.sleep(delay)
            delay = min(delay * 2, max_delay_s)
    raise AssertionError("unreachable")
