"""Load an MM2 ``mm2.properties`` file (plus sparkmirror's ``sparkmirror.*`` keys) into the model.

MM2 semantics kept: ``clusters`` is required; a flow ``A->B`` runs only when
``A->B.enabled = true``; ``A->B.<key>`` overrides the top-level ``<key>``; ``--clusters``
keeps only the flows whose *target* is listed; list values are comma-separated.

Client properties, lowest precedence first (later levels override earlier ones):

1. top-level connection keys (``bootstrap.servers``, ``security.protocol``, ``ssl.*``, ``sasl.*``);
2. top-level ``consumer.*`` / ``producer.*`` / ``admin.*`` (prefix stripped);
3. ``X.<connection key>`` for cluster ``X``;
4. ``X.consumer.*`` / ``X.producer.*`` / ``X.admin.*``;
5. flow level, for flow ``S->T`` (MM2's connector-level prefixes):
   ``S->T.source.cluster.<connection key>`` / ``S->T.target.cluster.<connection key>``, then
   ``S->T.consumer.*`` (source consumer), ``S->T.producer.*`` (target producer),
   ``S->T.admin.*`` (both admin clients), then ``S->T.source.consumer.*``,
   ``S->T.source.admin.*``, ``S->T.target.producer.*``, ``S->T.target.admin.*``,
   ``S->T.target.consumer.*``.

Differences from MM2 4.x, on purpose: MM2 ignores top-level ``consumer.*`` etc. (level 2)
for its connectors, and lets ``X.consumer.*`` beat ``S->T.consumer.*``; here a more specific
key always wins. MM2's connector keys that look like client keys (``consumer.poll.timeout.ms``,
``admin.timeout.ms``) are not passed to clients. ``enable.auto.commit``, ``auto.offset.reset``
and ``client.id`` are left to the code that builds each client, which sets them as that client needs
(the copy's source consumer, for one, never commits to a group and fails on a position the source
no longer holds).
"""

from __future__ import annotations

import logging
import os
import re
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sparkmirror.config.model import (
    CLIENT_ROLES,
    RETIRED_KEYS,
    ClusterConfig,
    FlowConfig,
    MirrorConfig,
    SparkSettings,
)
from sparkmirror.config.properties import parse_properties, read_properties_file
from sparkmirror.config.providers import resolve_placeholders
from sparkmirror.core.filters import compile_pattern_list
from sparkmirror.core.policy import DEFAULT_POLICY_CLASS, policy_from_name
from sparkmirror.errors import ConfigError

__all__ = ["load_config", "parse_list"]

log = logging.getLogger(__name__)

_FLOW_KEY = re.compile(r"^([^.]*?)->([^.]*?)\.(.+)$")
_ROLES = ("consumer", "producer", "admin")
# MM2 connector keys that share a client prefix but are not client properties.
#: The one sparkmirror key a cluster takes (``B.sparkmirror.throttle.bytes.per.second``): the flows into it.
TARGET_THROTTLE_KEY = "sparkmirror.throttle.bytes.per.second"
_NOT_CLIENT_KEYS = frozenset({"consumer.poll.timeout.ms", "admin.timeout.ms"})
_SPARK_CONF_PREFIX = "sparkmirror.spark.conf."

