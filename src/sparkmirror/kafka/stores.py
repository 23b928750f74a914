"""Trust and key stores in the form librdkafka reads: PEM files in one private directory.

An MM2 file names Java's stores: ``ssl.truststore.*`` and ``ssl.keystore.*`` of type JKS
(Java's default), PKCS12 or PEM, by location or (PEM) inline as ``ssl.truststore.certificates``,
``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``. librdkafka (every Kafka client
sparkmirror makes) reads no JKS, and reads keys and certificates best as PEM files, so at
start-up each store is converted once into a private directory (mode 0700, made by
:func:`tempfile.mkdtemp`) that is removed when the process exits:

- JKS: Java's own ``keytool`` turns it into PKCS12 (passwords handed over in its environment,
  ``-storepass:env``, never on its command line), then as PKCS12;
- PKCS12: read with ``cryptography``;
- PEM by location (trust store): used as it is; everything else PEM: parsed and written out.

Private keys are written encrypted with their password when there is one (``ssl.key.password``
or the store's), mode 0600. What it must never do: put a password or a key in an error, a log
line or a command line. Errors name the key (``ssl.keystore.password``) and the file.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sparkmirror.artifacts.jdk import jdk_tool
from sparkmirror.errors import ConfigError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.serialization.pkcs12 import PKCS12KeyAndCertificates

__all__ = ["STORE_KEYS", "cleanup", "private_dir", "store_settings"]

_lock = threading.Lock()
_dir: Path | None = None
_dir_pid = 0
_cache: dict[str, dict[str, str]] = {}


def private_dir() -> Path:
    """The process's private directory for converted stores (0700), made on first use."""
    global _dir, _dir_pid
    with _lock:
        if _dir is None or _dir_pid != os.getpid() or not _dir.is_dir():
            _dir = Path(tempfile.mkdtemp(prefix="sparkmirror-tls-"))
            os.chmod(_dir, 0o700)
            _dir_pid = os.getpid()
            _cache.clear()
            atexit.register(_remove, _dir, _dir_pid)
        return _dir


def _remove(path: Path, pid: int) -> None:
    if os.getpid() == pid:  # a forked child must not remove its parent's directory
        shutil.rmtree(path, ignore_errors=True)


def cleanup() -> None:
    """Remove the private directory now (tests; it is also removed at exit)."""
    global _dir
    with _lock:
        if _dir is not None and _dir_pid == os.getpid():
            shutil.rmtree(_dir, ignore_errors=True)
        _dir = None
        _cache.clear()


def _error(role: str, key: str, message: str) -> ConfigError:
    return ConfigError(f"{role}: {key}: {message}", key=key)


def _write(name: str, data: bytes) -> Path:
    path = private_dir() / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return path


def _digest(*parts: str | None) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(b"\0" if part is None else b"\1" + part.encode())
    return h.hexdigest()[:16]


