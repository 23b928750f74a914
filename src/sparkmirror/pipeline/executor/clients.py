"""The one worker-local cache of Kafka clients.

Spark reuses Python workers across tasks, so a producer or consumer made for one task serves the
next: that saves a connection set-up (and, exactly-once, an ``init_transactions``) per task and
partition. A client is cached under its kind, its name, the worker's pid (a forked worker must
not use its parent's clients), the driver's producer generation and its full configuration, so a
changed setting makes a new client. A client that failed is forgotten (:func:`forget`) and the
next task makes a new one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, TypeVar

from sparkmirror.pipeline.executor.plan import PartitionKey, Record, WritePlan
from sparkmirror.pipeline.executor.waits import brokers_text, retry_within

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    from sparkmirror.kafka.factory import BrokersWatch

C = TypeVar("C")
_CacheKey = tuple[str, ...]

_CLIENTS: dict[_CacheKey, object] = {}
_LOCK = threading.Lock()
#: The ``error_cb`` of each cached transactional librdkafka producer, by the producer's ``id`` (a
#: librdkafka client takes no attributes of its own); dropped with the producer (:func:`forget`).
_WATCHES: dict[int, BrokersWatch] = {}
#: One lock per key, held while its client is made: making one can take seconds (an exactly-once
#: producer's ``init_transactions``), and only the asks for the same client wait for it.
_MAKING: dict[_CacheKey, threading.Lock] = {}


def _key(kind: str, name: str, generation: str, conf: Mapping[str, str]) -> _CacheKey:
    return (kind, name, str(os.getpid()), generation, *sorted(f"{k}={v}" for k, v in conf.items()))


def _cached(key: _CacheKey, make: Callable[[], C]) -> C:
    """The cached client of ``key``, made by ``make`` on the first ask (a failed make caches nothing)."""
    with _LOCK:
        client = _CLIENTS.get(key)
        if client is not None:
            return client  # type: ignore[return-value]
        making = _MAKING.setdefault(key, threading.Lock())
    with making:
        with _LOCK:
            client = _CLIENTS.get(key)
        if client is None:  # not made meanwhile by an ask this one waited for
            client = make()
            with _LOCK:
                _CLIENTS[key] = client
        return client  # type: ignore[return-value]


def forget(client: object) -> None:
    """Drop a client from the cache (it failed, or was fenced): the next task makes a new one."""
    with _LOCK:
        for k, v in list(_CLIENTS.items()):
            if v is client:
                del _CLIENTS[k]
        _WATCHES.pop(id(client), None)


def brokers_lost_at(producer: object) -> float | None:
    """When a transactional librdkafka producer lost every broker of the target since its
    ``init_transactions`` answered (``None``: it has not; always ``None`` for the transport's). Such a
    producer is not asked to talk to its coordinators again: the finish fails its task before the
    offsets call and before the commit (``commit._fail_if_brokers_lost``) and the abort passes it by; the task's retry
    makes new producers, whose fence aborts what it left open."""
    watch = _WATCHES.get(id(producer))
    return None if watch is None else watch.lost_at


def close_all() -> None:
    """Forget and close every cached client (a benchmark between its runs; workers never do)."""
    with _LOCK:
        cached = list(_CLIENTS.values())
        _CLIENTS.clear()
        _WATCHES.clear()
    for client in cached:
        try:
            client.close()  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - best effort
            pass


def producer(plan: WritePlan, slot: int = 0) -> Producer:
    """The worker's at-least-once producer number ``slot`` of this flow and configuration (a task
    writing many partitions writes with several: :meth:`~.plan.WritePlan.producers_for`)."""
    from sparkmirror.kafka.factory import new_producer

    if plan.java_writes:
        from sparkmirror.pipeline.transport.client import TransportProducer

        java = dict(plan.java_producer_config)
        java.setdefault("client.id", f"sparkmirror-{plan.flow}")
        key = _key("transport-producer", plan.flow, str(slot), java)
        return _cached(key, lambda: TransportProducer(java))  # type: ignore[return-value]
    conf = dict(plan.producer_config)
    conf.setdefault("client.id", f"sparkmirror-{plan.flow}")
    return _cached(_key("producer", plan.flow, str(slot), conf), lambda: new_producer(conf))


def transactional_producer(plan: WritePlan, partition: PartitionKey) -> Producer:
    """The worker's producer of the transactional id that writes this source partition (its
    transaction group's), ``init_transactions``-ed. Each copy job has its own producer generation
    (``plan.producer_generation``): a producer cached by an earlier job, fenced since, is never reused."""
    from sparkmirror.kafka.factory import BrokersWatch, new_producer

    tid = plan.transactional_id(*partition)
    if plan.java_writes:
        from sparkmirror.pipeline.transport.client import TransportProducer

        conf = plan.java_transactional_config(tid)
        key = _key("transport-transactional", tid, plan.producer_generation, conf)
    else:
        conf = plan.transactional_producer_config(*partition)
        key = _key("transactional", tid, plan.producer_generation, conf)

    def make() -> Producer:
        watch: BrokersWatch | None = None
        if plan.java_writes:
            p: Producer = TransportProducer(conf, group=plan.progress_group)  # type: ignore[assignment]
        else:
            watch = BrokersWatch(tid)
            p = new_producer(conf, watch=watch)
        remote = plan.remote_topic(partition[0])

        def waiting() -> str:
            md = p.list_topics(remote, timeout=5)
            return f"waiting for the transaction coordinator of {tid} on the target (brokers {brokers_text(md)})"

        # Fences any earlier producer with this id and completes (aborts) its open transaction,
        # so the progress read next is stable.
        retry_within(
            lambda left: p.init_transactions(left),
            what=f"flow={plan.flow} {partition[0]}[{partition[1]}]: init_transactions({tid})",
            limit_s=plan.target_wait_s,
            detail=waiting,
        )
        if watch is not None:
            # A loss before init_transactions answered is over (that found the coordinator). Its report
            # may still be queued: librdkafka hands errors to the callback only when the client is polled.
            p.poll(0)
            watch.lost_at = None
            with _LOCK:
                _WATCHES[id(p)] = watch
        return p

    return _cached(key, make)


def progress_consumer(plan: WritePlan) -> Consumer:
    """A target consumer of the flow's progress group (reads the progress; exactly-once: names the group in
    the transactions)."""
    from sparkmirror.kafka.factory import new_consumer

    conf = plan.progress_consumer_config()
    return _cached(_key("progress", plan.progress_group, plan.producer_generation, conf), lambda: new_consumer(conf))


def fresh_progress_committed(
    plan: WritePlan, partitions: list[tuple[str, int]], timeout_s: float
) -> list[TopicPartition]:
    """The progress group's committed offsets of ``partitions``, asked by a consumer made for the question
    (:func:`fresh_committed`)."""
    return fresh_committed(plan, plan.progress_group, partitions, timeout_s)


def fresh_committed(
    plan: WritePlan, group: str, partitions: list[tuple[str, int]], timeout_s: float
) -> list[TopicPartition]:
    """A target group's committed offsets (and metadata) of ``partitions``, asked by a consumer made for the
    question (it looks for the group's coordinator anew) and closed after it, in a thread of its own (a close
    never holds up the caller: librdkafka's can wait for ever on a lost broker)."""
    from confluent_kafka import TopicPartition

    from sparkmirror.kafka.factory import close_within, new_consumer

    consumer = new_consumer(plan.group_consumer_config(group))
    try:
        return consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=timeout_s)
    finally:
        close_within(consumer.close, 0.0, f"probe consumer of group {group}")