# Keys MM2 (its connectors, the Connect worker it embeds, MirrorMakerConfig) reads. Generous by design.
_MM2_KEYS = frozenset(
    {
        "clusters", "enabled", "name", "connector.class", "tasks.max", "topics", "topics.exclude", "groups",
        "groups.exclude", "config.properties.exclude", "use.defaults.from", "replication.factor",
        "source.cluster.alias", "target.cluster.alias", "topic.filter.class", "group.filter.class",
        "config.property.filter.class", "forwarding.admin.class", "add.source.alias.to.metrics",
        "metric.reporters", "exactly.once.support", "exactly.once.source.support", "transaction.boundary",
        "transaction.boundary.interval.ms", "dedicated.mode.enable.internal.rest", "listeners",
        "admin.listeners", "group.id", "client.id", "plugin.path", "plugin.discovery",
        "scheduled.rebalance.max.delay.ms", "session.timeout.ms", "heartbeat.interval.ms",
        "rebalance.timeout.ms", "connect.protocol", "task.shutdown.graceful.timeout.ms",
        "access.control.allow.origin", "access.control.allow.methods", "response.http.headers.config",
        "topic.creation.enable", "config.action.reload", "key.converter", "value.converter",
        "header.converter", "transforms", "predicates", "config.providers",
    }
)  # fmt: skip
_MM2_PREFIXES = (
    "replication.policy.", "emit.", "sync.", "refresh.", "offset", "checkpoints.", "heartbeats.",
    "config.storage.", "status.storage.", "key.converter.", "value.converter.", "header.converter.",
    "task.", "tasks.", "worker.", "config.providers.", "errors.", "topic.creation.", "transforms.",
    "predicates.", "metrics.", "rest.", "inter.worker.", "listeners.",
)  # fmt: skip
# Keys a cluster prefix (``X.<key>``) may carry besides client keys: the Connect worker that MM2
# runs for target X reads them.
_WORKER_KEYS = frozenset(
    {
        "group.id", "client.id", "listeners", "admin.listeners", "exactly.once.source.support",
        "scheduled.rebalance.max.delay.ms", "session.timeout.ms", "heartbeat.interval.ms",
        "rebalance.timeout.ms", "connect.protocol", "task.shutdown.graceful.timeout.ms", "metric.reporters",
        "plugin.path", "plugin.discovery", "key.converter", "value.converter", "header.converter",
    }
)  # fmt: skip
_WORKER_PREFIXES = (
    "config.storage.", "status.storage.", "offset.storage.", "offset.flush.", "key.converter.",
    "value.converter.", "header.converter.", "rest.", "inter.worker.", "metrics.", "config.providers",
    "worker.", "task.", "replication.policy.",
)  # fmt: skip


# MM2 keys that change what is mirrored and that sparkmirror does not implement: a file that sets
# them to anything but MM2's default is refused (mirroring something else than what the operator
# asked for would be silent loss or corruption). Per key: the values that are accepted (MM2's
# default, written as a full class name or a simple one; "" for a list that is empty), and what
# to do instead.
_MM2_DEFAULT_FILTERS = {
    "topic.filter.class": "DefaultTopicFilter",
    "group.filter.class": "DefaultGroupFilter",
    "config.property.filter.class": "DefaultConfigPropertyFilter",
}
_CONVERTER_KEYS = ("key.converter", "value.converter", "header.converter")
_UNSUPPORTED_ADVICE = {
    "topic.filter.class": "select topics with topics / topics.exclude (regex lists) instead",
    "group.filter.class": "select groups with groups / groups.exclude (regex lists) instead",
    "config.property.filter.class": "exclude topic configs with config.properties.exclude instead",
    "transforms": "Single Message Transforms are not supported: records are copied byte for byte; "
    "remove the key (and its transforms.* keys) or transform downstream",
    "predicates": "predicates only serve transforms, which are not supported; remove the key",
    "key.converter": "records are copied byte for byte (MM2's ByteArrayConverter); remove the key",
    "value.converter": "records are copied byte for byte (MM2's ByteArrayConverter); remove the key",
    "header.converter": "headers are copied byte for byte (MM2's ByteArrayConverter); remove the key",
}


def _unsupported_value(key: str, value: str) -> bool:
    """True when ``key = value`` asks for something sparkmirror does not do (see _UNSUPPORTED_ADVICE)."""
    value = value.strip()
    if key in _MM2_DEFAULT_FILTERS:
        simple = _MM2_DEFAULT_FILTERS[key]
        return value not in ("", simple, f"org.apache.kafka.connect.mirror.{simple}")
    if key in _CONVERTER_KEYS:
        return value not in ("", "ByteArrayConverter", "org.apache.kafka.connect.converters.ByteArrayConverter")
    if key in ("transforms", "predicates"):
        return any(parse_list(value))
    return False


