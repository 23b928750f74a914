"""Reproduce librdkafka's endless ``send_offsets_to_transaction`` after a group coordinator's broker dies.

``rd_kafka_send_offsets_to_transaction`` waits for its answer without a time limit in the calling
thread (``rd_kafka_txn_op_req1(rk, rko, RD_POLL_INFINITE)``: its ``timeout`` is only looked at when
the group coordinator answers). Its ``TxnOffsetCommit`` goes through librdkafka's coordinator
cache. A broker SIGKILLed in a KRaft cluster is fenced after ``broker.session.timeout.ms`` (9 s)
and leaves the metadata; librdkafka (2.10 and later) then retires it, but keeps it as the group's
cached coordinator and asks for a new coordinator only when a broker connection changes state
(librdkafka issue #5511). With the other brokers' connections up, nothing changes until the next
periodic metadata refresh (``topic.metadata.refresh.interval.ms``, 5 minutes) learns of the
restarted broker.

This script starts a 3-broker dev cluster, commits a few transactions with offsets for a group,
SIGKILLs the group's coordinator, starts it again 10 s later, and times the next
``send_offsets_to_transaction`` (timeout 10 s):

- plain: the call as it is (issue 14 saw minutes; give up with ``--limit``, default 420 s);
- ``--nudge``: the same, with ``list_topics(topic)`` on the producer every 5 s once the broker is
  back: the metadata adds the broker again, and librdkafka asks for the coordinator again;
- ``--product``: through sparkmirror's bounded wait (``pipeline/executor/waits.py``): refreshed,
  said, and failed past its limit.

    .venv/bin/python bench/txn_coordinator_stall.py [--nudge | --product] [--base-port 21700]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import threading
import time
import uuid
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--nudge", action="store_true", help="refresh the producer's metadata while waiting")
    mode.add_argument("--product", action="store_true", help="through sparkmirror's bounded wait")
    ap.add_argument("--base-port", type=int, default=21700)
    ap.add_argument("--limit", type=float, default=420.0, help="seconds to wait for the call at most")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from sparkmirror.devcluster.cluster import DevClusters
    from sparkmirror.pipeline.executor.waits import call_within

    started = time.monotonic()

    def say(text: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {text}", flush=True)

    clusters = DevClusters(Path(tempfile.mkdtemp(prefix="txn-stall-")))
    bootstrap = clusters.up(["X"], brokers=3, base_port=args.base_port)["X"]
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic, group = f"t-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        admin.create_topics([NewTopic(topic, 3, 3)])[topic].result()
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": f"tx-{uuid.uuid4().hex[:6]}",
                "transaction.timeout.ms": 300000,
                "enable.sparse.connections": False,
                "log_level": 0,
            }
        )
        producer.init_transactions(60)
        group_md = Consumer({"bootstrap.servers": bootstrap, "group.id": group}).consumer_group_metadata()
        back = threading.Event()

        def send_offsets(n: int) -> None:
            offsets = [TopicPartition(topic, 0, n)]
            if args.product:
                call_within(
                    lambda: producer.send_offsets_to_transaction(offsets, group_md, 10),
                    what=f"send_offsets_to_transaction({topic}[0] -> {n})",
                    limit_s=args.limit,
                    nudge=lambda: producer.list_topics(topic, timeout=5),
                )
                return
            answered = threading.Event()

            def nudge() -> None:
                while not answered.wait(5):
                    if back.is_set():
                        producer.list_topics(topic, timeout=5)

            if args.nudge:
                threading.Thread(target=nudge, daemon=True).start()
            outcome: list[BaseException | None] = []
            call = threading.Thread(
                target=lambda: outcome.append(
                    _error(lambda: producer.send_offsets_to_transaction(offsets, group_md, 10))
                ),
                daemon=True,
            )
            call.start()
            call.join(args.limit)
            answered.set()
            if call.is_alive():
                raise TimeoutError(f"send_offsets_to_transaction(timeout=10) did not return within {args.limit:.0f}s")
            if outcome[0] is not None:
                raise outcome[0]

        def transaction(n: int) -> float:
            producer.begin_transaction()
            for i in range(30):
                producer.produce(topic, value=b"x", partition=i % 3)
            producer.flush(60)
            t = time.monotonic()
            send_offsets(n)
            producer.commit_transaction(60)
            return time.monotonic() - t

        for n in range(1, 4):
            transaction(n)
        coordinator = admin.describe_consumer_groups([group])[group].result().coordinator.id
        say(f"group {group}'s coordinator is broker {coordinator}: SIGKILL, start again in 10 s")
        clusters.kill_broker("X", coordinator)

        def restart() -> None:
            time.sleep(10)
            clusters.restart_broker("X", coordinator)
            back.set()
            say(f"broker {coordinator} is back")

        threading.Thread(target=restart, daemon=True).start()
        for n in range(4, 8):
            try:
                took = transaction(n)
            except (TimeoutError, KafkaException, Exception) as exc:  # noqa: BLE001 - the outcome is the report
                say(f"transaction {n}: {type(exc).__name__}: {exc}")
                return
            say(f"transaction {n} committed; send_offsets_to_transaction took {took:.1f}s")
            time.sleep(1)
    finally:
        clusters.down()


def _error(call: object) -> BaseException | None:
    try:
        call()  # type: ignore[operator]
    except BaseException as exc:  # noqa: BLE001 - handed to the caller
        return exc
    return None


if __name__ == "__main__":
    main()
