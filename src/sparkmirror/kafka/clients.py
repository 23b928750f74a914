"""Kafka clients built from MM2-style (Java client) properties.

The configuration speaks the Java client's language, because that is what an
MM2 file holds. The copy (its reader and its writer) and the admin work use
confluent-kafka (librdkafka), whose key names mostly agree; this module turns
the one into the other, drops what only makes sense to the JVM, and refuses
what cannot be carried over (a JKS trust store, say) with an error that names
the key.

It must never log a property value: values may be secrets.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from sparkmirror.errors import ConfigError
from sparkmirror.kafka.stores import STORE_KEYS, store_settings

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

_JAAS_OPTION = re.compile(r'([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')
_JAAS_ESCAPE = re.compile(r"\\(.)")

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


def java_config(java_props: Mapping[str, object]) -> dict[str, str]:
    """Java client properties as the Java clients take them: every value as text."""
    return {k: _plain(v) for k, v in java_props.items()}


def java_producer_config(java_props: Mapping[str, object]) -> dict[str, str]:
    """The writer's producer by the Java client's names (``sparkmirror.transport = java``): the same
    defaults and safety as :func:`producer_config`, whose checks of the operator's keys apply to both."""
    # Not librdkafka's batch.size: the Java producer reserves a whole batch of buffer.memory (32 MiB)
    # for each partition it batches, so 1 MB batches would let 32 of 1,000 partitions batch at once.
    # Java's default (16 KiB) is MM2's.
    defaults = {k: v for k, v in PRODUCER_DEFAULTS.items() if k != "batch.size"}
    conf = {**defaults, **java_config(java_props)}
    conf.update(PRODUCER_SAFETY)
    return conf


def librdkafka_config(java_props: Mapping[str, object], *, role: str) -> dict[str, str]:
    """Translate Java client properties into a confluent-kafka configuration.

    ``role`` ("producer", "consumer" or "admin") only shapes error messages.
    Raises :class:`ConfigError` naming the key when something cannot be
    expressed for librdkafka.
    """
    out: dict[str, str] = {}
    props = {k: _plain(v) for k, v in java_props.items()}
    for key, value in props.items():
        if key in _JVM_ONLY or key in STORE_KEYS or key.startswith(("sasl.login.", "metrics.")):
            continue
        if key.startswith("sasl.oauthbearer.") and key not in _OAUTHBEARER_KEYS:
            continue  # the JVM's token validation and retrieval settings; librdkafka has its own
        if key == "sasl.jaas.config":
            out.update(_jaas_to_librdkafka(value, role=role))
            continue
        if key == "ssl.endpoint.identification.algorithm":
            out[key] = _endpoint_identification(value, role=role)
            continue
        if key in _OAUTHBEARER_KEYS:
            out[_OAUTHBEARER_KEYS[key]] = value
            continue
        out[_RENAMED.get(key, key)] = value
    # JKS, PKCS12 and inline PEM stores become PEM files librdkafka reads (kafka/stores.py).
    out.update(store_settings(props, role=role))
    if "sasl.oauthbearer.client.id" in out:
        out.setdefault("sasl.oauthbearer.method", "oidc")
    return out


#: Java's OAUTHBEARER client keys librdkafka knows, by librdkafka's name.
_OAUTHBEARER_KEYS = {
    "sasl.oauthbearer.token.endpoint.url": "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.scope": "sasl.oauthbearer.scope",
    "sasl.oauthbearer.client.credentials.client.id": "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.credentials.client.secret": "sasl.oauthbearer.client.secret",
}


def _endpoint_identification(value: str, *, role: str) -> str:
    """Java's ``""`` (off) or ``https`` as librdkafka's ``none`` / ``https``."""
    v = value.strip().lower()
    if v in ("", "none"):
        return "none"
    if v == "https":
        return "https"
    raise ConfigError(
        f"{role}: ssl.endpoint.identification.algorithm: expected https or an empty value, got {value!r}",
        key="ssl.endpoint.identification.algorithm",
    )


def _plain(value: object) -> str:
    getter = getattr(value, "get_secret_value", None)
    return str(getter() if getter else value)


def jaas_options(jaas: str) -> dict[str, str]:
    """The options of a JAAS line (``name="value"`` or ``name=word``), quotes and escapes undone."""
    options: dict[str, str] = {}
    for m in _JAAS_OPTION.finditer(jaas):
        name, quoted, word = m.group(1), m.group(2), m.group(3)
        options[name] = _JAAS_ESCAPE.sub(r"\1", quoted) if quoted is not None else word
    return options


def _jaas_to_librdkafka(jaas: str, *, role: str) -> dict[str, str]:
    """librdkafka has no JAAS; lift the credentials out of the login module."""
    options = jaas_options(jaas)
    if "PlainLoginModule" in jaas or "ScramLoginModule" in jaas:
        if "username" in options and "password" in options:
            return {"sasl.username": options["username"], "sasl.password": options["password"]}
    elif "OAuthBearerLoginModule" in jaas:
        out = {}
        for java, rdkafka in (
            ("clientId", "sasl.oauthbearer.client.id"),
            ("clientSecret", "sasl.oauthbearer.client.secret"),
            ("scope", "sasl.oauthbearer.scope"),
        ):
            if java in options:
                out[rdkafka] = options[java]
        if "sasl.oauthbearer.client.id" in out and "sasl.oauthbearer.client.secret" in out:
            return out
        if options.get("unsecuredLoginStringClaim_sub"):
            return {"enable.sasl.oauthbearer.unsecure.jwt": "true"}
    raise ConfigError(
        f"{role}: sasl.jaas.config must use PlainLoginModule or ScramLoginModule with username and "
        "password, or OAuthBearerLoginModule with clientId and clientSecret (the login modules "
        "librdkafka can stand in for)",
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
    return {
        k: v
        for k, v in conf.items()
        if k in _ADMIN_KEYS or k.startswith(("ssl.", "sasl.", "security.", "https.", "enable.sasl."))
    }


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
