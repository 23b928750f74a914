"""One instance per flow: a lease held on the target cluster as the one member of a consumer group.

Two ``sparkmirror run`` of the same flow would copy every record twice (at-least-once) or fence
each other for ever (exactly-once). A running flow therefore holds a lease: it is a member of the
group :func:`sparkmirror.core.naming.lease_group`, subscribed to the flow's one-partition offset-map
topic, and it owns that partition. Its ``client.id`` says who holds it (host and pid).

Rules:

- A second instance joins the group but gets no partition (the assignor is sticky: the holder
  keeps it) and refuses after :data:`ACQUIRE_WAIT_S`, naming the holder.
- On one host, a lock file (``flock``, released by the kernel when the holder dies) tells at once
  whether a holder there is alive: a live one is refused before joining, naming its pid.
- The member is static (``group.instance.id``): a holder on the same host that is gone (killed,
  or stopped: a static member stays listed until its session ends) is replaced at once by joining
  with its instance id. A holder on another host that was killed keeps the lease until
  :data:`SESSION_TIMEOUT_MS` (the group's session timeout) has passed; a new instance waiting for
  the lease then gets it, so a restart elsewhere after a crash is delayed by at most that.
- A target that refuses this principal the lease (no ACL for the group or the topic, or refused
  credentials) is not another holder: :meth:`FlowLease.acquire` raises :class:`LeaseRefused` at
  once, classified by :mod:`sparkmirror.kafka.access`, instead of waiting and naming no holder.
- A holder that loses its partition (cut off from the target longer than the session timeout)
  rejoins by itself; if after :data:`ACQUIRE_WAIT_S` another member holds the partition, another
  instance has it: :attr:`FlowLease.lost` is set and the flow must stop. A target that is down is
  waited for.

It never reads or commits offsets: the group holds no state but its membership.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import socket
import tempfile
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from sparkmirror.errors import SparkMirrorError
from sparkmirror.kafka.access import classify
from sparkmirror.kafka.factory import close_within, new_admin, new_consumer

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

log = logging.getLogger(__name__)

#: The lease group's session timeout: how long a killed holder keeps the lease (librdkafka's
#: heartbeats run in their own thread: a busy Python driver does not lose it).
SESSION_TIMEOUT_MS = 15_000
#: How long a new instance waits for the lease before it refuses (past a killed holder's session).
ACQUIRE_WAIT_S = 30.0

_CLIENT_ID = re.compile(r"^sparkmirror-lease host=(?P<host>\S+) pid=(?P<pid>\d+)$")


class LeaseHeld(SparkMirrorError):
    """Another instance runs the flow; names it (host, pid)."""

    exit_code = 6

    def __init__(self, message: str, *, holder: str = "") -> None:
        super().__init__(message)
        self.holder = holder

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.args[0],), {"holder": self.holder})


class LeaseRefused(SparkMirrorError):
    """The target refused this principal what the lease needs (an authorization or authentication
    failure, as :func:`sparkmirror.kafka.access.classify` says): no other instance is involved. The
    caller names cluster and principal (:func:`sparkmirror.kafka.access.denied`)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail
        self.exit_code = 2 if kind == "authentication" else 1

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.kind, self.detail))


def refusal(err: KafkaError | None) -> tuple[str, str] | None:
    """``(kind, detail)`` when a lease member's error says the target refused access; None otherwise
    (a broker down, a coordinator moving: the lease waits)."""
    if err is None:
        return None
    found = classify(f"{err.name()} {err.str()}")
    if found is None:
        return None
    kind, _code = found
    return kind, f"{err.name()}: {err.str()}"


def _lock_path(group: str, bootstrap: str) -> str:
    """The host-local lock file of a lease (per target cluster and group)."""
    digest = hashlib.sha256(f"{bootstrap}\n{group}".encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), "sparkmirror-leases", f"{group}-{digest}.lock")


#: Seconds a release waits for the lease's member to close.
CLOSE_WAIT_S = 10.0


