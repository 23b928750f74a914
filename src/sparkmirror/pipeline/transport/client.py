"""A task's consumer and producer over the transport JVM, with the part of confluent-kafka's API the
copy uses (``pipeline/executor/stream.py`` and ``sink.py`` call them as they call librdkafka's), but
for the consumer's reads: :meth:`TransportConsumer.take` hands each partition's records together, as
``pipeline/executor/clients.py``'s ``take`` hands librdkafka's.

Each object is one loopback connection to the executor's transport JVM and one Java client in it; its
close (or its process's end) closes that client only. Errors come as confluent-kafka's ``KafkaError``
of the same broker error code (broker error 10 is Java's ``MESSAGE_TOO_LARGE`` and librdkafka's
``MSG_SIZE_TOO_LARGE``: the code is what travels), so the sink's rules classify them as they do
librdkafka's. What differs from librdkafka:

- the consumer's position and end of a partition are those of the last records (or sweep, each
  second) the JVM sent: its end is the last stable offset (``read_committed``);
- the producer has no local queue limit (``BufferError``): a full Java producer makes ``produce``
  wait, at most its ``max.block.ms``, then the record fails;
- ``list_topics`` answers for one topic (the waits' descriptions), from the Java producer's metadata;
- the transaction calls' timeouts bound the wait for an answer; the Java producer's own call goes on
  (bounded by its ``max.block.ms``), and a call repeated once it succeeded succeeds again (Java's rule
  for a call that timed out: call it again); the group of ``send_offsets_to_transaction`` is the one
  the producer was made for (``group``), whatever metadata is passed;
- a record produced without a partition (the offset map's, a dead letter) is placed by the Java
  producer's partitioner, and its delivery report names partition -1.
"""

from __future__ import annotations

import collections
import hmac
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from sparkmirror.pipeline.transport import frames, launcher

#: 'R' frames with records the JVM may send ahead of what the task took.
_CREDITS = 2
#: Bytes asked of the socket at a time. Not more: ``recv`` makes a buffer of that size each call, and one
#: of a megabyte cost about 20 µs a call, against 4 µs for 64 KiB (``bench/read_path.py --socket``).
_RECV = 1 << 16
#: Bytes of frames read before the buffer drops them.
_KEEP = 1 << 20
#: Bytes of records buffered in Python before they are sent without waiting for the next ``poll``.
_SEND_AT = 1 << 20

Headers = list[tuple[str, bytes | None]] | None
#: A delivery callback: ``(error or None, message)``.
OnDelivery = Callable[[KafkaError | None, "Message"], object]


class TransportError(KafkaException):
    """The transport JVM closed the connection or answered something unexpected."""