def refuse_unsupported(key: str, shown_as: str, value: str) -> None:
    """Raise a ConfigError when ``key`` (written as ``shown_as``) changes what is mirrored in a way
    sparkmirror does not implement."""
    if key in _UNSUPPORTED_ADVICE and _unsupported_value(key, value):
        raise ConfigError(
            f"{shown_as}: not supported by sparkmirror (got {value.strip()!r}); {_UNSUPPORTED_ADVICE[key]}",
            key=shown_as,
        )


def _is_connection_key(key: str) -> bool:
    """Keys MM2 treats as per-cluster client keys (MirrorClientConfig's CLIENT_CONFIG_DEF)."""
    return key in ("bootstrap.servers", "security.protocol") or key.startswith(("ssl.", "sasl."))


def _is_role_key(key: str) -> bool:
    return key.startswith(tuple(f"{role}." for role in _ROLES)) and key not in _NOT_CLIENT_KEYS


def _is_known_mm2_key(key: str) -> bool:
    return (
        key in _MM2_KEYS
        or key.startswith(_MM2_PREFIXES)
        or _is_connection_key(key)
        or key.startswith(tuple(f"{role}." for role in _ROLES))
    )


def _is_known_flow_only_key(key: str) -> bool:
    """Connector-level prefixes that only make sense under ``S->T.``."""
    if key.startswith(("source.cluster.", "target.cluster.")):
        return _is_connection_key(key.split(".", 2)[2])
    return key.startswith(tuple(f"{side}.{role}." for side in ("source", "target") for role in _ROLES))


def _is_known_cluster_key(key: str) -> bool:
    return (
        _is_connection_key(key)
        or key.startswith(tuple(f"{role}." for role in _ROLES))
        or key in _WORKER_KEYS
        or key.startswith(_WORKER_PREFIXES)
    )


_SPARK_KEYS = {
    field.alias: name for name, field in SparkSettings.model_fields.items() if field.alias and name != "conf"
}


def _check_sparkmirror_key(key: str, shown_as: str) -> None:
    if key in _SPARK_KEYS or (key.startswith(_SPARK_CONF_PREFIX) and len(key) > len(_SPARK_CONF_PREFIX)):
        return
    known = ", ".join([*sorted(_SPARK_KEYS), _SPARK_CONF_PREFIX + "<spark key>"])
    raise ConfigError(f"{shown_as}: unknown sparkmirror key; known keys: {known}", key=shown_as)


def parse_list(value: str) -> tuple[str, ...]:
    """A ConfigDef LIST value: comma-separated, items trimmed, empty string = empty list."""
    if not value.strip():
        return ()
    return tuple(item.strip() for item in value.split(","))


def _convert(raw: str, annotation: Any, key: str) -> Any:
    """Convert the string ``raw`` of ``key`` to the field type, with an error naming key and expectation."""
    origin = typing.get_origin(annotation)
    value = raw.strip()
    if origin in (typing.Union, types.UnionType) and set(typing.get_args(annotation)) == {int, type(None)}:
        annotation = int  # an optional number: set means a number
    if annotation is bool:
        if value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ConfigError(f"{key}: expected a boolean (true or false), got {raw!r}", key=key)
    if annotation is int:
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{key}: expected an integer, got {raw!r}", key=key) from None
    if origin is tuple:
        return parse_list(raw)
    if origin is typing.Literal:
        choices = typing.get_args(annotation)
        if value.lower() in choices:
            return value.lower()
        raise ConfigError(f"{key}: expected one of {', '.join(choices)}, got {raw!r}", key=key)
    return value


def _validation_error(exc: ValidationError, keys: Mapping[str, str], what: str) -> ConfigError:
    """A ConfigError from pydantic's, naming the config key; input values are left out (secrets)."""
    err = exc.errors(include_input=False, include_url=False)[0]
    field = str(err["loc"][0]) if err["loc"] else ""
    key = keys.get(field, field or what)
    msg = str(err["msg"]).removeprefix("Value error, ")
    return ConfigError(f"{key}: {msg}", key=key)


