"""MM2's config providers: ``${provider:[path:]key}`` placeholders resolved when the file is loaded.

MirrorMaker 2 resolves every value of ``mm2.properties`` through the providers named in the
top-level ``config.providers`` before it builds any client (``MirrorMakerConfig.transform``),
so that passwords can live in files or the environment instead of the configuration. The same
three providers Kafka ships are known here, by class name or simple name:

- ``FileConfigProvider``: ``${file:/path/to/file.properties:key}``, the value of ``key`` in that
  java.util.Properties file;
- ``DirectoryConfigProvider``: ``${directory:/path/to/dir:name}``, the content of file ``name`` in
  that directory;
- ``EnvVarConfigProvider``: ``${env:NAME}``, the environment variable ``NAME``.

Their parameters are read as Kafka does (``config.providers.<name>.param.allowed.paths`` for the
two file providers, ``config.providers.<name>.param.allowlist.pattern`` for the environment).

One difference, on purpose: Kafka leaves a placeholder it cannot resolve in place, so that the
placeholder itself reaches the broker as the password and the error says only "authentication
failed". Here an unknown provider, a missing file, key or variable is a :class:`ConfigError`
naming the key that referenced it. What it must never do: put a resolved value (a secret) in
an error or a log line; errors name keys, providers and paths only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from sparkmirror.config.properties import parse_properties
from sparkmirror.errors import ConfigError

__all__ = ["CONFIG_PROVIDERS", "resolve_placeholders"]

#: The top-level key that names the providers (MM2's, from Connect's WorkerConfig).
CONFIG_PROVIDERS = "config.providers"

#: Kafka's ConfigTransformer pattern: ``${provider:[path:]key}`` (lazy, no ``}`` inside).
_PLACEHOLDER = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")

_FILE = "org.apache.kafka.common.config.provider.FileConfigProvider"
_DIRECTORY = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
_ENV = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
_KNOWN = {name: full for full in (_FILE, _DIRECTORY, _ENV) for name in (full, full.rsplit(".", 1)[1])}


class _Provider:
    """One configured provider: ``lookup(path, key, referenced_by)`` gives the value or raises."""

    def __init__(self, name: str, kind: str, params: Mapping[str, str]) -> None:
        self.name = name
        self.kind = kind
        self.params = dict(params)
        self._allowed = self._allowed_paths() if kind in (_FILE, _DIRECTORY) else None
        self._env_pattern = self._allowlist() if kind == _ENV else None
        self._files: dict[str, dict[str, str]] = {}

    def _param_key(self, param: str) -> str:
        return f"{CONFIG_PROVIDERS}.{self.name}.param.{param}"

    def _allowed_paths(self) -> tuple[Path, ...] | None:
        raw = self.params.get("allowed.paths", "")
        if not raw:
            return None
        out = []
        for item in raw.split(","):
            path = Path(os.path.normpath(item.strip()))
            if not path.is_absolute() or not path.exists():
                what = "is not absolute" if not path.is_absolute() else "does not exist"
                key = self._param_key("allowed.paths")
                raise ConfigError(f"{key}: path {path} {what}", key=key)
            out.append(path)
        return tuple(out)

    def _allowlist(self) -> re.Pattern[str]:
        raw = self.params.get("allowlist.pattern", ".*")
        try:
            return re.compile(raw)
        except re.error as exc:
            key = self._param_key("allowlist.pattern")
            raise ConfigError(f"{key}: not a valid regular expression ({exc})", key=key) from None

    def _check_path(self, path: str, referenced_by: str) -> Path:
        if not path:
            raise ConfigError(
                f"{referenced_by}: ${{{self.name}:...}} needs a path (${{{self.name}:/path:key}})", key=referenced_by
            )
        parsed = Path(path)
        if self._allowed is not None:
            normal = Path(os.path.normpath(path))
            if not any(normal == allowed or allowed in normal.parents for allowed in self._allowed):
                raise ConfigError(
                    f"{referenced_by}: path {path} is outside {self._param_key('allowed.paths')}", key=referenced_by
                )
            parsed = normal
        return parsed

    def lookup(self, path: str, key: str, referenced_by: str) -> str:
        if self.kind == _FILE:
            return self._from_file(path, key, referenced_by)
        if self.kind == _DIRECTORY:
            return self._from_directory(path, key, referenced_by)
        return self._from_env(path, key, referenced_by)

    def _from_file(self, path: str, key: str, referenced_by: str) -> str:
        props = self._files.get(path)
        if props is None:
            file = self._check_path(path, referenced_by)
            try:
                text = file.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(
                    f"{referenced_by}: cannot read {file} for ${{{self.name}:...}} ({exc.strerror})", key=referenced_by
                ) from None
            # Errors of the secrets file name the file and line, never a value.
            props = self._files[path] = parse_properties(text, source=str(file))
        if key not in props:
            raise ConfigError(f"{referenced_by}: no key {key!r} in {path} (provider {self.name})", key=referenced_by)
        return props[key]

    def _from_directory(self, path: str, key: str, referenced_by: str) -> str:
        directory = self._check_path(path, referenced_by)
        file = directory / key
        if "/" in key or key in ("", ".", "..") or not file.is_file():
            raise ConfigError(
                f"{referenced_by}: no file {key!r} in directory {path} (provider {self.name})", key=referenced_by
            )
        try:
            return file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"{referenced_by}: cannot read {file} for ${{{self.name}:...}} ({exc.strerror})", key=referenced_by
            ) from None

    def _from_env(self, path: str, key: str, referenced_by: str) -> str:
        if path:
            raise ConfigError(
                f"{referenced_by}: ${{{self.name}:...}} takes no path; write ${{{self.name}:NAME}}", key=referenced_by
            )
        assert self._env_pattern is not None
        if not self._env_pattern.fullmatch(key):
            raise ConfigError(
                f"{referenced_by}: environment variable {key} is not allowed by {self._param_key('allowlist.pattern')}",
                key=referenced_by,
            )
        value = os.environ.get(key)
        if value is None:
            raise ConfigError(
                f"{referenced_by}: environment variable {key} is not set (provider {self.name})", key=referenced_by
            )
        return value


def _providers(props: Mapping[str, str]) -> dict[str, _Provider]:
    names = [n.strip() for n in props.get(CONFIG_PROVIDERS, "").split(",") if n.strip()]
    out: dict[str, _Provider] = {}
    for name in names:
        class_key = f"{CONFIG_PROVIDERS}.{name}.class"
        cls = props.get(class_key, "").strip()
        if not cls:
            raise ConfigError(
                f"{class_key}: required for config provider {name!r} listed in {CONFIG_PROVIDERS}; expected one of "
                "FileConfigProvider, DirectoryConfigProvider, EnvVarConfigProvider",
                key=class_key,
            )
        kind = _KNOWN.get(cls)
        if kind is None:
            raise ConfigError(
                f"{class_key}: unknown config provider class {cls!r}; sparkmirror knows "
                f"{_FILE}, {_DIRECTORY} and {_ENV}",
                key=class_key,
            )
        prefix = f"{CONFIG_PROVIDERS}.{name}.param."
        params = {k[len(prefix) :]: v.strip() for k, v in props.items() if k.startswith(prefix)}
        out[name] = _Provider(name, kind, params)
    return out


def resolve_placeholders(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` with every ``${provider:[path:]key}`` replaced by the provider's value.

    Providers are those of the top-level ``config.providers`` (as in MM2). The provider keys
    themselves are not resolved. Raises :class:`ConfigError` naming the referencing key for an
    unknown provider or a value that cannot be found; the error never holds a resolved value.
    """
    providers = _providers(props)
    out: dict[str, str] = {}
    for key, value in props.items():
        if key == CONFIG_PROVIDERS or key.startswith(f"{CONFIG_PROVIDERS}.") or "${" not in value:
            out[key] = value
            continue
        out[key] = _PLACEHOLDER.sub(_replacer(providers, key), value)
    return out


def _replacer(providers: Mapping[str, _Provider], key: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        name, path, variable = match.group(1), match.group(3) or "", match.group(4)
        provider = providers.get(name)
        if provider is None:
            known = ", ".join(providers) or "none"
            raise ConfigError(
                f"{key}: refers to config provider {name!r}, which {CONFIG_PROVIDERS} does not name "
                f"(configured: {known})",
                key=key,
            )
        return provider.lookup(path, variable, key)

    return replace