def _read(location: str, role: str, key: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as exc:
        raise _error(role, key, f"cannot read {location} ({exc.strerror})") from None


def _keytool() -> str:
    found = jdk_tool("keytool")
    if found is None:
        raise ConfigError("a JKS store needs Java's keytool to be converted for librdkafka; none on PATH or JAVA_HOME")
    return found


def _jks_to_pkcs12(location: str, password: str | None, key_password: str | None, role: str, key: str) -> bytes:
    """Java's keytool reads the JKS store and writes PKCS12 (passwords through its environment)."""
    if not password:
        raise _error(role, key.replace("location", "password"), "required to read a JKS store")
    out = private_dir() / f"keytool-{os.getpid()}-{threading.get_ident()}.p12"
    env = {
        **os.environ,
        "SPARKMIRROR_SRC_PASS": password,
        "SPARKMIRROR_DEST_PASS": password,
        "SPARKMIRROR_KEY_PASS": key_password or password,
    }
    cmd = [
        _keytool(), "-importkeystore", "-noprompt",
        "-srckeystore", location, "-srcstoretype", "JKS", "-srcstorepass:env", "SPARKMIRROR_SRC_PASS",
        "-destkeystore", str(out), "-deststoretype", "PKCS12", "-deststorepass:env", "SPARKMIRROR_DEST_PASS",
    ]  # fmt: skip
    if key_password:
        cmd += ["-srckeypass:env", "SPARKMIRROR_KEY_PASS", "-destkeypass:env", "SPARKMIRROR_DEST_PASS"]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
        if proc.returncode != 0 or not out.exists():
            text = (proc.stdout + proc.stderr).lower()
            if "password" in text and ("incorrect" in text or "verify" in text or "recover" in text):
                raise _error(role, key.replace("location", "password"), f"does not open the JKS store {location}")
            if "invalid keystore format" in text or "not found" in text or "no such file" in text:
                raise _error(role, key, f"{location} is not a readable JKS store (set the store's type)")
            first = next((line for line in proc.stderr.splitlines() if line.strip()), "keytool failed")
            raise _error(role, key, f"keytool could not convert {location}: {first.strip()[:200]}")
        return out.read_bytes()
    finally:
        out.unlink(missing_ok=True)


def _load_pkcs12(data: bytes, password: str | None, role: str, key: str, location: str) -> PKCS12KeyAndCertificates:
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        raise _error(
            role, key.replace("location", "password"), f"does not open the PKCS12 store {location} (or it is corrupt)"
        ) from None


def _pem_certs(data: bytes, role: str, key: str) -> list[bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise _error(role, key, "holds no PEM certificate") from None
    return [c.public_bytes(Encoding.PEM) for c in certs]


def _store_bytes(
    kind: str, location: str, password: str | None, key_password: str | None, role: str, key: str
) -> tuple[bytes, bytes | None]:
    """A JKS or PKCS12 store as (PEM certificates, PEM private key or None); the key is encrypted
    with ``key_password or password`` when there is one."""
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        NoEncryption,
        PrivateFormat,
    )

    data = _read(location, role, key)
    if kind == "JKS":
        data = _jks_to_pkcs12(location, password, key_password, role, key)
    p12 = _load_pkcs12(data, password, role, key, location)
    certs = [c.certificate for c in ([] if p12.cert is None else [p12.cert])] + [
        c.certificate for c in p12.additional_certs
    ]
    pem = b"".join(c.public_bytes(Encoding.PEM) for c in certs)
    key_pem = None
    if p12.key is not None:
        secret = key_password or password
        encryption = BestAvailableEncryption(secret.encode()) if secret else NoEncryption()
        key_pem = p12.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, encryption)
    return pem, key_pem


def _check_type(value: str | None, role: str, key: str) -> str:
    kind = (value or "JKS").strip().upper()
    if kind not in ("JKS", "PKCS12", "PEM"):
        raise _error(role, key, f"expected JKS, PKCS12 or PEM, got {value!r}")
    return kind


def store_settings(props: Mapping[str, str], *, role: str) -> dict[str, str]:
    """librdkafka's SSL file settings for the Java store keys in ``props`` (secrets revealed).

    Returns ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location`` and
    ``ssl.key.password`` as needed; empty when ``props`` names no store. Conversions are done
    once per store per process.
    """
    fingerprint = _digest(*(f"{k}={props[k]}" for k in sorted(props) if k.startswith(("ssl.truststore", "ssl.key"))))
    with _lock:
        cached = _cache.get(fingerprint)
    if cached is not None and all(Path(v).exists() for k, v in cached.items() if k.endswith(".location")):
        return dict(cached)
    out = {**_truststore(props, role), **_keystore(props, role)}
    with _lock:
        _cache[fingerprint] = dict(out)
    return out