class _Loader:
    def __init__(self, props: Mapping[str, str], restrict: Sequence[str] | None) -> None:
        self.props = dict(props)
        self.restrict = restrict
        self.unknown: list[str] = []
        #: Keys of the retired micro-batch engine (``RETIRED_KEYS``): ignored, with one warning.
        self.retired: list[tuple[str, str]] = []

    # -- keys -------------------------------------------------------------------------------------
    def classify(self, aliases: Sequence[str]) -> tuple[dict[str, str], dict[str, dict[str, str]],
                                                        dict[tuple[str, str], dict[str, str]]]:  # fmt: skip
        """Split keys into top-level, per-cluster and per-flow dicts; collect unknown keys."""
        alias_set = set(aliases)
        top: dict[str, str] = {}
        per_cluster: dict[str, dict[str, str]] = {a: {} for a in aliases}
        per_flow: dict[tuple[str, str], dict[str, str]] = {}
        for key, value in self.props.items():
            flow = _FLOW_KEY.match(key)
            if flow:
                src, dst, rest = flow.groups()
                if src not in alias_set or dst not in alias_set:
                    bad = src if src not in alias_set else dst
                    raise ConfigError(
                        f"{key}: cluster alias {bad!r} is not in clusters; known aliases: {', '.join(aliases)}",
                        key=key,
                    )
                if src == dst:
                    raise ConfigError(f"{key}: a flow needs two different clusters", key=key)
                refuse_unsupported(rest, key, value)
                if rest in RETIRED_KEYS:
                    self.retired.append((key, rest))
                    continue
                if rest.startswith("sparkmirror."):
                    _check_sparkmirror_key(rest, key)
                elif not (_is_known_mm2_key(rest) or _is_known_flow_only_key(rest)):
                    self.unknown.append(key)
                per_flow.setdefault((src, dst), {})[rest] = value
                continue
            head, _, rest = key.partition(".")
            if head in alias_set and rest:
                refuse_unsupported(rest, key, value)  # MM2's worker for cluster X reads the converters
                if rest == TARGET_THROTTLE_KEY:
                    pass  # read by the flows into this cluster (FlowConfig.target_throttle_bytes_per_second)
                elif not _is_known_cluster_key(rest) and rest not in _NOT_CLIENT_KEYS:
                    self.unknown.append(key)
                per_cluster[head][rest] = value
                continue
            refuse_unsupported(key, key, value)
            if key in RETIRED_KEYS:
                self.retired.append((key, key))
                continue
            if key.startswith("sparkmirror."):
                _check_sparkmirror_key(key, key)
            elif not _is_known_mm2_key(key):
                self.unknown.append(key)
            top[key] = value
        return top, per_cluster, per_flow

    # -- clusters ---------------------------------------------------------------------------------
    @staticmethod
    def _role(props: Mapping[str, str], role: str) -> dict[str, str]:
        prefix = f"{role}."
        return {k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix) and k not in _NOT_CLIENT_KEYS}

    @staticmethod
    def _cluster_prefixed(props: Mapping[str, str], prefix: str) -> dict[str, str]:
        """Connection keys under MM2's connector-level ``source.cluster.``/``target.cluster.`` prefix."""
        stripped = {k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)}
        return {k: v for k, v in stripped.items() if _is_connection_key(k)}

    @staticmethod
    def _connection(props: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in props.items() if _is_connection_key(k)}

    def cluster(self, alias: str, top: Mapping[str, str], own: Mapping[str, str]) -> ClusterConfig:
        connection = {**self._connection(top), **self._connection(own)}
        roles = {
            role: {
                **self._connection(top),
                **self._role(top, role),
                **self._connection(own),
                **self._role(own, role),
            }
            for role in _ROLES
        }
        return ClusterConfig(
            alias=alias,
            bootstrap_servers=connection.get("bootstrap.servers", "").strip(),
            client_props=connection,
            consumer_props=roles["consumer"],
            producer_props=roles["producer"],
            admin_props=roles["admin"],
        )

    # -- flows ------------------------------------------------------------------------------------
    def _spark(self, top: Mapping[str, str], flow: Mapping[str, str] | None, flow_name: str | None) -> SparkSettings:
        data: dict[str, Any] = {}
        keys: dict[str, str] = {}
        conf: dict[str, str] = {}
        layers: list[tuple[Mapping[str, str], str]] = [(top, "")]
        if flow is not None:
            layers.append((flow, f"{flow_name}."))
        for layer, shown_prefix in layers:
            for key, raw in layer.items():
                if key.startswith(_SPARK_CONF_PREFIX):
                    conf[key[len(_SPARK_CONF_PREFIX) :]] = raw.strip()
                elif key in _SPARK_KEYS:
                    name = _SPARK_KEYS[key]
                    shown = shown_prefix + key
                    data[name] = _convert(raw, SparkSettings.model_fields[name].annotation, shown)
                    keys[name] = shown
        try:
            settings = SparkSettings.model_validate({"conf": conf, **data})
        except ValidationError as exc:
            raise _validation_error(exc, keys, "sparkmirror") from None
        return settings

    @staticmethod
    def _check_filters_and_policy(data: Mapping[str, Any], keys: Mapping[str, str]) -> None:
        """Compile regexes and build the policy now, so errors name the key as written (``A->B.topics``)."""

        def key(field: str) -> str:
            return keys.get(field, str(FlowConfig.model_fields[field].alias))

        for field in ("topics", "topics_exclude", "groups", "groups_exclude", "config_properties_exclude"):
            if field in data:
                compile_pattern_list(data[field], key=key(field))
        if data.get("replication_policy_separator") == "":
            sep_key = key("replication_policy_separator")
            raise ConfigError(f"{sep_key}: expected a non-empty separator, got ''", key=sep_key)
        if "replication_policy_class" in data or "replication_policy_separator" in data:
            policy_from_name(
                data.get("replication_policy_class", DEFAULT_POLICY_CLASS),
                data.get("replication_policy_separator", "."),
                key=key("replication_policy_class"),
            )

    def flow(
        self,
        src: ClusterConfig,
        dst: ClusterConfig,
        top: Mapping[str, str],
        own: Mapping[str, str],
        dst_raw: Mapping[str, str] | None = None,
    ) -> FlowConfig:
        name = f"{src.alias}->{dst.alias}"
        data: dict[str, Any] = {}
        keys: dict[str, str] = {}
        # MM2 reads its worker switch for the target cluster's worker.
        eos = "exactly.once.source.support"
        if dst_raw and eos in dst_raw and eos not in own:
            top = {**top, eos: dst_raw[eos]}
        # ... and its offsets topic: the top-level key over the target cluster's (MirrorMakerConfig).
        storage = "offset.storage.topic"
        if dst_raw and storage in dst_raw and storage not in top and storage not in own:
            top = {**top, storage: dst_raw[storage]}
        if dst_raw and TARGET_THROTTLE_KEY in dst_raw:
            shown = f"{dst.alias}.{TARGET_THROTTLE_KEY}"
            data["target_throttle_bytes_per_second"] = _convert(dst_raw[TARGET_THROTTLE_KEY], int, shown)
            keys["target_throttle_bytes_per_second"] = shown
        for field_name, field in FlowConfig.model_fields.items():
            alias = field.alias
            if not alias:
                continue
            if alias in own:
                raw, shown = own[alias], f"{name}.{alias}"
            elif alias in top and alias != "enabled":
                raw, shown = top[alias], alias
                if alias == eos and dst_raw and eos in dst_raw:
                    shown = f"{dst.alias}.{eos}"
            else:
                continue
            data[field_name] = _convert(raw, field.annotation, shown)
            keys[field_name] = shown
        self._check_filters_and_policy(data, keys)

        flow_src_conn = self._cluster_prefixed(own, "source.cluster.")
        flow_dst_conn = self._cluster_prefixed(own, "target.cluster.")
        clients = {
            "source_consumer": {**src.consumer_props, **flow_src_conn, **self._role(own, "consumer"),
                                **self._role(own, "source.consumer")},
            "source_admin": {**src.admin_props, **flow_src_conn, **self._role(own, "admin"),
                             **self._role(own, "source.admin")},
            "target_producer": {**dst.producer_props, **flow_dst_conn, **self._role(own, "producer"),
                                **self._role(own, "target.producer")},
            "target_admin": {**dst.admin_props, **flow_dst_conn, **self._role(own, "admin"),
                             **self._role(own, "target.admin")},
            "target_consumer": {**dst.consumer_props, **flow_dst_conn, **self._role(own, "target.consumer")},
        }  # fmt: skip
        assert set(clients) == set(CLIENT_ROLES)
        spark = self._spark(top, own, name)
        try:
            return FlowConfig(
                source=src.alias,
                target=dst.alias,
                source_cluster=src,
                target_cluster=dst,
                spark=spark,
                clients=clients,
                **data,
            )
        except ValidationError as exc:
            raise _validation_error(exc, keys, name) from None

    # -- all --------------------------------------------------------------------------------------
    def load(self) -> MirrorConfig:
        if "clusters" not in self.props:
            raise ConfigError(
                "clusters: required; expected a list of cluster aliases, e.g. clusters = A, B", key="clusters"
            )
        aliases = [a for a in parse_list(self.props["clusters"]) if a]
        if not aliases:
            raise ConfigError("clusters: expected at least one cluster alias, got ''", key="clusters")
        for alias in aliases:
            if not alias or "->" in alias or "." in alias:
                raise ConfigError(
                    f"clusters: invalid cluster alias {alias!r} (expected no '.' and no '->')", key="clusters"
                )
        if self.restrict is not None:
            for alias in self.restrict:
                if alias not in aliases:
                    raise ConfigError(
                        f"--clusters: {alias!r} is not in clusters; known aliases: {', '.join(aliases)}",
                        key="clusters",
                    )
        top, per_cluster, per_flow = self.classify(aliases)
        clusters = {alias: self.cluster(alias, top, per_cluster[alias]) for alias in aliases}
        all_flows = tuple(
            self.flow(clusters[src], clusters[dst], top, own, per_cluster[dst]) for (src, dst), own in per_flow.items()
        )
        flows = tuple(f for f in all_flows if f.enabled and (self.restrict is None or f.target in self.restrict))
        for flow in flows:
            for cluster in (flow.source_cluster, flow.target_cluster):
                if not cluster.bootstrap_servers:
                    key = f"{cluster.alias}.bootstrap.servers"
                    raise ConfigError(
                        f"{key}: required for cluster {cluster.alias!r} (used by flow {flow.name}); "
                        "expected host:port[,host:port...]",
                        key=key,
                    )
        for shown, key in self.retired:
            log.warning(
                "Ignoring %s: the micro-batch engine it tuned was retired (%s); remove the key",
                shown,
                RETIRED_KEYS[key],
            )
        if self.unknown:
            log.warning("Ignoring %d unknown configuration key(s): %s", len(self.unknown), ", ".join(self.unknown))
        return MirrorConfig(
            clusters=clusters,
            flows=flows,
            all_flows=all_flows,
            spark=self._spark(top, None, None),
            unknown_keys=tuple(self.unknown),
        )


def load_config(
    source: str | os.PathLike[str] | Mapping[str, str],
    *,
    clusters: Sequence[str] | None = None,
) -> MirrorConfig:
    """Load and validate a configuration.

    ``source`` is a path to an ``mm2.properties`` file, the text of one (a string containing a
    newline or ``=``), or a mapping of already parsed properties; ``${provider:path:key}``
    placeholders are resolved through ``config.providers`` (:mod:`.providers`). ``clusters`` is MM2's
    ``--clusters``: only flows whose target is listed are kept in :attr:`MirrorConfig.flows`.
    Raises :class:`ConfigError` naming the key at fault.
    """
    if isinstance(source, Mapping):
        props = {str(k): str(v) for k, v in source.items()}
    else:
        text_or_path = os.fspath(source)
        if isinstance(source, str) and ("\n" in source or "=" in source):
            props = parse_properties(source, source="<text>")
        else:
            path = Path(text_or_path)
            props = read_properties_file(path)
    # As MM2 does (MirrorMakerConfig.transform): every value through config.providers first.
    return _Loader(resolve_placeholders(props), clusters).load()