class _Connection:
    """One socket to the transport JVM, its hello done: frames out (any thread, one at a time) and in."""

    def __init__(self, role: str, settings: Mapping[str, str]) -> None:
        directory = launcher.transport_dir()
        stale: tuple[int, bytes] | None = None
        last: Exception | None = None
        for _attempt in range(3):
            port, token = launcher.address(directory, stale=stale)
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                self.sock.settimeout(None)  # blocking: every wait for a frame is :meth:`next`'s, bounded there
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._buf = bytearray()
                self._pos = 0
                self.send_lock = threading.Lock()
                self.recv_lock = threading.Lock()
                self.closed = False
                # The JVM proves it holds the port file's token before the settings (credentials) go out.
                nonce = os.urandom(16)
                self.sock.sendall(frames.challenge(nonce))
                kind, body = self.next(30.0) or ("", b"")
                answer = frames.take_bytes(body, 0)[0] if kind == "C" else None
                if answer is None or not hmac.compare_digest(answer, frames.proof(token, nonce)):
                    self.close()
                    raise TransportError(
                        KafkaError(frames.ERR_TRANSPORT, f"the process on port {port} is not the transport JVM")
                    )
                self.sock.sendall(frames.hello(token, role, dict(settings)))
                kind, body = self.next(30.0) or ("", b"")
            except (OSError, TransportError) as exc:
                # The JVM was exiting (or is gone, its port taken by another): start another.
                self.close()
                last, stale = exc, (port, token)
                continue
            if kind == "X":
                self.close()
                raise KafkaException(_kafka_error(frames.reply(body)))
            if kind != "H":
                self.close()
                raise TransportError(KafkaError(frames.ERR_TRANSPORT, f"the transport answered {kind!r} to its hello"))
            return
        raise TransportError(KafkaError(frames.ERR_TRANSPORT, f"cannot connect to the transport JVM: {last}"))

    def send(self, data: bytes | bytearray) -> None:
        with self.send_lock:
            self.sock.sendall(data)

    def next(self, timeout: float) -> tuple[str, bytes] | None:
        """The next frame, waiting up to ``timeout`` seconds for it (0: only what has arrived).

        What has arrived is taken without a wait (``MSG_DONTWAIT``): one call, where a look first
        (``select``) and a read made two; the look is made only when nothing has come."""
        deadline = -1.0
        while True:
            buf = self._buf
            have = len(buf) - self._pos
            if have >= 5:
                kind, n = frames.HEAD.unpack_from(buf, self._pos)
                if have >= 5 + n:
                    start = self._pos + 5
                    body = bytes(buf[start : start + n])
                    self._pos = start + n
                    if self._pos > _KEEP:
                        del buf[: self._pos]
                        self._pos = 0
                    return chr(kind), body
            try:
                data = self.sock.recv(_RECV, socket.MSG_DONTWAIT)
            except BlockingIOError:
                if deadline < 0:
                    deadline = time.monotonic() + timeout
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                    return None
                continue
            if not data:
                self.closed = True
                raise TransportError(KafkaError(frames.ERR_TRANSPORT, "the transport JVM closed the connection"))
            buf += data

    def close(self) -> None:
        self.closed = True
        sock = getattr(self, "sock", None)
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass


def _kafka_error(err: frames.Reply) -> KafkaError:
    """An error the JVM sent, as confluent-kafka's (its code is the broker's, or librdkafka's own)."""
    return KafkaError(
        err.code,
        f"{err.name}: {err.message}",
        fatal=bool(err.flags & 1),
        retriable=bool(err.flags & 2),
        txn_requires_abort=bool(err.flags & 4),
    )


