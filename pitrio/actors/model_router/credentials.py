"""Provider credentials: ``auth.json`` (pi's format), environment variables, ``models.json`` keys.

Resolution order for a provider's key (pi's): the request's explicit key (``--api-key``, an
SDK hook), then the ``auth.json`` entry, then the provider's environment variables, then the
``apiKey`` of its ``models.json`` entry. A value (in ``auth.json``, ``models.json`` keys and
headers) is resolved the way pi resolves it:

* ``!command`` runs ``command`` in a shell and uses its trimmed stdout, cached for the process;
  ``!!command`` runs it again on every request (rotating tokens);
* ``$NAME`` / ``${NAME}`` is the environment variable ``NAME``; a bare name of a variable that
  is set is also taken as that variable (pi's rule);
* anything else is the literal key.

``auth.json`` is ``{"<provider>": {"type": "api_key", "key": "..."} | {"type": "oauth",
"access": "...", "refresh": "...", "expires": <ms>}}``. It is written with mode 0600 and is
refused, with a message saying how to fix it, when group or others have any access to it: a
file others can write could make pitrio run their ``!command``.

No key value ever appears in an exception message, log or event: errors name the provider and
where the key was configured, and :meth:`Credentials.redact` scrubs every value resolved so
far out of vendor error texts before they reach a message.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
import orjson
import trio

from pitrio.actors.model_router.catalogue import has_ambient_credentials, provider_env_vars
from pitrio.errors import AuthFileError, CredentialError

AUTH_FILE_NAME = "auth.json"
COMMAND_TIMEOUT_S = 30.0
"""How long a ``!command`` may run before the key lookup fails."""

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BRACED = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_DOLLAR = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)$")


@attrs.frozen
class ValueSource:
    """Where one configured value comes from; ``origin`` says where it was configured."""

    kind: Literal["literal", "env", "command", "command-fresh"]
    value: str
    origin: str


def parse_value(spec: str, env: Mapping[str, str], origin: str) -> ValueSource:
    """Classify a configured value (``!cmd``, ``!!cmd``, ``$NAME``, a set variable, a literal)."""
    if spec.startswith("!!"):
        return ValueSource("command-fresh", spec[2:].strip(), origin)
    if spec.startswith("!"):
        return ValueSource("command", spec[1:].strip(), origin)
    match = _BRACED.match(spec) or _DOLLAR.match(spec)
    if match:
        return ValueSource("env", match.group(1), origin)
    if _ENV_NAME.match(spec) and spec in env:
        return ValueSource("env", spec, origin)
    return ValueSource("literal", spec, origin)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (of four characters or more) replaced by ``***``."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 4 and secret in text:
            text = text.replace(secret, "***")
    return text


# -- auth.json -------------------------------------------------------------------------------


def missing_key_message(
    provider: str, env_vars: Mapping[str, tuple[str, ...]], auth_path: Path | None
) -> str:
    """The error of a provider without a key: the variables to set and the ``auth.json``
    entry to add (pi's format), so the text says how to get out of it."""
    names = " or ".join(env_vars.get(provider, ())) or "an environment variable"
    name = orjson.dumps(provider).decode()
    entry = f'{{{name}: {{"type": "api_key", "key": "..."}}}}'
    where = f" or add {entry} to {auth_path} (mode 600)" if auth_path else ""
    return f"No API key for provider {provider}: set {names}{where}"


@attrs.frozen
class ApiKeyEntry:
    """An ``auth.json`` entry of type ``api_key`` (the value is unresolved)."""

    key: str


@attrs.frozen
class OAuthEntry:
    """An ``auth.json`` entry of type ``oauth``; pitrio uses ``access`` until ``expires``."""

    access: str
    expires: int | None = None


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
        entries[provider] = _auth_entry(path, provider, entry)
    return entries


def _auth_entry(path: Path, provider: str, entry: Any) -> AuthEntry:
    if not isinstance(entry, dict):
        raise AuthFileError(f"{path}: entry {provider!r}: expected an object")
    kind = entry.get("type")
    if kind == "api_key":
        key = entry.get("key")
        if not isinstance(key, str) or not key:
            raise AuthFileError(f"{path}: entry {provider!r}: field 'key' must be a string")
        return ApiKeyEntry(key)
    if kind == "oauth":
        access = entry.get("access")
        expires = entry.get("expires")
        if not isinstance(access, str) or not access:
            raise AuthFileError(f"{path}: entry {provider!r}: field 'access' must be a string")
        if expires is not None and (isinstance(expires, bool) or not isinstance(expires, int)):
            raise AuthFileError(f"{path}: entry {provider!r}: field 'expires' must be a number")
        return OAuthEntry(access, expires)
    raise AuthFileError(f"{path}: entry {provider!r}: field 'type' must be api_key or oauth")


def save_api_key(path: Path, provider: str, key: str) -> None:
    """Store ``key`` for ``provider`` in ``auth.json``, keeping the other entries.

    The file is replaced atomically by one created with mode 0600; its directory is created
    with mode 0700 if missing. An existing file that others can access is refused (as for
    reading): pitrio does not silently take over a file whose permissions someone chose.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    document: dict[str, Any] = {}
    if path.exists():
        check_private(path)
        try:
            loaded = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError:
            raise AuthFileError(f"{path}: invalid JSON; not overwriting it") from None
        if isinstance(loaded, dict):
            document = loaded
    document[provider] = {"type": "api_key", "key": key}
    data = orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the umask cannot widen it, but an old temp file could exist
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)


# -- the store -------------------------------------------------------------------------------


class Credentials:
    """Looks up provider keys and configured header values; caches ``!command`` output.

    Owned by the ModelRouter; its lookups run in the task of the request that needs them
    (trio is single-threaded, and the caches are only written between awaits).
    ``keyless`` providers (faux, local servers configured without ``apiKey``) need no key.
    """

    def __init__(
        self,
        *,
        auth_path: Path | None,
        env: Mapping[str, str],
        provider_keys: Mapping[str, str] | None = None,
        keyless: Iterable[str] = (),
        env_vars: Mapping[str, tuple[str, ...]] | None = None,
        command_timeout: float = COMMAND_TIMEOUT_S,
    ) -> None:
        self.auth_path = auth_path
        self.env = dict(env)
        self.provider_keys = dict(provider_keys or {})
        self.keyless = set(keyless)
        self.env_vars = dict(provider_env_vars() if env_vars is None else env_vars)
        self.command_timeout = command_timeout
        self._auth: dict[str, AuthEntry] | None = None
        self._auth_error: AuthFileError | None = None
        self._command_cache: dict[str, str] = {}
        self._secrets: set[str] = set()

    # -- queries ---------------------------------------------------------------------------

    @property
    def problem(self) -> str | None:
        """Why ``auth.json`` was refused, if it was (read on first use)."""
        self._load_auth()
        return str(self._auth_error) if self._auth_error else None

    def reload(self) -> None:
        """Forget the loaded ``auth.json`` (``!command`` results stay cached)."""
        self._auth = None
        self._auth_error = None

    def configured(self, provider: str) -> bool:
        """Whether a key source exists for ``provider`` (without running any command).

        What pi calls "has auth": listings show only such models. A refused ``auth.json``
        counts as unconfigured for the providers it would have served.
        """
        if provider in self.keyless:
            return True
        auth = self._load_auth()
        if provider in auth:
            return True
        if any(self.env.get(name) for name in self.env_vars.get(provider, ())):
            return True
        if has_ambient_credentials(provider, self.env):  # AWS chain, Google ADC
            return True
        return provider in self.provider_keys

    def needs_key(self, provider: str) -> bool:
        """Whether requests to ``provider`` must carry a key."""
        return provider not in self.keyless

    async def api_key(self, provider: str, override: str | None = None) -> str | None:
        """The key for ``provider``, or ``None`` for a keyless provider without one.

        Raises :class:`CredentialError` (never containing a key) when no source has one or a
        configured source fails.
        """
        if override:
            self._secrets.add(override)
            return override
        self._load_auth()
        if self._auth_error is not None:
            raise self._auth_error
        assert self._auth is not None
        entry = self._auth.get(provider)
        if isinstance(entry, ApiKeyEntry):
            origin = f"{self.auth_path} entry {provider!r}"
            return await self.resolve(parse_value(entry.key, self.env, origin))
        if isinstance(entry, OAuthEntry):
            if entry.expires is not None and entry.expires <= time.time() * 1000:
                raise CredentialError(
                    f"The OAuth token for {provider} in {self.auth_path} has expired; log in "
                    "again (pitrio cannot refresh OAuth tokens yet)"
                )
            self._secrets.add(entry.access)
            return entry.access
        for name in self.env_vars.get(provider, ()):
            value = self.env.get(name)
            if value:
                self._secrets.add(value)
                return value
        configured = self.provider_keys.get(provider)
        if configured is not None:
            origin = f"models.json providers.{provider}.apiKey"
            return await self.resolve(parse_value(configured, self.env, origin))
        if provider in self.keyless:
            return None
        raise CredentialError(missing_key_message(provider, self.env_vars, self.auth_path))

    async def resolve(self, source: ValueSource) -> str:
        """The value of ``source``; raises :class:`CredentialError` naming only its origin."""
        if source.kind == "literal":
            value = source.value
        elif source.kind == "env":
            found = self.env.get(source.value)
            if not found:
                raise CredentialError(
                    f"Environment variable {source.value} (named by {source.origin}) is not set"
                )
            value = found
        else:
            cached = self._command_cache.get(source.value)
            if cached is not None and source.kind == "command":
                return cached
            value = await self._run_command(source)
            if source.kind == "command":
                self._command_cache[source.value] = value
        self._secrets.add(value)
        return value

    async def resolve_headers(
        self, headers: Mapping[str, str] | None, origin: str
    ) -> dict[str, str]:
        """Configured headers with their values resolved like keys."""
        if not headers:
            return {}
        return {
            name: await self.resolve(parse_value(spec, self.env, f"{origin} header {name!r}"))
            for name, spec in headers.items()
        }

    def redact(self, text: str) -> str:
        """``text`` with every key and header value resolved so far replaced by ``***``."""
        return redact(text, self._secrets)

    # -- internals -------------------------------------------------------------------------

    def _load_auth(self) -> dict[str, AuthEntry]:
        if self._auth is None and self._auth_error is None:
            if self.auth_path is None:
                self._auth = {}
            else:
                try:
                    self._auth = load_auth_file(self.auth_path)
                except AuthFileError as exc:
                    self._auth_error = exc
        return self._auth or {}

    async def _run_command(self, source: ValueSource) -> str:
        # The output is the secret: it is never part of an error; stderr is not shown either,
        # since tools like password managers may echo what they were asked for.
        try:
            with trio.fail_after(self.command_timeout):
                result = await trio.run_process(
                    ["/bin/sh", "-c", source.value],
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                    stdin=b"",
                )
        except trio.TooSlowError:
            raise CredentialError(
                f"The key command of {source.origin} did not finish within "
                f"{self.command_timeout:g} s"
            ) from None
        except OSError as exc:
            raise CredentialError(
                f"The key command of {source.origin} could not run: {exc.strerror}"
            ) from None
        if result.returncode != 0:
            raise CredentialError(
                f"The key command of {source.origin} failed with exit code {result.returncode}"
            )
        value = result.stdout.decode("utf-8", errors="replace").strip()
        if not value:
            raise CredentialError(f"The key command of {source.origin} printed nothing")
        return value
