"""Flow control on the target cluster: the operator's commands write a flow's
:class:`~sparkmirror.core.control.FlowControl` record to :data:`CONTROL_TOPIC`, and the running flow
follows that topic (:class:`ControlWatcher`).

The target is the channel because it is the one cluster every host that may run or operate a flow
reaches (as ``status`` reads it), and because its ACLs already say who may act on the flow: a
principal that may not write the control topic is refused with one line naming it (exit 1).

The watcher must never stop or slow the flow: a control topic it cannot read is said once (the
commands then do not reach this flow), and it reads without waiting.
"""

from __future__ import annotations

import getpass
import logging
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sparkmirror.core.control import CONTROL_TOPIC, FlowControl, latest_control
from sparkmirror.core.exceptions import FormatError
from sparkmirror.kafka.access import AUTHENTICATION_CODES, AUTHORIZATION_CODES, denied, principal
from sparkmirror.kafka.flowclients import FlowClients
from sparkmirror.kafka.internal import COMPACTED_READ_BACK, InternalTopicError, ensure_topic, read_to_end

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError

log = logging.getLogger(__name__)

#: Seconds between two tries to follow a control topic the flow could not read.
_RETRY_S = 60.0


def ensure_control_topic(clients: FlowClients) -> None:
    ensure_topic(
        clients.target_admin,
        CONTROL_TOPIC,
        replication_factor=clients.flow.offset_syncs_topic_replication_factor,
        config=COMPACTED_READ_BACK,
        purpose="what operators asked of each flow into this cluster (pause, throttle)",
        key="offset-syncs.topic.replication.factor",
    )


def read_control(clients: FlowClients) -> FlowControl:
    """The flow's last control record (none: nothing asked)."""
    return latest_control(read_to_end(clients.target_consumer, CONTROL_TOPIC, timeout_s=30), clients.flow.name)


def operator() -> str:
    """Who runs the command, for the record and ``status``: ``user@host``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def write_control(clients: FlowClients, control: FlowControl) -> None:
    """Write ``control`` and wait for the target's acknowledgement; refusals name the principal."""

    from sparkmirror.kafka.factory import new_producer

    producer = new_producer({**clients.internal_producer, "message.timeout.ms": "30000"})
    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    producer.produce(CONTROL_TOPIC, key=control.key_bytes(), value=control.value_bytes(), on_delivery=delivered)
    left = producer.flush(35)
    if errors or left:
        text = errors[0].name() + ": " + errors[0].str() if errors else "not acknowledged within 35s"
        _refused(clients, text, f"write {CONTROL_TOPIC}")
        raise InternalTopicError(
            f"flow={clients.flow.name}: the control record was not written to {CONTROL_TOPIC}: {text}"
        )


def _refused(clients: FlowClients, text: str, operation: str) -> None:
    """Raise the one-line refusal when ``text`` is an access failure."""
    code = next((c for c in (*AUTHORIZATION_CODES, *AUTHENTICATION_CODES) if c in text), None)
    if code is None:
        return
    kind = "authentication" if code in AUTHENTICATION_CODES else "authorization"
    raise denied(
        kind,
        code,
        flow=None,
        cluster=clients.flow.target,
        who=principal(clients.internal_producer),
        operation=f"{operation} (flow {clients.flow.name})",
    )


@contextmanager
def _refusals(clients: FlowClients, operation: str) -> Iterator[None]:
    """An access failure of ``operation`` as the one line naming the principal; other errors as they are."""
    try:
        yield
    except Exception as exc:  # InternalTopicError, or the admin client's KafkaException
        _refused(clients, str(exc), operation)
        raise


def change(clients: FlowClients, edit: str, apply: object) -> tuple[FlowControl, FlowControl]:
    """Read the flow's record, apply ``apply(record, at_ms, by)`` and write the result; (before, after).

    Creating the topic first (a flow that never ran since flow control exists has none yet), and a
    refusal to create, read or write it is said in one line naming the principal.
    """
    assert callable(apply)
    with _refusals(clients, f"create {CONTROL_TOPIC}"):
        ensure_control_topic(clients)
    with _refusals(clients, f"read {CONTROL_TOPIC}"):
        before = read_control(clients)
    after = apply(before, int(time.time() * 1000), operator())
    assert isinstance(after, FlowControl)
    write_control(clients, after)
    log.debug("flow=%s control %s: %s -> %s", clients.flow.name, edit, before, after)
    return before, after


class ControlWatcher:
    """The running flow's view of its control record: follows the topic without waiting."""

    def __init__(self, clients: FlowClients) -> None:
        self.clients = clients
        self.flow = clients.flow.name
        self.control = FlowControl(self.flow)
        self._consumer: Consumer | None = None
        self._said = False
        self._next_try = 0.0

    def start(self) -> None:
        """Create the topic when missing, read the flow's record as of now (what holds from the first
        record copied), and follow the topic from there."""
        from confluent_kafka import TopicPartition

        from sparkmirror.kafka.factory import new_consumer

        if self._consumer is not None:
            return
        self._next_try = time.monotonic() + _RETRY_S
        try:
            ensure_control_topic(self.clients)
            self.control = read_control(self.clients)
            consumer = new_consumer(
                {
                    **self.clients.target_consumer,
                    "group.id": f"sparkmirror-control-{self.flow}",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "auto.offset.reset": "earliest",
                    "fetch.wait.max.ms": 500,
                }
            )
            md = consumer.list_topics(CONTROL_TOPIC, timeout=30)
            parts = sorted(md.topics[CONTROL_TOPIC].partitions) if CONTROL_TOPIC in md.topics else [0]
            consumer.assign([TopicPartition(CONTROL_TOPIC, p, 0) for p in parts])
            self._consumer = consumer
            if self._said:
                log.info("flow=%s follows %s again", self.flow, CONTROL_TOPIC)
                self._said = False
        except Exception as exc:  # noqa: BLE001 - flow control must never stop the flow
            self._unavailable(str(exc))

    def poll(self) -> FlowControl | None:
        """The flow's record when it changed since the last call, else None (never waits)."""
        consumer = self._consumer
        if consumer is None:
            if time.monotonic() < self._next_try:
                return None
            before = self.control
            self.start()  # a topic it could not follow before: tried again, and said again if it still cannot
            consumer = self._consumer
            if consumer is None:
                return None
            if self.control != before:
                return self.control
        changed: FlowControl | None = None
        for msg in consumer.consume(500, 0):
            err: KafkaError | None = msg.error()
            if err is not None:
                if not err.code() == err._PARTITION_EOF:
                    self._unavailable(f"{err.name()}: {err.str()}")
                continue
            key, value = msg.key(), msg.value()
            if key != self.flow.encode():
                continue
            try:
                control = FlowControl(self.flow) if value is None else FlowControl.decode(key, value)
            except FormatError as exc:
                log.error("flow=%s an unreadable control record at %s offset %s, ignored: %s", self.flow,
                          CONTROL_TOPIC, msg.offset(), exc)  # fmt: skip
                continue
            if control != self.control:
                self.control = changed = control
        return changed

    def _unavailable(self, why: str) -> None:
        if not self._said:
            log.warning(
                "flow=%s cannot follow %s on %s (%s): `sparkmirror pause|resume|throttle` do not reach this flow "
                "until it can (grant READ, DESCRIBE and CREATE on it: docs/security.md)",
                self.flow,
                CONTROL_TOPIC,
                self.clients.flow.target,
                why,
            )
            self._said = True

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()