class Message:
    """An event of the consumer (``error()`` set: an end reached, an error), or a delivery report's record:
    what the copy reads of confluent-kafka's ``Message``."""

    __slots__ = ("_error", "_headers", "_key", "_offset", "_partition", "_timestamp", "_topic", "_value")

    def __init__(
        self,
        topic: str | None,
        partition: int | None,
        offset: int | None,
        timestamp: tuple[int, int] = (0, -1),
        key: bytes | None = None,
        value: bytes | None = None,
        headers: Headers = None,
        error: KafkaError | None = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._timestamp = timestamp
        self._key = key
        self._value = value
        self._headers = headers
        self._error = error

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int | None:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> Headers:
        return self._headers

    def error(self) -> KafkaError | None:
        return self._error


class _Partitions:
    """Ids for (topic, partition): each named to the JVM once, with a 'T' frame."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, int], int] = {}
        self.keys: list[tuple[str, int]] = []

    def ids_of(self, conn: _Connection, keys: Sequence[tuple[str, int]]) -> list[int]:
        new = [k for k in dict.fromkeys(keys) if k not in self.ids]
        if new:
            defined = []
            for k in new:
                self.ids[k] = len(self.keys)
                self.keys.append(k)
                defined.append((self.ids[k], k[0], k[1]))
            conn.send(frames.define(defined))
        return [self.ids[k] for k in keys]


#: One entry of a consumer's queue: a partition's records (its id, records in offset order), or an event
#: (an end reached, an error) as a :class:`Message`, in the order the JVM said them.
_Entry = tuple[int, list[frames.Read]] | Message


class TransportConsumer:
    """A source consumer in the transport JVM (``assign`` and its kin are sent, never waited for). Its
    reads (:meth:`take`) hand each partition's records together, as tuples: the task's Python builds
    no object and groups nothing a record (docs/performance.md)."""

    def __init__(self, settings: Mapping[str, str], *, partition_eof: bool = False) -> None:
        conf = dict(settings)
        if partition_eof:
            conf["sparkmirror.transport.partition.eof"] = "true"
        self._conn = _Connection("C", conf)
        self._parts = _Partitions()
        self._queue: collections.deque[_Entry] = collections.deque()
        self._positions: dict[int, int] = {}
        self._ends: dict[int, int] = {}
        #: Assign and seek frames sent, and for each partition moved the number of its last: the JVM's
        #: records of it from before that frame ran are not handed out (librdkafka drops what it fetched
        #: before a seek; the task counts on that).
        self._moves = 0
        self._moved: dict[int, int] = {}
        self._conn.send(frames.credits(_CREDITS))

    def _ids(self, tps: Sequence[TopicPartition]) -> list[int]:
        return self._parts.ids_of(self._conn, [(tp.topic, tp.partition) for tp in tps])

    def assign(self, tps: Sequence[TopicPartition]) -> None:
        """Read these partitions from these offsets, in place of any assigned before (what an earlier
        task's assignment had fetched is dropped)."""
        self._queue.clear()
        self._positions.clear()
        self._ends.clear()
        ids = self._ids(tps)
        self._moves += 1
        self._moved = dict.fromkeys(self._parts.ids.values(), self._moves)  # every earlier record is stale
        for pid, tp in zip(ids, tps, strict=True):
            self._positions[pid] = tp.offset
        self._conn.send(frames.offsets("A", [(pid, tp.offset) for pid, tp in zip(ids, tps, strict=True)]))

    def seek(self, tp: TopicPartition) -> None:
        pid = self._ids([tp])[0]
        self._moves += 1
        self._moved[pid] = self._moves
        self._positions[pid] = tp.offset
        key = (tp.topic, tp.partition)
        if any(self._of(e) == key for e in self._queue):
            self._queue = collections.deque(e for e in self._queue if self._of(e) != key)
        self._conn.send(frames.offsets("K", [(pid, tp.offset)]))

    def _of(self, entry: _Entry) -> tuple[str | None, int | None]:
        if isinstance(entry, Message):
            return entry.topic(), entry.partition()
        return self._parts.keys[entry[0]]

    def incremental_unassign(self, tps: Sequence[TopicPartition]) -> None:
        self._conn.send(frames.ids("U", self._ids(tps)))

    def pause(self, tps: Sequence[TopicPartition]) -> None:
        self._conn.send(frames.ids("S", self._ids(tps)))

    def resume(self, tps: Sequence[TopicPartition]) -> None:
        self._conn.send(frames.ids("G", self._ids(tps)))

    def take(self, timeout: float, room: int) -> tuple[dict[tuple[str, int], list[frames.Read]], list[Message], int]:
        """What the JVM sent, waiting up to ``timeout`` for a record or an event if none has come: each
        partition's records in offset order, the events (ends reached, errors), and how many records
        and events they are, at most ``room`` (the rest is the next read's, in order). A negative
        ``timeout`` waits as librdkafka's ``poll(-1)`` does (an hour here)."""
        q = self._queue
        if not q:
            self._pump(timeout if timeout >= 0 else 3600.0)
        runs: dict[tuple[str, int], list[frames.Read]] = {}
        events: list[Message] = []
        keys = self._parts.keys
        taken = 0
        while q and taken < room:
            entry = q[0]
            if isinstance(entry, Message):
                q.popleft()
                events.append(entry)
                taken += 1
                continue
            pid, records = entry
            left = room - taken
            if len(records) > left:
                q[0] = (pid, records[left:])
                records = records[:left]
            else:
                q.popleft()
            key = keys[pid]
            run = runs.get(key)
            if run is None:
                runs[key] = records
            else:
                run.extend(records)
            taken += len(records)
        return runs, events, taken

    def _pump(self, timeout: float) -> None:
        """Take what the JVM sent, waiting up to ``timeout`` for a record or an event."""
        deadline = time.monotonic() + timeout
        while not self._queue:
            got = self._conn.next(max(0.0, deadline - time.monotonic()))
            if got is None:
                return
            kind, body = got
            if kind == "R":
                self._records(body)
            elif kind == "X":
                err = frames.reply(body)
                topic, partition = self._parts.keys[err.number] if err.number >= 0 else (None, None)
                self._queue.append(Message(topic, partition, None, error=_kafka_error(err)))
            else:
                raise TransportError(KafkaError(frames.ERR_TRANSPORT, f"unexpected frame {kind!r} from the transport"))

    def _records(self, body: bytes) -> None:
        moves, runs, positions, ends = frames.records(body)
        keys = self._parts.keys
        q = self._queue
        moved = self._moved
        if moved:
            # Of a partition moved (assigned, sought) by a frame the JVM had not run yet: fetched before it.
            stale = {pid for pid, at in moved.items() if at > moves}
            for pid in [pid for pid, at in moved.items() if at <= moves]:
                del moved[pid]
        else:
            stale = set()
        for pid, records in runs:
            if stale and pid in stale:
                continue
            q.append((pid, records))
        if runs:
            self._conn.send(frames.credits(1))
        for pid, position, end in positions:
            if stale and pid in stale:
                continue
            self._positions[pid] = position
            if end >= 0:
                self._ends[pid] = end
        for pid, offset in ends:
            if stale and pid in stale:
                continue
            topic, partition = keys[pid]
            q.append(Message(topic, partition, offset, error=KafkaError(KafkaError._PARTITION_EOF, "end of partition")))

    def position(self, tps: Sequence[TopicPartition]) -> list[TopicPartition]:
        out = []
        for tp in tps:
            pid = self._parts.ids.get((tp.topic, tp.partition))
            out.append(
                TopicPartition(tp.topic, tp.partition, self._positions.get(pid, -1001) if pid is not None else -1001)
            )
        return out

    def get_watermark_offsets(
        self, tp: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        """The end as the JVM last sent it (-1: none yet); the log start is not known (-1001)."""
        known = self.cached_ends([(tp.topic, tp.partition)])
        return -1001, known[0][1] if known else -1

    def cached_ends(self, keys: Iterable[tuple[str, int]]) -> list[tuple[tuple[str, int], int]]:
        """Each partition's end as the JVM last sent it, of those it sent one for (no request, and no
        :class:`TopicPartition` a partition: the task notes the ends of what it read at every read)."""
        ids = self._parts.ids
        ends = self._ends
        out = []
        for key in keys:
            end = ends.get(ids.get(key, -1), -1)
            if end >= 0:
                out.append((key, end))
        return out

    def close(self) -> None:
        self._conn.close()


class _Pending:
    """One partition's records sent and not yet reported, in the order sent (numbered from ``base``)."""

    __slots__ = ("base", "records", "results", "topic", "partition")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.base = 0
        #: (callback, timestamp, key, value, headers) per record, the next to report first.
        self.records: collections.deque[tuple[OnDelivery | None, int, bytes | None, bytes | None, Headers]] = (
            collections.deque()
        )
        #: Acknowledgements that came before an earlier record's (a record the Java producer refused at
        #: once): number -> (target offset, error).
        self.results: dict[int, tuple[int, KafkaError | None]] = {}


class TransportProducer:
    """A producer in the transport JVM. Records go out at every ``poll``/``flush`` (or once a megabyte
    waits); each partition's delivery reports are served in the order its records were produced, as
    librdkafka's are."""

    def __init__(self, settings: Mapping[str, str], *, group: str = "") -> None:
        conf = dict(settings)
        if group:
            conf["sparkmirror.transport.group.id"] = group
        self._conn = _Connection("P", conf)
        self._requests = 0
        self._parts = _Partitions()
        self._pending: dict[int, _Pending] = {}
        self._out = bytearray()
        self._count = 0
        #: Records produced (under ``_lock``) and reported (by the thread serving reports): their difference
        #: is what the producer holds, with no lock shared between the two.
        self._produced = 0
        self._reported = 0
        self._lock = threading.Lock()

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int = -1,
        callback: OnDelivery | None = None,
        on_delivery: OnDelivery | None = None,
        timestamp: int = 0,
        headers: Headers = None,
    ) -> None:
        if self._conn.closed:
            raise KafkaException(KafkaError(KafkaError._STATE, "the producer was closed"))
        with self._lock:
            pid = self._parts.ids.get((topic, partition))
            if pid is None:
                pid = self._parts.ids_of(self._conn, [(topic, partition)])[0]
                self._pending[pid] = _Pending(topic, partition)
            size = len(self._out)
            try:
                frames.put_record(self._out, pid, timestamp, key, value, headers)
            except BaseException:
                del self._out[size:]  # nothing of it is sent, and no report is awaited
                raise
            self._pending[pid].records.append((on_delivery or callback, timestamp, key, value, headers))
            self._count += 1
            self._produced += 1
            if len(self._out) >= _SEND_AT:
                self._send_locked()

    def _send_locked(self) -> None:
        if self._count:
            out, self._out = self._out, bytearray()
            self._conn.send(frames.frame("P", frames.INT.pack(self._count) + out))
            self._count = 0

    def _send(self) -> None:
        """Send what waits, unless another thread is producing or sending (it sends what it adds once it
        has a megabyte, and the next ``poll`` the rest): a thread serving reports never waits for a send
        that the JVM holds back."""
        if self._lock.acquire(blocking=False):
            try:
                self._send_locked()
            finally:
                self._lock.release()

    def __len__(self) -> int:
        return self._produced - self._reported

    @property
    def _outstanding(self) -> int:
        return self._produced - self._reported

    def poll(self, timeout: float = -1) -> int:
        """Send what waits, then serve the delivery reports that came (waiting up to ``timeout`` for one)."""
        self._send()
        return self._serve(timeout if timeout >= 0 else 3600.0, until_empty=False)

    def flush(self, timeout: float = -1) -> int:
        """Send what waits, and serve delivery reports until none is outstanding or ``timeout`` passed;
        returns how many are still outstanding."""
        deadline = time.monotonic() + (timeout if timeout >= 0 else 3600.0)
        while self._outstanding:
            self._send()
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._serve(min(left, 0.1), until_empty=True)
        return self._outstanding

    def _serve(self, timeout: float, *, until_empty: bool) -> int:
        served = 0
        deadline = time.monotonic() + timeout
        with self._conn.recv_lock:
            wait = timeout
            while True:
                got = self._conn.next(wait)
                if got is None:
                    return served
                kind, body = got
                if kind == "A":
                    served += self._acks(body)
                elif kind == "Q":
                    pass  # the answer to a request its caller gave up waiting for
                elif kind == "X":
                    raise KafkaException(_kafka_error(frames.reply(body)))
                else:
                    raise TransportError(
                        KafkaError(frames.ERR_TRANSPORT, f"unexpected frame {kind!r} from the transport")
                    )
                if until_empty and self._outstanding:
                    wait = max(0.0, deadline - time.monotonic())
                else:
                    wait = 0.0  # then only what has already arrived

    def _acks(self, body: bytes) -> int:
        served = 0
        for pid, first, count, offset, code, message in frames.acks(body):
            p = self._pending[pid]
            err = KafkaError(code, message) if code else None
            if first == p.base and err is None and not p.results:
                served += self._report(p, count, offset)
                continue
            for i in range(count):
                p.results[first + i] = (offset + i if err is None else -1, err)
            while p.base in p.results:
                target, e = p.results.pop(p.base)
                served += self._report(p, 1, target, e)
        return served

    def _report(self, p: _Pending, count: int, offset: int, err: KafkaError | None = None) -> int:
        """Call the callbacks of ``p``'s next ``count`` records (target offsets from ``offset``)."""
        records = p.records
        topic, partition = p.topic, p.partition
        for i in range(count):
            cb, ts, key, value, headers = records.popleft()
            if cb is not None:
                cb(err, _Delivered(topic, partition, offset + i if err is None else -1001, ts, key, value, headers))
        p.base += count
        self._reported += count
        return count

    def _request(self, op: str, payload: bytes = b"", timeout: float = -1) -> bytes:
        """Send what waits, then request ``op`` and wait up to ``timeout`` for its answer (serving the
        delivery reports that come before it); raises its error as librdkafka would."""
        with self._lock:  # every record produced before the request goes out before it
            self._send_locked()
        with self._lock:
            self._requests += 1
            number = self._requests
        self._conn.send(frames.request(number, op, payload))
        deadline = time.monotonic() + (timeout if timeout >= 0 else 3600.0)
        with self._conn.recv_lock:
            while True:
                got = self._conn.next(max(0.0, deadline - time.monotonic()))
                if got is None:
                    raise KafkaException(
                        KafkaError(
                            KafkaError._TIMED_OUT, f"no answer from the transport in {timeout:g}s", retriable=True
                        )
                    )
                kind, body = got
                if kind == "A":
                    self._acks(body)
                    continue
                if kind == "X":
                    raise KafkaException(_kafka_error(frames.reply(body)))
                if kind != "Q":
                    raise TransportError(
                        KafkaError(frames.ERR_TRANSPORT, f"unexpected frame {kind!r} from the transport")
                    )
                answer = frames.reply(body)
                if answer.number != number:
                    continue  # an earlier request's, given up on
                if answer.code:
                    raise KafkaException(_kafka_error(answer))
                return answer.payload

    def init_transactions(self, timeout: float = -1) -> None:
        self._request("I", timeout=timeout)

    def begin_transaction(self) -> None:
        self._request("B", timeout=30.0)

    def send_offsets_to_transaction(
        self, positions: Sequence[TopicPartition], group_metadata: object, timeout: float = -1
    ) -> None:
        payload = frames.offsets_payload([(tp.topic, tp.partition, tp.offset) for tp in positions])
        self._request("O", payload, timeout)

    def commit_transaction(self, timeout: float = -1) -> None:
        self._request("C", timeout=timeout)

    def abort_transaction(self, timeout: float = -1) -> None:
        self._request("Z", timeout=timeout)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """One topic's partitions (leader, in-sync replicas) and brokers, as the Java producer knows them."""
        if topic is None:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG, "the transport lists one topic at a time"))
        partitions, brokers = frames.metadata(self._request("M", frames.str_payload(topic), timeout))
        return ClusterMetadata(topic, partitions, brokers)

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Drop everything not yet reported: the connection closes, and the JVM closes its producer at once."""
        self.close()

    def close(self, timeout: float | None = None) -> None:
        self._conn.close()


class _Delivered(Message):
    """A delivery report's message: the record as produced, with the target offset."""

    __slots__ = ()

    def __init__(
        self, topic: str, partition: int, offset: int, ts: int, key: bytes | None, value: bytes | None, headers: Headers
    ) -> None:
        super().__init__(topic, partition, offset, (1, ts), key, value, headers)


class _Broker:
    def __init__(self, broker: int, host: str, port: int) -> None:
        self.id, self.host, self.port = broker, host, port


class _Partition:
    def __init__(self, partition: int, leader: int, isrs: list[int]) -> None:
        self.id, self.leader, self.isrs, self.replicas, self.error = partition, leader, isrs, isrs, None


class _Topic:
    def __init__(self, topic: str, partitions: dict[int, _Partition]) -> None:
        self.topic, self.partitions, self.error = topic, partitions, None


class ClusterMetadata:
    """What the waits read of confluent-kafka's ``ClusterMetadata``: ``brokers`` and ``topics``."""

    def __init__(
        self, topic: str, partitions: dict[int, tuple[int, list[int]]], brokers: dict[int, tuple[str, int]]
    ) -> None:
        self.brokers = {b: _Broker(b, host, port) for b, (host, port) in brokers.items()}
        self.topics = {topic: _Topic(topic, {p: _Partition(p, leader, isr) for p, (leader, isr) in partitions.items()})}
