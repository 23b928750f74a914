"""The order of ``Producer.produce``'s positional arguments (topic, value, key, partition, callback,
on_delivery, timestamp, headers; the two callback slots are one), which ``Sink.write`` relies on.

``Sink.write`` passes them by position (keywords cost about 1.3 µs a record more). A real librdkafka
producer with no reachable broker queues the record; purging the queue hands it back to its delivery
callback, where every field must be where it was put.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, Message, Producer


def test_positional_arguments_land_in_topic_value_key_partition_callback_timestamp_headers() -> None:
    producer = Producer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0, "message.timeout.ms": 60_000})
    reports: list[tuple[KafkaError | None, Message]] = []
    headers = [("h", b"v"), ("empty", None)]
    producer.produce(
        "t", b"value", b"key", 3, lambda err, msg: reports.append((err, msg)), None, 1_700_000_000_123, headers
    )
    producer.purge()
    producer.poll(1)
    assert len(reports) == 1
    err, msg = reports[0]
    assert err is not None and err.code() == KafkaError._PURGE_QUEUE
    assert (msg.topic(), msg.value(), msg.key(), msg.partition()) == ("t", b"value", b"key", 3)
    # A purged record shows neither its timestamp nor its headers; their slots show in what they
    # accept (a swap would take the other's type). tests/integration/test_mirror.py checks both on a broker.
    for bad, slot in (((3, None, None, "not a timestamp"), "timestamp"), ((3, None, None, 0, 42), "headers")):
        try:
            producer.produce("t", b"v", b"k", *bad)
        except TypeError:
            continue
        raise AssertionError(f"produce() took a wrong type in its {slot} slot")
