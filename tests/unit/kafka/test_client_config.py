"""Java client keys (as MM2 files hold them) reach librdkafka under librdkafka's names."""

from __future__ import annotations

import pytest

from sparkmirror.errors import ConfigError
from sparkmirror.kafka.clients import librdkafka_config, validate_librdkafka


def test_java_consumer_tuning_keys_translate_or_stay_with_the_jvm() -> None:
    conf = librdkafka_config(
        {
            "bootstrap.servers": "a:9092",
            "fetch.max.wait.ms": "10",  # librdkafka: fetch.wait.max.ms
            "max.poll.records": "500",  # Java only
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor",  # Java class
            "fetch.min.bytes": "1",
        },
        role="consumer",
    )
    assert conf == {"bootstrap.servers": "a:9092", "fetch.wait.max.ms": "10", "fetch.min.bytes": "1"}
    validate_librdkafka(conf, role="consumer", key_hint="A.consumer")  # librdkafka accepts every key


def test_a_key_librdkafka_refuses_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError) as info:
        validate_librdkafka({"no.such.key": "1"}, role="consumer", key_hint="A.consumer")
    assert info.value.key == "A.consumer.no.such.key"


def test_admin_keeps_every_security_setting_and_drops_tuning() -> None:
    from sparkmirror.kafka.clients import admin_config

    conf = admin_config(
        {
            "bootstrap.servers": "a:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'clientId="c" clientSecret="s";',
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            "https.ca.location": "/etc/idp-ca.pem",
            "linger.ms": "5",
        }
    )
    assert conf == {
        "bootstrap.servers": "a:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.client.id": "c",
        "sasl.oauthbearer.client.secret": "s",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        "sasl.oauthbearer.method": "oidc",
        "https.ca.location": "/etc/idp-ca.pem",
    }
