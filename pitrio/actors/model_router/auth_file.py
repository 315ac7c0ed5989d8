"""``auth.json`` as pi 1.6.0 keeps it: its entries, reading it (refused when others may read
or write it), writing it with mode 0600, and the lock pi takes around a token refresh
(``auth.json.lock``, a directory). Blocking file I/O; :mod:`.credentials` decides what the
entries mean.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import orjson

from pitrio.errors import AuthFileError


@attrs.frozen
class ApiKeyEntry:
    """An ``auth.json`` entry of type ``api_key``: ``key`` unresolved (it may be absent), and
    the provider-scoped variables of its ``env`` object."""

    key: str | None
    env: Mapping[str, str] = attrs.field(factory=dict, eq=False)


@attrs.frozen
class OAuthEntry:
    """An ``auth.json`` entry of type ``oauth``: ``access`` until ``expires``, then refreshed.

    ``fields`` is the whole entry as stored (``refresh`` and the extras pi keeps, such as
    ``accountId`` or ``enterpriseUrl``), so a refresh writes back everything it read.
    """

    access: str
    expires: int | None = None
    fields: Mapping[str, Any] = attrs.field(factory=dict, eq=False, repr=False)


AuthEntry = ApiKeyEntry | OAuthEntry


def check_private(path: Path) -> None:
    """Raise :class:`AuthFileError` if group or others have any access to ``path``."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise AuthFileError(
            f"{path} is accessible by group/others (mode {mode:o}); pitrio will not read "
            f"credentials from it. Fix it with: chmod 600 {path}"
        )


def load_auth_file(path: Path) -> dict[str, AuthEntry]:
    """Read ``auth.json``; a missing file is empty. Raises :class:`AuthFileError`."""
    try:
        check_private(path)
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise AuthFileError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        # The parser's message may quote the file's text, which holds keys: say only where.
        raise AuthFileError(f"{path}: invalid JSON") from None
    if not isinstance(document, dict):
        raise AuthFileError(f"{path}: expected an object of provider entries")
    entries: dict[str, AuthEntry] = {}
    for provider, entry in document.items():
        entries[provider] = parse_auth_entry(path, provider, entry)
    return entries


def parse_auth_entry(path: Path, provider: str, entry: Any) -> AuthEntry:
    """One entry of ``path`` as read (:class:`ApiKeyEntry` or :class:`OAuthEntry`); raises
    :class:`AuthFileError` naming the file and the provider for any other shape."""
    if not isinstance(entry, dict):
        raise AuthFileError(f"{path}: entry {provider!r}: expected an object")
    kind = entry.get("type")
    if kind == "api_key":
        key = entry.get("key")
        if key is not None and not isinstance(key, str):
            raise AuthFileError(f"{path}: entry {provider!r}: field 'key' must be a string")
        env = entry.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise AuthFileError(
                f"{path}: entry {provider!r}: field 'env' must be an object of strings"
            )
        return ApiKeyEntry(key, dict(env))
    if kind == "oauth":
        access = entry.get("access")
        expires = entry.get("expires")
        if not isinstance(access, str) or not access:
            raise AuthFileError(f"{path}: entry {provider!r}: field 'access' must be a string")
        if expires is not None and (isinstance(expires, bool) or not isinstance(expires, int)):
            raise AuthFileError(f"{path}: entry {provider!r}: field 'expires' must be a number")
        return OAuthEntry(access, expires, dict(entry))
    raise AuthFileError(f"{path}: entry {provider!r}: field 'type' must be api_key or oauth")


def save_api_key(path: Path, provider: str, key: str) -> None:
    """Store ``key`` for ``provider`` in ``auth.json``, keeping the other entries.

    The file is replaced atomically by one created with mode 0600; its directory is created
    with mode 0700 if missing. An existing file that others can access is refused (as for
    reading): pitrio does not silently take over a file whose permissions someone chose.
    """
    save_entry(path, provider, {"type": "api_key", "key": key})


def save_entry(path: Path, provider: str, entry: Mapping[str, Any]) -> None:
    """Store one raw ``auth.json`` entry (the rules of :func:`save_api_key`)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    document = read_auth_document(path)
    document[provider] = dict(entry)
    write_auth_document(path, document)


def read_auth_document(path: Path) -> dict[str, Any]:
    """The raw ``auth.json`` object (empty when missing); refuses a file others can access."""
    if not path.exists():
        return {}
    check_private(path)
    try:
        loaded = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        raise AuthFileError(f"{path}: invalid JSON; not overwriting it") from None
    return loaded if isinstance(loaded, dict) else {}


def write_auth_document(path: Path, document: Mapping[str, Any]) -> None:
    """Replace ``auth.json`` atomically by a 0600 file holding ``document``."""
    data = orjson.dumps(dict(document), option=orjson.OPT_INDENT_2) + b"\n"
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the umask cannot widen it, but an old temp file could exist
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)


# -- pi's lock on auth.json ------------------------------------------------------------------

LOCK_STALE_S = 30.0
"""pi (proper-lockfile) takes a lock older than this as abandoned."""
LOCK_RETRIES = 10


def lock_path(path: Path) -> Path:
    """The directory whose creation is pi's lock on ``path`` (proper-lockfile's convention)."""
    return path.with_name(path.name + ".lock")


def try_lock(path: Path, now: float, stale: float = LOCK_STALE_S) -> bool:
    """Take pi's lock on ``path`` (``mkdir path.lock``); a lock whose directory was last
    touched more than ``stale`` seconds ago is broken first (proper-lockfile's rule)."""
    lock = lock_path(path)
    try:
        lock.mkdir(mode=0o700)
        return True
    except FileExistsError:
        pass
    try:
        age = now - lock.stat().st_mtime
    except FileNotFoundError:
        return False  # released meanwhile: the next attempt takes it
    if age > stale:
        try:
            lock.rmdir()
            lock.mkdir(mode=0o700)
            return True
        except OSError:
            return False
    return False


def touch_lock(path: Path) -> None:
    """Renew a lock we hold (its mtime is its age), as proper-lockfile's holder does."""
    with contextlib.suppress(FileNotFoundError):
        os.utime(lock_path(path))


def unlock(path: Path) -> None:
    """Release pi's lock on ``path``."""
    with contextlib.suppress(FileNotFoundError):
        lock_path(path).rmdir()
