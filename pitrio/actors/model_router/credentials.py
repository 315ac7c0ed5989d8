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

import contextlib
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
import httpx
import orjson
import trio

from pitrio.actors.model_router import oauth
from pitrio.actors.model_router.catalogue import has_ambient_credentials, provider_env_vars
from pitrio.errors import AuthFileError, CredentialError
from pitrio.messages.ostext import os_text_problem

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
REFRESH_TIMEOUT_S = 25.0
"""Below the stale age, so a refresh in flight never has its lock taken from it."""


def lock_path(path: Path) -> Path:
    """The directory whose creation is pi's lock on ``path`` (proper-lockfile's convention)."""
    return path.with_name(path.name + ".lock")


def try_lock(path: Path, now: float) -> bool:
    """Take pi's lock on ``path`` (``mkdir path.lock``); a stale lock is broken first."""
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
    if age > LOCK_STALE_S:
        try:
            lock.rmdir()
            lock.mkdir(mode=0o700)
            return True
        except OSError:
            return False
    return False


def unlock(path: Path) -> None:
    """Release pi's lock on ``path``."""
    with contextlib.suppress(FileNotFoundError):
        lock_path(path).rmdir()


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
        clock: Callable[[], float] = time.time,
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
        self._clock = clock
        self._refreshing = trio.Lock()  # one refresh at a time within this process

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
            if self._expired(entry):
                entry = await self._refresh(provider)
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

    def base_url(self, provider: str, configured: str) -> str:
        """The base URL requests to ``provider`` go to: a Copilot OAuth token names its own.

        pi sends GitHub Copilot requests to the API host in the token's ``proxy-ep`` (else the
        enterprise domain's); every other provider keeps ``configured``.
        """
        if provider != "github-copilot":
            return configured
        entry = self._load_auth().get(provider)
        if not isinstance(entry, OAuthEntry):
            return configured
        enterprise = entry.fields.get("enterpriseUrl")
        return oauth.copilot_base_url(entry.access, enterprise if enterprise else None)

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

    def remember_secret(self, value: str) -> None:
        """Scrub ``value`` from error texts too (a token a provider obtained itself)."""
        self._secrets.add(value)

    def redact(self, text: str) -> str:
        """``text`` with every key and header value resolved so far replaced by ``***``."""
        return redact(text, self._secrets)

    # -- OAuth refresh ---------------------------------------------------------------------

    def _expired(self, entry: OAuthEntry) -> bool:
        return entry.expires is not None and self._clock() * 1000 >= entry.expires

    async def _refresh(self, provider: str) -> OAuthEntry:
        """A fresh token for ``provider``, renewed the way pi renews it.

        Under pi's lock on ``auth.json`` the file is read again (another pitrio or pi may have
        refreshed already); only a token still expired is renewed, and the new credentials are
        written back atomically with the other entries kept. When the renewal fails the file
        is read once more, in case another process won the race.
        """
        assert self.auth_path is not None
        if provider not in oauth.PROVIDER_NAMES:
            raise CredentialError(
                f"The OAuth token for {provider} in {self.auth_path} has expired, and "
                f"{provider} is not an OAuth provider pitrio can refresh (those are "
                f"{', '.join(oauth.PROVIDER_NAMES)}); log in again"
            )
        async with self._refreshing:
            self.reload()
            entry = self._load_auth().get(provider)
            if isinstance(entry, OAuthEntry) and not self._expired(entry):
                return entry  # another task of ours refreshed it while we waited
            try:
                return await self._refresh_locked(provider, self.auth_path)
            except CredentialError as exc:
                self.reload()
                entry = self._load_auth().get(provider)
                if isinstance(entry, OAuthEntry) and not self._expired(entry):
                    return entry
                raise CredentialError(
                    f"Failed to refresh OAuth token for {provider}: {self.redact(str(exc))}; "
                    f"log in again with: pitrio login {provider}"
                ) from None

    async def _refresh_locked(self, provider: str, path: Path) -> OAuthEntry:
        delay = 0.1
        for _attempt in range(LOCK_RETRIES + 1):
            if try_lock(path, time.time()):  # against the real mtime of the lock
                break
            await trio.sleep(delay)
            delay = min(delay * 2, 10.0)
        else:
            raise CredentialError(f"{lock_path(path)} is held by another process")
        try:
            document = read_auth_document(path)
            raw = document.get(provider)
            if not isinstance(raw, dict) or raw.get("type") != "oauth":
                raise CredentialError(f"{path} has no OAuth entry for {provider}")
            current = _auth_entry(path, provider, raw)
            assert isinstance(current, OAuthEntry)
            if not self._expired(current):
                self._auth = None
                return current
            for value in (raw.get("refresh"), raw.get("access")):
                if isinstance(value, str):
                    self._secrets.add(value)
            request = oauth.refresh_request(provider, raw, self.env)
            body = await send_oauth_request(request, provider)
            fresh = oauth.parse_token_response(
                provider, body, previous=raw, now_ms=int(self._clock() * 1000)
            )
            merged = {**raw, **fresh, "type": "oauth"}
            document[provider] = merged
            write_auth_document(path, document)
        finally:
            unlock(path)
        self.reload()
        entry = _auth_entry(path, provider, merged)
        assert isinstance(entry, OAuthEntry)
        return entry

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
        problem = os_text_problem(source.value, "command", from_os=True)
        if problem is not None:  # the spawn would fail with a bare UnicodeEncodeError
            raise CredentialError(f"The key command of {source.origin} cannot run: {problem}")
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


async def send_oauth_request(request: oauth.OAuthRequest, provider: str) -> bytes:
    """Send one OAuth request; the reply body, or :class:`CredentialError` (status, no body).

    The vendor's error body is not quoted: it may echo the token it refused.
    """
    try:
        with trio.fail_after(REFRESH_TIMEOUT_S):
            async with httpx.AsyncClient() as client:
                response = await client.request(
                    request.method, request.url, headers=dict(request.headers), content=request.body
                )
    except trio.TooSlowError:
        raise CredentialError(
            f"The OAuth endpoint of {provider} did not answer within {REFRESH_TIMEOUT_S:g} s"
        ) from None
    except httpx.HTTPError as exc:
        raise CredentialError(
            f"The OAuth endpoint of {provider} could not be reached: {type(exc).__name__}"
        ) from None
    if response.status_code >= 400:
        raise CredentialError(
            f"The OAuth endpoint of {provider} answered HTTP {response.status_code}"
        )
    return response.content
