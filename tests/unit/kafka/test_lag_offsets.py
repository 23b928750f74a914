"""ListOffsets through the admin client: a stale leader refreshes the metadata and asks once more."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from sparkmirror.kafka.lag import list_offsets


class _Admin:
    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        self.refreshed: list[str] = []

    def list_offsets(self, request, request_timeout: float):  # type: ignore[no-untyped-def]
        out = {}
        for tp in request:
            fut: Future[object] = Future()
            if self.errors:
                fut.set_exception(RuntimeError(self.errors[0]))
            else:
                fut.set_result(type("R", (), {"offset": 7})())
            out[tp] = fut
        if self.errors:
            self.errors.pop(0)
        return out

    def list_topics(self, topic: str, timeout: float) -> None:
        self.refreshed.append(topic)


def test_a_stale_leader_refreshes_the_metadata_and_asks_once_more() -> None:
    admin = _Admin(['KafkaError{code=FENCED_LEADER_EPOCH,val=74,str="Broker: Leader epoch is older"}'])
    assert list_offsets(admin, {TopicPartition("A.t", 0): OffsetSpec.earliest()}) == {("A.t", 0): 7}  # type: ignore[arg-type]
    assert admin.refreshed == ["A.t"]


def test_any_other_error_is_raised_at_once() -> None:
    admin = _Admin(["KafkaError{code=TOPIC_AUTHORIZATION_FAILED}"])
    with pytest.raises(RuntimeError, match="TOPIC_AUTHORIZATION_FAILED"):
        list_offsets(admin, {TopicPartition("A.t", 0): OffsetSpec.earliest()})  # type: ignore[arg-type]
    assert admin.refreshed == []