def source_consumer(plan: WritePlan, *, partition_eof: bool) -> Consumer:
    """A copy task's source consumer (:meth:`~.plan.WritePlan.reader_config`). ``partition_eof``: it says
    each time it reaches a partition's end, which only a task copying up to an end needs (``--once``).
    A streaming task's partitions have none, and at many partitions of a few records a second nearly every
    read reaches one: an event a record, read, made and looked at for nothing (docs/performance.md)."""
    from sparkmirror.kafka.factory import new_consumer

    if plan.java_reads:
        from sparkmirror.pipeline.transport.client import TransportConsumer

        java = plan.java_reader_config()
        key = _key("transport-reader", plan.flow, str(partition_eof), java)
        return _cached(key, lambda: TransportConsumer(java, partition_eof=partition_eof))  # type: ignore[return-value]
    conf = plan.reader_config(partition_eof=partition_eof)
    return _cached(_key("reader", plan.flow, "", conf), lambda: new_consumer(conf))


#: What one read takes: each partition's records in offset order, the events (a partition's end
#: reached, an error) as the consumer's messages, and how many records and events they are.
Taken = tuple[dict[PartitionKey, list[Record]], list["Message"], int]


def take(consumer: Consumer, wait_s: float, room: int) -> Taken:
    """One read of ``consumer``: wait up to ``wait_s`` for its first record or event, then take what is
    already there without waiting, at most ``room`` records and events. The transport's consumer hands
    each partition's records together; librdkafka's messages are grouped here, each taken as the
    record the sink writes."""
    own = getattr(consumer, "take", None)
    if own is not None:
        return own(wait_s, room)
    first = consumer.poll(wait_s)
    if first is None:
        return {}, [], 0
    msgs = [first, *consumer.consume(room - 1, 0)] if room > 1 else [first]
    runs: dict[PartitionKey, list[Record]] = {}
    events = []
    for m in msgs:
        if m.error() is not None:
            events.append(m)
            continue
        key: PartitionKey = (m.topic(), m.partition())  # type: ignore[assignment]
        run = runs.get(key)
        if run is None:
            run = runs[key] = []
        run.append((m.offset(), m.key(), m.value(), m.timestamp()[1], m.headers()))  # type: ignore[arg-type]
    return runs, events, len(msgs)


def cached_ends(consumer: Consumer, keys: Iterable[PartitionKey]) -> list[tuple[PartitionKey, int]]:
    """The source's end of each of ``keys`` as ``consumer`` last saw it (its cached high watermark: no
    request), of those it knows one for. The transport's consumer has them at hand; librdkafka's is asked
    one partition at a time."""
    own = getattr(consumer, "cached_ends", None)
    if own is not None:
        return own(keys)
    from confluent_kafka import TopicPartition

    out = []
    for t, p in keys:
        try:
            _low, high = consumer.get_watermark_offsets(TopicPartition(t, p), cached=True)
        except Exception:  # noqa: BLE001 - an end unknown now
            continue
        if high is not None and high >= 0:
            out.append(((t, p), int(high)))
    return out


def source_admin(plan: WritePlan) -> AdminClient:
    """A new admin client on the flow's source, not cached: a task checks its topics' ids with it once,
    at its start (an idle admin client wakes every second; the driver checks while the tasks run)."""
    from sparkmirror.kafka.factory import new_admin

    return new_admin(dict(plan.source_admin_config))


def discard_producer(producer: Producer) -> None:
    """Forget a producer after a failure and drop what it still queues (the task is retried from the
    progress on the target)."""
    forget(producer)
    try:
        producer.purge()
        producer.flush(0)
    except Exception:  # noqa: BLE001 - best effort on a failed producer
        pass


def discard_consumer(consumer: Consumer) -> None:
    forget(consumer)
    try:
        consumer.close()
    except Exception:  # noqa: BLE001 - best effort on a consumer that failed
        pass
