"""The write plan: everything a task needs, built on the driver and pickled to the executors.

It holds client configurations with credentials: it is never logged or printed (those fields are
left out of its repr).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sparkmirror.core.naming import reader_group
from sparkmirror.core.policy import ReplicationPolicy
from sparkmirror.core.transactions import PER_PARTITION, producers_for, writer_id
from sparkmirror.pipeline.reports import Answer

#: (upstream start, downstream start, count) of a partition's last offset-map segment.
Tail = tuple[int, int, int]
#: (source topic, partition).
PartitionKey = tuple[str, int]
#: A record's headers, as a consumer hands them and a producer takes them.
Headers = list[tuple[str, str | bytes | None]]
#: One source record, as a read hands it to the sink: (upstream offset, key, value, timestamp in ms
#: (none: 0 or below), headers or None).
Record = tuple[int, bytes | None, bytes | None, int, Headers | None]

#: Source consumer settings the copy task owns: positions come from the target, never from a group.
READER_SETTINGS = {
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    "isolation.level": "read_committed",
    "auto.offset.reset": "error",
}
#: Reader defaults an operator may override with ``A.consumer.*`` (docs/performance.md has the
#: measurements): larger fetches per partition than librdkafka's 1 MiB; an idle task's fetches wait
#: on the broker, which answers as soon as a record comes: a long wait costs a record no latency and
#: wakes the worker less often (an idle reader of 500 partitions: 0.32 % of a core at librdkafka's
#: 500 ms, 0.18 % at 2 s). Its cost: librdkafka sends a broker one fetch at a time, so a partition
#: resumed (or sought) while its broker has nothing to send waits for the fetch in flight, up to 2 s.
#: And once the consumer's queue holds ``queued.min.messages`` (100,000) its next fetch waits
#: ``fetch.queue.backoff.ms``: librdkafka's 1 s left a task with a backlog idle half the time, its
#: queue drained long before the next fetch (10 ms: 8 partitions' backlog 276,000 -> 427,000 records/s,
#: docs/performance.md, "The consumer's fetch backoff").
READER_DEFAULTS = {
    "max.partition.fetch.bytes": "10485760",
    "fetch.wait.max.ms": "2000",
    "fetch.queue.backoff.ms": "10",
}

#: :data:`READER_SETTINGS` and :data:`READER_DEFAULTS` by the Java consumer's names (``auto.offset.reset
#: = none`` is librdkafka's ``error``; the ends reached are asked of the transport, not of a setting;
#: the Java consumer has no fetch backoff).
JAVA_READER_SETTINGS = {
    "enable.auto.commit": "false",
    "isolation.level": "read_committed",
    "auto.offset.reset": "none",
}
JAVA_READER_DEFAULTS = {
    "max.partition.fetch.bytes": "10485760",
    "fetch.max.wait.ms": "2000",
}


#: The ``sparkmirror.transport`` values whose tasks read the source with the transport's Java consumer,
#: and those whose tasks write the target with its Java producer (the others: librdkafka's).
JAVA_READS = frozenset({"java"})
JAVA_WRITES = frozenset({"java", "java-writes"})


@dataclass(frozen=True)
class WritePlan:
    """What a flow's copy tasks write, where, and how they commit."""

    flow: str
    source_alias: str
    policy: ReplicationPolicy
    producer_config: dict[str, str] = field(repr=False)
    target_alias: str = ""
    errors_tolerance: str = "none"
    dead_letter_topic: str = ""
    flush_timeout_s: float = 300.0
    #: max.message.bytes of each remote topic, as the target reported it.
    max_record_bytes: dict[str, int] = field(default_factory=dict)
    #: Compacted topic on the target holding the offset map's segments.
    offset_map_topic: str = ""
    #: Last segment per source partition: the offset map's when the job started, then the one the
    #: task's last finished interval wrote (:meth:`~.sink.Sink.finish`). An interval that continues it
    #: extends it (same key) instead of adding a segment.
    tails: dict[PartitionKey, Tail] = field(default_factory=dict)
    #: Exactly-once: records, segments and progress in one transaction per transaction group per interval.
    exactly_once: bool = False
    #: Exactly-once: how many transaction groups the source partitions fall into, each written by one
    #: transactional id (0: one per source partition). :mod:`sparkmirror.core.transactions`.
    transaction_groups: int = PER_PARTITION
    #: Group on the target whose committed offsets (on the remote topics) are the flow's source
    #: progress: the next upstream offset to mirror.
    progress_group: str = ""
    #: librdkafka config of a consumer on the target (reads the progress).
    consumer_config: dict[str, str] = field(default_factory=dict, repr=False)
    #: librdkafka config of a consumer on the source (the copy tasks' reader).
    source_consumer_config: dict[str, str] = field(default_factory=dict, repr=False)
    #: ``sparkmirror.transport``: the tasks' clients are librdkafka's or the transport JVM's (Java's), or
    #: librdkafka reads and Java writes (``java-writes``): :data:`JAVA_READS`, :data:`JAVA_WRITES`.
    transport: str = "librdkafka"
    #: Java client settings of the source consumer (:data:`JAVA_READS`) and the target producer (:data:`JAVA_WRITES`).
    java_source_consumer_config: dict[str, str] = field(default_factory=dict, repr=False)
    java_producer_config: dict[str, str] = field(default_factory=dict, repr=False)
    #: librdkafka config of an admin client on the source (a task checks its topics' ids with it).
    source_admin_config: dict[str, str] = field(default_factory=dict, repr=False)
    #: The id of each source topic the job copies, as the driver checked it before the job started: a
    #: task whose topic now has another id (deleted and re-created) copies nothing more of it.
    topic_ids: dict[str, str] = field(default_factory=dict)
    transaction_timeout_ms: int = 300_000
    #: How long a task waits for one step on the target (reading the progress, committing it;
    #: exactly-once: fencing, adding the progress to the transaction, committing it) before it fails
    #: and Spark retries it with new clients (:mod:`.waits`).
    target_wait_s: float = 120.0
    #: Changes whenever the driver fences the flow's transactional ids, so executors build new
    #: producers instead of reusing fenced ones.
    producer_generation: str = ""
    #: milliseconds between two commits of a task's progress.
    commit_interval_ms: int = 200
    #: a task commits sooner once it has handed this many records to its producers
    #: since its last commit (``sparkmirror.batch.max.records``).
    interval_max_records: int = 2_000_000
    #: at least once, a task writes with one producer per this many of its partitions
    #: (``sparkmirror.partitions.per.producer``; :func:`~sparkmirror.core.transactions.producers_for`).
    partitions_per_producer: int = 16
    #: a producer none of whose partitions had a record for this long is closed (at least once not the
    #: first; exactly once a group's with no transaction open) (``sparkmirror.producer.idle.close.ms``; 0: never).
    producer_idle_close_ms: int = 30_000
    #: where the driver takes the tasks' reports (host, port), and the secret a task
    #: proves itself with (:mod:`sparkmirror.pipeline.reports`).
    report_address: tuple[str, int] = ("", 0)
    report_token: str = field(default="", repr=False)
    #: the flow control a task follows from its start until the driver's first
    #: answer (a flow paused or throttled when its job starts copies nothing it should not meanwhile).
    start_control: Answer = field(default_factory=Answer)
    #: TEST HOOK (tests only, from $SPARKMIRROR_TEST_FAIL_AFTER_RECORDS): the first attempt of
    #: every task fails after handing this many records to its producers.
    test_fail_after_records: int = 0

    def remote_topic(self, topic: str) -> str:
        return self.policy.format_remote_topic(self.source_alias, topic)

    def transactional_id(self, topic: str, partition: int) -> str:
        """The id that writes this source partition: its group's (or its own): the fencing key."""
        return writer_id(self.source_alias, self.target_alias, topic, partition, self.transaction_groups)

    @property
    def java_reads(self) -> bool:
        """The tasks read the source with the transport's Java consumer."""
        return self.transport in JAVA_READS

    @property
    def java_writes(self) -> bool:
        """The tasks write the target with the transport's Java producers."""
        return self.transport in JAVA_WRITES

    def producers_for(self, partitions: int) -> int:
        """How many producers a task writing ``partitions`` source partitions at least once writes with."""
        if self.java_writes:
            return 1  # the Java producer sends every partition of a broker in one request
        return producers_for(partitions, self.partitions_per_producer)

    def transactional_producer_config(self, topic: str, partition: int) -> dict[str, str]:
        """The exactly-once producer that writes one source partition."""
        return self.transactional_config(self.transactional_id(topic, partition))

    def transactional_config(self, transactional_id: str) -> dict[str, str]:
        """An exactly-once producer with this id (the executors' writers, and the driver to fence)."""
        conf = dict(self.producer_config)
        conf["transactional.id"] = transactional_id
        conf["transaction.timeout.ms"] = str(self.transaction_timeout_ms)
        conf.setdefault("client.id", f"sparkmirror-{self.flow}")
        # Connect to the target's brokers at once: with librdkafka's sparse connections,
        # init_transactions often found no broker up and waited for its 500 ms coordinator timer.
        conf.setdefault("enable.sparse.connections", "false")
        return conf

    def java_transactional_config(self, transactional_id: str) -> dict[str, str]:
        """:meth:`transactional_config` for the transport's Java producer, by the Java client's names."""
        conf = dict(self.java_producer_config)
        conf["transactional.id"] = transactional_id
        conf["transaction.timeout.ms"] = str(self.transaction_timeout_ms)
        conf.setdefault("client.id", f"sparkmirror-{self.flow}")
        return conf

    def reader_config(self, *, partition_eof: bool = False) -> dict[str, str]:
        """A task's source consumer: a position the source no longer holds is an error, never a silent
        jump (the driver then looks for source loss). ``partition_eof``: it says each time it reaches a
        partition's end (only a task with an end to reach needs it: :func:`~.clients.source_consumer`)."""
        conf = {**READER_DEFAULTS, **self.source_consumer_config, **READER_SETTINGS}
        conf["enable.partition.eof"] = "true" if partition_eof else "false"
        conf["group.id"] = reader_group(self.flow)  # never joined, never committed to
        conf.setdefault("client.id", f"sparkmirror-{self.flow}-reader")
        return conf

    def java_reader_config(self) -> dict[str, str]:
        """:meth:`reader_config` for the transport's Java consumer, by the Java client's names."""
        conf = {**JAVA_READER_DEFAULTS, **self.java_source_consumer_config, **JAVA_READER_SETTINGS}
        conf["group.id"] = reader_group(self.flow)
        conf.setdefault("client.id", f"sparkmirror-{self.flow}-reader")
        return conf

    def progress_consumer_config(self) -> dict[str, str]:
        """A target consumer of the progress group (reads the progress, names the group in transactions)."""
        return self.group_consumer_config(self.progress_group)

    def group_consumer_config(self, group: str) -> dict[str, str]:
        """A target consumer that reads what ``group`` committed (``read_committed``: stable offsets only)."""
        return {
            **self.consumer_config,
            "group.id": group,
            "enable.auto.commit": "false",
            "isolation.level": "read_committed",
        }