def _truststore(props: Mapping[str, str], role: str) -> dict[str, str]:
    kind = _check_type(props.get("ssl.truststore.type"), role, "ssl.truststore.type")
    location = (props.get("ssl.truststore.location") or "").strip()
    inline = props.get("ssl.truststore.certificates")
    password = props.get("ssl.truststore.password") or None
    if inline and location:
        raise _error(role, "ssl.truststore.certificates", "set either it or ssl.truststore.location, not both")
    if inline:
        if kind != "PEM":
            raise _error(role, "ssl.truststore.type", "must be PEM with ssl.truststore.certificates")
        pem = b"".join(_pem_certs(inline.encode(), role, "ssl.truststore.certificates"))
        return {"ssl.ca.location": str(_write(f"ca-{_digest(inline)}.pem", pem))}
    if not location:
        return {}
    if kind == "PEM":
        return {"ssl.ca.location": location}
    pem, _ = _store_bytes(kind, location, password, None, role, "ssl.truststore.location")
    if not pem:
        raise _error(role, "ssl.truststore.location", f"{location} holds no certificate")
    return {"ssl.ca.location": str(_write(f"ca-{_digest(location, password)}.pem", pem))}


def _keystore(props: Mapping[str, str], role: str) -> dict[str, str]:
    kind = _check_type(props.get("ssl.keystore.type"), role, "ssl.keystore.type")
    location = (props.get("ssl.keystore.location") or "").strip()
    password = props.get("ssl.keystore.password") or None
    key_password = props.get("ssl.key.password") or None
    inline_key = props.get("ssl.keystore.key")
    inline_chain = props.get("ssl.keystore.certificate.chain")
    if (inline_key or inline_chain) and location:
        raise _error(role, "ssl.keystore.key", "set either it (with the chain) or ssl.keystore.location, not both")
    if inline_key or inline_chain:
        if not (inline_key and inline_chain):
            missing = "ssl.keystore.certificate.chain" if inline_key else "ssl.keystore.key"
            raise _error(role, missing, "required with the other inline PEM key store key")
        if kind != "PEM":
            raise _error(role, "ssl.keystore.type", "must be PEM with ssl.keystore.key")
        return _pem_pair(inline_key.encode(), inline_chain.encode(), key_password, role, "ssl.keystore.key")
    if not location:
        return {}
    if kind == "PEM":
        data = _read(location, role, "ssl.keystore.location")
        return _pem_pair(data, data, key_password, role, "ssl.keystore.location")
    certs, key_pem = _store_bytes(kind, location, password, key_password, role, "ssl.keystore.location")
    if key_pem is None:
        raise _error(role, "ssl.keystore.location", f"{location} holds no private key")
    tag = _digest(location, password, key_password)
    out = {
        "ssl.key.location": str(_write(f"key-{tag}.pem", key_pem)),
        "ssl.certificate.location": str(_write(f"chain-{tag}.pem", certs)),
    }
    if key_password or password:
        out["ssl.key.password"] = key_password or password or ""
    return out


def _pem_pair(key_data: bytes, chain_data: bytes, key_password: str | None, role: str, key: str) -> dict[str, str]:
    """A PEM private key (PKCS8, encrypted with ``ssl.key.password`` or not) and its chain, as files."""
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        NoEncryption,
        PrivateFormat,
        load_pem_private_key,
    )

    try:
        private = load_pem_private_key(key_data, key_password.encode() if key_password else None)
    except TypeError:
        raise _error(role, "ssl.key.password", "required: the PEM private key is encrypted") from None
    except ValueError:
        raise _error(role, key, "holds no PEM private key that opens (is ssl.key.password right?)") from None
    chain = b"".join(
        _pem_certs(chain_data, role, key if key.endswith("location") else "ssl.keystore.certificate.chain")
    )
    encryption = BestAvailableEncryption(key_password.encode()) if key_password else NoEncryption()
    key_pem = private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, encryption)
    tag = _digest(key_data.decode(errors="replace"), key_password)
    out = {
        "ssl.key.location": str(_write(f"key-{tag}.pem", key_pem)),
        "ssl.certificate.location": str(_write(f"chain-{tag}.pem", chain)),
    }
    if key_password:
        out["ssl.key.password"] = key_password
    return out


#: Java's store keys, all replaced by :func:`store_settings`' output in librdkafka's settings.
STORE_KEYS: Sequence[str] = (
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
)