class FlowLease:
    """The lease of one flow; :meth:`acquire` once, :meth:`release` at the end."""

    def __init__(
        self, consumer_conf: Mapping[str, str], *, flow: str, group: str, topic: str, host: str | None = None
    ) -> None:
        self.flow = flow
        self.group = group
        self.topic = topic
        #: This host's name (``host``: a test hook, to play an instance on another host).
        self.host = host or socket.gethostname()
        self.pid = os.getpid()
        self.client_id = f"sparkmirror-lease host={self.host} pid={self.pid}"
        self._conf = {
            **consumer_conf,
            "group.id": group,
            "client.id": self.client_id,
            "session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "partition.assignment.strategy": "cooperative-sticky",
            "enable.auto.commit": "false",
            "auto.offset.reset": "latest",
        }
        self._consumer: Consumer | None = None
        self._owned = threading.Event()
        #: When the partition was last taken away (monotonic), while it is not owned.
        self._unowned_since: float | None = None
        #: Set when a held lease is taken away; the flow must stop.
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock_file = _lock_path(group, str(consumer_conf.get("bootstrap.servers", "")))
        self._lock_fd: int | None = None
        self._admin_conf: dict[str, str] = {}

    # -- acquire ------------------------------------------------------------
    def acquire(self, admin_conf: Mapping[str, str], *, wait_s: float = ACQUIRE_WAIT_S) -> None:
        """Join the group and wait until this instance owns the partition; raise :class:`LeaseHeld`
        (another instance holds it) or :class:`LeaseRefused` (the target refuses this principal)."""
        from confluent_kafka import KafkaException

        self._admin_conf = dict(admin_conf)
        self._lock_host()
        conf = {**self._conf, "group.instance.id": self._instance_id(admin_conf)}
        consumer = self._consumer = new_consumer(conf)
        consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
        deadline = time.monotonic() + wait_s
        said = False
        while not self._owned.is_set():
            try:
                msg = consumer.poll(0.5)
                err = msg.error() if msg is not None else None
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if refusal(err) is None:
                    self.release()
                    raise
            refused = refusal(err)
            if refused is not None:
                # A missing group or topic ACL looks like a lease held by someone else (no partition
                # ever comes): say what it is, at once.
                self.release()
                raise LeaseRefused(*refused)
            if err is not None:
                log.debug("flow=%s lease group %s: %s", self.flow, self.group, err.str())
            if time.monotonic() > deadline:
                holder = self._holders(admin_conf)
                self.release()
                raise LeaseHeld(
                    f"flow={self.flow} is already running: {holder or 'another instance'} holds its lease "
                    f"(consumer group {self.group} on the target); stop it first. A killed instance's lease "
                    f"expires {SESSION_TIMEOUT_MS // 1000} s after it died",
                    holder=holder,
                )
            if not said and time.monotonic() > deadline - wait_s + 3:
                said = True
                log.info(
                    "flow=%s waiting up to %.0fs for the flow's lease (group %s): another instance holds it, or "
                    "held it until it died",
                    self.flow,
                    wait_s,
                    self.group,
                )
        # Owned, not read: the offset map's records are none of the lease's business.
        consumer.pause(consumer.assignment())
        log.info("flow=%s lease acquired (group %s, %s)", self.flow, self.group, self.client_id)
        self._thread = threading.Thread(target=self._keep, name=f"lease {self.flow}", daemon=True)
        self._thread.start()

    def _lock_host(self) -> None:
        """Hold this host's lock of the lease, or refuse at once naming the live holder here."""
        path = self._lock_file
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 100, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise LeaseHeld(
                f"flow={self.flow} is already running: host={self.host} {holder} holds its lease "
                f"(consumer group {self.group} on the target); stop it first",
                holder=f"host={self.host} {holder}",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid={self.pid}".encode(), 0)
        self._lock_fd = fd

    def _instance_id(self, admin_conf: Mapping[str, str]) -> str:
        """This member's ``group.instance.id``: that of a holder on this host, gone since this process holds
        the host's lock (replaced at once), else a new one."""
        # The holder first: replacing a member without the partition would wait for the holder's session.
        members = sorted(self._members(admin_conf), key=lambda member: not member[2])
        for client_id, instance_id, _holds in members:
            m = _CLIENT_ID.match(client_id)
            if m is not None and m["host"] == self.host and instance_id:
                return instance_id
        return f"{self.group}.{self.host}.{self.pid}"

    def _members(self, admin_conf: Mapping[str, str]) -> list[tuple[str, str, bool]]:
        """(client id, group instance id, holds the partition) of the lease group's members."""
        admin = new_admin(admin_conf)
        try:
            desc = admin.describe_consumer_groups([self.group], request_timeout=15)[self.group].result(timeout=20)
        except Exception as exc:  # noqa: BLE001 - who holds it is said when known
            log.debug("flow=%s cannot describe lease group %s: %s", self.flow, self.group, exc)
            return []
        return [
            (m.client_id, m.group_instance_id or "", bool(m.assignment and m.assignment.topic_partitions))
            for m in desc.members
        ]

    def _holders(self, admin_conf: Mapping[str, str]) -> str:
        members = self._members(admin_conf)
        others = [c.removeprefix("sparkmirror-lease ") for c, _i, holds in members if holds and c != self.client_id]
        return ", ".join(sorted(set(others)))

    # -- hold -----------------------------------------------------------------
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if partitions:
            self._owned.set()
            self._unowned_since = None
            if self._thread is not None:  # owned again after a loss: still not read
                consumer.pause(partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if partitions:
            self._taken_away("revoked")

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._taken_away("lost (session expired)")

    def _taken_away(self, how: str) -> None:
        if self._owned.is_set() and not self._stop.is_set():
            log.warning("flow=%s lease %s; rejoining the group %s", self.flow, how, self.group)
            self._owned.clear()
            self._unowned_since = time.monotonic()

    def _keep(self) -> None:
        """Poll the member, so rebalances are answered and the member is not dropped as stalled; set
        :attr:`lost` when the partition stays away."""
        while not self._stop.is_set():
            consumer = self._consumer
            if consumer is None:
                return
            try:
                msg = consumer.poll(1.0)
            except Exception as exc:  # noqa: BLE001 - a closed member has lost the lease
                if not self._stop.is_set():
                    self._lose(f"lost ({exc})")
                return
            err = msg.error() if msg is not None else None
            if err is not None and err.fatal():
                self._lose(f"lost ({err.str()})")
                return
            since = self._unowned_since
            if since is not None and time.monotonic() - since > ACQUIRE_WAIT_S:
                # Lost only to another instance: a target that is down (for longer than the session) is
                # waited for, as the flow waits for it.
                holder = self._holders(self._admin_conf)
                if holder:
                    self._lose(f"taken by {holder}")
                    return
                self._unowned_since = time.monotonic()

    def _lose(self, how: str) -> None:
        log.error("flow=%s lease %s: another instance may run the flow now; stopping it here", self.flow, how)
        self._owned.clear()
        self.lost.set()

    def _close(self, consumer: Consumer) -> None:
        """Close the member, waiting at most :data:`CLOSE_WAIT_S`: after a target outage librdkafka's
        close can wait on a coordinator for minutes, and a stop must not. A member left open is
        dropped by the brokers at the end of its session, as a killed holder's is."""
        if not close_within(consumer.close, CLOSE_WAIT_S, f"the lease consumer of flow {self.flow}"):
            log.warning(
                "flow=%s the lease's member did not close within %.0fs; the target drops it after its %d s session",
                self.flow,
                CLOSE_WAIT_S,
                SESSION_TIMEOUT_MS // 1000,
            )

    def release(self) -> None:
        """Close the member; it stays listed until its session ends (a static member does not leave):
        the next instance on this host takes its place at once, one elsewhere after the session."""
        self._stop.set()
        consumer, self._consumer = self._consumer, None
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)
        if consumer is not None:
            self._close(consumer)
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # releases the host's lock
