"""Kafka clients built from MM2-style (Java client) properties.

The configuration speaks the Java client's language, because that is what an
MM2 file holds and what Spark's Kafka source (a Java consumer) takes as is.
The writer and the admin work use confluent-kafka (librdkafka), whose key
names mostly agree; this module turns the one into the other, drops what only
makes sense to the JVM, and refuses what cannot be carried over (a JKS trust
store, say) with an error that names the key.

It must never log a property value: values may be secrets.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from sparkmirror.errors import ConfigError

log = logging.getLogger(__name__)

#: Java client keys without meaning to librdkafka (serialisation is ours).
_JVM_ONLY = frozenset(
    {
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
        "buffer.memory",
        "interceptor.classes",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "partitioner.class",
        "partitioner.ignore.keys",
        "partitioner.adaptive.partitioning.enable",
        "partitioner.availability.timeout.ms",
        "security.providers",
        "ssl.provider",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
        "ssl.engine.factory.class",
        "sasl.client.callback.handler.class",
        "sasl.login.callback.handler.class",
        "sasl.login.class",
        "ssl.truststore.type",
        "ssl.keystore.type",
        "ssl.protocol",
        "auto.include.jmx.reporter",
        "enable.metrics.push",
        "default.api.timeout.ms",
        "exclude.internal.topics",
        "allow.auto.create.topics",
        "client.dns.lookup",
        "max.block.ms",
        "metadata.max.idle.ms",
        "ssl.enabled.protocols",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
        "transaction.timeout.ms",  # the exactly-once writer sets its own
        # Java consumer tuning for Spark's source; librdkafka has no such key or other values.
        "max.poll.records",
        "partition.assignment.strategy",
    }
)

#: Java key -> librdkafka key, where the names differ.
_RENAMED = {
    "max.request.size": "message.max.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "fetch.max.wait.ms": "fetch.wait.max.ms",
}

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')

#: What "no data loss" means for the writer's producer (DESIGN.md).
PRODUCER_SAFETY = {
    "acks": "all",
    "enable.idempotence": "true",
    "max.in.flight.requests.per.connection": "5",
}

#: Java client defaults the writer keeps, where librdkafka's differ.
PRODUCER_DEFAULTS = {
    "delivery.timeout.ms": "120000",
    "linger.ms": "5",
    "batch.size": "1000000",
    "compression.type": "none",
}


def librdkafka_config(java_props: Mapping[str, object], *, role: str) -> dict[str, str]:
    """Translate Java client properties into a confluent-kafka configuration.

    ``role`` ("producer", "consumer" or "admin") only shapes error messages.
    Raises :class:`ConfigError` naming the key when something cannot be
    expressed for librdkafka.
    """
    out: dict[str, str] = {}
    props = {k: _plain(v) for k, v in java_props.items()}
    for key, value in props.items():
        if key in _JVM_ONLY or key.startswith("sasl.login.") or key.startswith("metrics."):
            continue
        if key == "sasl.jaas.config":
            out.update(_jaas_to_librdkafka(value, role=role))
            continue
        if key == "ssl.truststore.location":
            if props.get("ssl.truststore.type", "JKS").upper() != "PEM":
                raise ConfigError(
                    f"{role}: ssl.truststore.location must point to a PEM file for the writer "
                    "(set ssl.truststore.type=PEM); JKS trust stores are readable only by the JVM",
                    key="ssl.truststore.location",
                )
            out["ssl.ca.location"] = value
            continue
        if key == "ssl.truststore.password":
            continue  # PEM trust stores carry no password
        if key == "ssl.keystore.location" and props.get("ssl.keystore.type", "JKS").upper() not in (
            "PKCS12",
            "PEM",
        ):
            raise ConfigError(
                f"{role}: ssl.keystore.location must be a PKCS12 or PEM key store for the writer "
                "(set ssl.keystore.type)",
                key="ssl.keystore.location",
            )
        out[_RENAMED.get(key, key)] = value
    return out


def _plain(value: object) -> str:
    getter = getattr(value, "get_secret_value", None)
    return str(getter() if getter else value)


def _jaas_to_librdkafka(jaas: str, *, role: str) -> dict[str, str]:
    """librdkafka has no JAAS; lift username and password out of the login module."""
    if "PlainLoginModule" in jaas or "ScramLoginModule" in jaas:
        options = dict(_JAAS_OPTION.findall(jaas))
        if "username" in options and "password" in options:
            return {"sasl.username": options["username"], "sasl.password": options["password"]}
    raise ConfigError(
        f"{role}: sasl.jaas.config must use PlainLoginModule or ScramLoginModule with username and "
        "password (the only login modules the writer can use)",
        key="sasl.jaas.config",
    )


def producer_config(java_props: Mapping[str, object], *, key_prefix: str = "producer") -> dict[str, str]:
    """The writer's producer: Java defaults, operator overrides, then safety.

    ``key_prefix`` is how the operator would name the producer's keys
    (``B.producer``), for error messages.
    """
    conf = dict(PRODUCER_DEFAULTS)
    conf.update(librdkafka_config(java_props, role="producer"))
    overridden = {k for k in PRODUCER_SAFETY if k in conf and conf[k].lower() != PRODUCER_SAFETY[k]}
    if "acks" in overridden and conf["acks"] not in ("all", "-1"):
        raise ConfigError(
            f"{key_prefix}.acks={conf['acks']} would allow data loss; sparkmirror writes with acks=all",
            key=f"{key_prefix}.acks",
        )
    if "enable.idempotence" in overridden:
        raise ConfigError(
            f"{key_prefix}.enable.idempotence=false would allow duplicates and reordering on retry; "
            "sparkmirror writes with the idempotent producer",
            key=f"{key_prefix}.enable.idempotence",
        )
    conf.update({k: v for k, v in PRODUCER_SAFETY.items() if k not in conf or k in overridden})
    if int(conf["max.in.flight.requests.per.connection"]) > 5:
        raise ConfigError(
            f"{key_prefix}.max.in.flight.requests.per.connection must be at most 5 with idempotence",
            key=f"{key_prefix}.max.in.flight.requests.per.connection",
        )
    return conf


_PROPERTY = re.compile(r'(?:property|Configuration property)[:\s]+"([^"]+)"')


def validate_librdkafka(conf: Mapping[str, str], *, role: str, key_hint: str) -> None:
    """Have librdkafka check ``conf`` now, on the driver, before Spark starts.

    librdkafka checks names and values when the client is created (the client
    is dropped at once). Its messages can quote values, which may be secrets,
    so only the property name is passed on.
    """
    from confluent_kafka import KafkaException, Producer

    # No Python logger here: a librdkafka log callback into Python from a
    # client being destroyed crashed the interpreter (seen with pytest's live
    # logging); log_level 0 keeps the throw-away client silent instead.
    quiet = {**conf, "log_level": 0}
    try:
        Producer(quiet).flush(0)
    except KafkaException as exc:
        text = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
        m = _PROPERTY.search(text)
        prop = m.group(1) if m else "?"
        kind = "unknown to" if "No such" in text else "has a value not accepted by"
        raise ConfigError(
            f"{role} property {prop!r} {kind} the writer's Kafka client (librdkafka); set it as "
            f"{key_hint}.{prop} only if librdkafka knows it, or remove it",
            key=f"{key_hint}.{prop}",
        ) from None


def admin_config(java_props: Mapping[str, object]) -> dict[str, str]:
    conf = librdkafka_config(java_props, role="admin")
    # Producer/consumer tuning keys mean nothing to an admin client.
    return {k: v for k, v in conf.items() if k in _ADMIN_KEYS or k.startswith(("ssl.", "sasl.", "security."))}


_ADMIN_KEYS = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "request.timeout.ms",
        "retry.backoff.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "socket.connection.setup.timeout.ms",
        "connections.max.idle.ms",
        "metadata.max.age.ms",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
    }
)
