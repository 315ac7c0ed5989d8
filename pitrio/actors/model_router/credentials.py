"""Provider credentials: ``auth.json`` (pi's format), environment variables, ``models.json`` keys.

Resolution order for a provider's key (pi 1.6.0's, observed against it): the request's explicit
key (``--api-key``, an SDK hook), then the ``auth.json`` entry, then the ``apiKey`` of its
``models.json`` entry, then the provider's environment variables. An ``auth.json`` key that does
not resolve leaves a built-in provider to its environment variables and any other provider
without a key; a ``models.json`` ``apiKey`` that does not resolve is an error (the variables are
not consulted). Values are read as :mod:`.config_value` says (``!command``, or a template
with ``$NAME`` / ``${NAME}``, ``$$`` and ``$!``); an ``auth.json`` command runs once per process
(its result, failure included, is kept), a ``models.json`` command on every request. An
``auth.json`` ``api_key`` entry may carry an ``env`` object whose variables come before the
process environment for that provider (its templates, headers and provider settings).

``auth.json`` is ``{"<provider>": {"type": "api_key", "key": "...", "env": {...}} |
{"type": "oauth", "access": "...", "refresh": "...", "expires": <ms>}}``. It is written with
mode 0600 and is refused, with a message saying how to fix it, when group or others have any
access to it: a file others can write could make pitrio run their ``!command``.

No key value ever appears in an exception message, log or event: errors name the provider and
where the key was configured, and :meth:`Credentials.redact` scrubs every value resolved so
far out of vendor error texts before they reach a message.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import trio

from pitrio.actors.model_router import config_value
from pitrio.actors.model_router.auth_file import (
    LOCK_RETRIES,
    ApiKeyEntry,
    AuthEntry,
    OAuthEntry,
    load_auth_file,
    lock_path,
    parse_auth_entry,
    read_auth_document,
    try_lock,
    unlock,
    write_auth_document,
)
from pitrio.actors.model_router.catalogue import (
    BEARER_KEY_VARIABLES,
    RENAMED_PROVIDERS,
    fill_url,
    has_ambient_credentials,
    provider_env_vars,
    renamed_note,
    url_variables,
)
from pitrio.errors import AuthFileError, CredentialError
from pitrio.messages.ostext import os_text_problem

AUTH_FILE_NAME = "auth.json"
REFRESH_TIMEOUT_S = 25.0
"""Below the lock's stale age, so a refresh in flight never has its lock taken from it."""
COMMAND_TIMEOUT_S = 10.0
"""How long a ``!command`` may run before its value counts as unresolved (pi's 10 s)."""

if TYPE_CHECKING:
    from pitrio.actors.model_router import oauth


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
        self.notes: list[str] = []
        """Entries filed under a provider id pi renamed (read under the new id)."""
        self._auth_error: AuthFileError | None = None
        self._command_cache: dict[str, str | None] = {}
        self._command_failures: dict[str, str] = {}
        self._secrets: set[str] = set()
        self._clock = clock
        self._refreshing = trio.Lock()  # one refresh at a time within this process
        self.min_validity_ms = 0
        """An OAuth token with less than this left counts as expired (``pitrio auth
        print-bearer-token --min-expiry``)."""

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

        What pi calls "has auth": listings show only such models. A command counts as
        configured, a template when every variable it names is set. A refused ``auth.json``
        counts as unconfigured for the providers it would have served.
        """
        if provider in self.keyless:
            return True
        if self._missing_url_variables(provider):
            return False  # pi 1.6.0: Cloudflare needs its account (and gateway) id too
        entry = self._load_auth().get(provider)
        if isinstance(entry, OAuthEntry):
            return True
        if isinstance(entry, ApiKeyEntry):
            if entry.key and config_value.configured(entry.key, (entry.env, self.env)):
                return True
            return self._env_key(provider) is not None  # a built-in's own variables
        configured = self.provider_keys.get(provider)
        if configured is not None:
            return config_value.configured(configured, (self.env,))
        if self._env_key(provider) is not None or self.bearer_token(provider) is not None:
            return True
        return has_ambient_credentials(provider, self.env)  # AWS chain, Google ADC

    def _missing_url_variables(self, provider: str) -> tuple[str, ...]:
        names = url_variables().get(provider, ())
        if not names:
            return ()
        env = self.env_for(provider)
        return tuple(name for name in names if not env.get(name))

    def needs_key(self, provider: str) -> bool:
        """Whether requests to ``provider`` must carry a key."""
        return provider not in self.keyless

    def env_for(self, provider: str) -> Mapping[str, str]:
        """The environment of ``provider``'s requests: the process's, under the ``env`` object
        of its ``auth.json`` api-key entry (pi 1.6.0's provider-scoped variables)."""
        entry = self._load_auth().get(provider)
        if isinstance(entry, ApiKeyEntry) and entry.env:
            return {**self.env, **entry.env}
        return self.env

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
        if isinstance(entry, OAuthEntry):
            if self._expired(entry):
                entry = await self._refresh(provider)
            self._secrets.add(entry.access)
            return entry.access
        if isinstance(entry, ApiKeyEntry):
            return await self._auth_file_key(provider, entry)
        configured = self.provider_keys.get(provider)
        if configured is not None:
            what = f'API key for provider "{provider}"'
            origin = f"models.json providers.{provider}.apiKey"
            return await self.resolve(configured, what, origin, (self.env,), cache=False)
        found = self._env_key(provider)
        if found is not None:
            self._secrets.add(found)
            return found
        if provider in self.keyless:
            return None
        raise CredentialError(missing_key_message(provider, self.env_vars, self.auth_path))

    async def _auth_file_key(self, provider: str, entry: ApiKeyEntry) -> str:
        """The key of an ``auth.json`` api-key entry; when it does not resolve, a built-in
        provider's own variables (pi 1.6.0 falls back to them, never to ``models.json``)."""
        origin = f"{self.auth_path} entry {provider!r}"
        reason = f"{origin} has no key"
        if entry.key:
            value = config_value.parse(entry.key)
            envs = (entry.env, self.env)
            resolved = await self._value(value, envs, cache=True, origin=origin)
            if resolved is not None:
                self._secrets.add(resolved)
                return resolved
            reason = self._reason(f'API key for provider "{provider}"', value, envs, origin)
        found = self._env_key(provider)
        if found is not None:
            self._secrets.add(found)
            return found
        raise CredentialError(
            f"{reason}; fix the entry's key or remove it to use "
            f"{' or '.join(self.env_vars.get(provider, ())) or 'another key source'}"
        )

    def _env_key(self, provider: str) -> str | None:
        for name in self.env_vars.get(provider, ()):
            value = self.env.get(name)
            if value and name not in BEARER_KEY_VARIABLES:
                return value
        return None

    def bearer_token(self, provider: str) -> str | None:
        """A bearer token from the environment that stands for ``provider``'s key (pi 1.6.0's
        ``ANTHROPIC_AUTH_TOKEN``): read after an ``auth.json`` entry and a ``models.json``
        key, before the key variables; ``None`` where one of those decides."""
        if self._load_auth().get(provider) is not None or provider in self.provider_keys:
            return None
        for name in self.env_vars.get(provider, ()):
            value = self.env.get(name)
            if value and name in BEARER_KEY_VARIABLES:
                self._secrets.add(value)
                return value
        return None

    def base_url(self, provider: str, configured: str) -> str:
        """The base URL requests to ``provider`` go to: a Copilot OAuth token names its own.

        pi sends GitHub Copilot requests to the API host in the token's ``proxy-ep`` (else the
        enterprise domain's); ``{NAME}`` variables of a URL (Cloudflare's account and gateway)
        are filled in, a :class:`CredentialError` naming them when unset; every other
        provider keeps ``configured``.
        """
        if "{" in configured:
            # pi 1.6.0's Cloudflare URLs name the account (and gateway): from the auth.json
            # entry's env, then the process's.
            filled, missing = fill_url(configured, self.env_for(provider))
            if missing:
                raise CredentialError(
                    f"{provider}: set {' and '.join(missing)} (environment or the env of its "
                    f"auth.json entry): its base URL {configured} names them"
                )
            return filled
        if provider != "github-copilot":
            return configured
        entry = self._load_auth().get(provider)
        if not isinstance(entry, OAuthEntry):
            return configured
        enterprise = entry.fields.get("enterpriseUrl")
        from pitrio.actors.model_router import oauth  # logged-in Copilot only (issue 38)

        return oauth.copilot_base_url(entry.access, enterprise if enterprise else None)

    async def resolve(
        self,
        spec: str,
        what: str,
        origin: str,
        envs: tuple[Mapping[str, str], ...],
        *,
        cache: bool,
    ) -> str:
        """The value of ``spec``; raises :class:`CredentialError` saying which variable or
        command failed and where the value was configured (never a resolved value)."""
        value = config_value.parse(spec)
        resolved = await self._value(value, envs, cache=cache, origin=origin)
        if resolved is None:
            raise CredentialError(self._reason(what, value, envs, origin))
        self._secrets.add(resolved)
        return resolved

    async def resolve_headers(
        self, headers: Mapping[str, str] | None, origin: str, provider: str | None = None
    ) -> dict[str, str]:
        """Configured headers with their values resolved like ``models.json`` keys (every
        request; ``provider``'s ``auth.json`` variables first). Any header that does not
        resolve fails the request, as in pi 1.6.0."""
        if not headers:
            return {}
        envs: tuple[Mapping[str, str], ...] = (self.env,)
        if provider is not None:
            entry = self._load_auth().get(provider)
            if isinstance(entry, ApiKeyEntry) and entry.env:
                envs = (entry.env, self.env)
        label = f'provider "{provider}"' if provider is not None else origin
        return {
            name: await self.resolve(
                spec, f'{label} header "{name}"', f"{origin} header {name!r}", envs, cache=False
            )
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
        now_ms = self._clock() * 1000 + self.min_validity_ms
        return entry.expires is not None and now_ms >= entry.expires

    async def _refresh(self, provider: str) -> OAuthEntry:
        """A fresh token for ``provider``, renewed the way pi renews it.

        Under pi's lock on ``auth.json`` the file is read again (another pitrio or pi may have
        refreshed already); only a token still expired is renewed, and the new credentials are
        written back atomically with the other entries kept. When the renewal fails the file
        is read once more, in case another process won the race.
        """
        assert self.auth_path is not None
        # The OAuth flows are imported by the first refresh: a start refreshes nothing.
        from pitrio.actors.model_router import oauth

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
            current = parse_auth_entry(path, provider, raw)
            assert isinstance(current, OAuthEntry)
            if not self._expired(current):
                self._auth = None
                return current
            for value in (raw.get("refresh"), raw.get("access")):
                if isinstance(value, str):
                    self._secrets.add(value)
            from pitrio.actors.model_router import oauth  # see _refresh

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
        entry = parse_auth_entry(path, provider, merged)
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
                else:
                    self._alias_renamed(self._auth)
        return self._auth or {}

    def _alias_renamed(self, entries: dict[str, AuthEntry]) -> None:
        # An entry under a renamed provider's old id serves the new id (pi 1.6.0 would ignore
        # it); one under the new id wins. Only the in-memory table changes, never the file.
        for old, new in RENAMED_PROVIDERS.items():
            if old in entries and new not in entries:
                entries[new] = entries[old]
                note = renamed_note(old, f"{self.auth_path}: entry {old!r}")
                if note not in self.notes:
                    self.notes.append(note)

    async def _value(
        self,
        value: config_value.ConfigValue,
        envs: tuple[Mapping[str, str], ...],
        *,
        cache: bool,
        origin: str,
    ) -> str | None:
        """``value`` resolved, or ``None``. With ``cache`` a command runs once per process and
        its result, a failure included, is kept (pi's rule for ``auth.json``)."""
        if isinstance(value, config_value.Template):
            return config_value.expand(value, envs)
        if cache and value.command in self._command_cache:
            return self._command_cache[value.command]
        result = await self._run_command(value.command, origin)
        if cache:
            self._command_cache[value.command] = result
        return result

    def _reason(
        self,
        what: str,
        value: config_value.ConfigValue,
        envs: tuple[Mapping[str, str], ...],
        origin: str,
    ) -> str:
        """pi's words for an unresolved value, then where it was configured and, for a
        command, how it failed."""
        text = f"{config_value.unresolved_reason(what, value, envs)} ({origin})"
        if isinstance(value, config_value.Command):
            failure = self._command_failures.get(value.command)
            if failure:
                text += f": {failure}"
        return text

    async def _run_command(self, command: str, origin: str) -> str | None:
        """The trimmed stdout of ``sh -c command``; ``None`` when it fails, prints nothing or
        takes longer than :attr:`command_timeout` (the reason kept, not raised)."""
        # The output is the secret: it is never part of an error; stderr is not shown either,
        # since tools like password managers may echo what they were asked for.
        problem = os_text_problem(command, "command", from_os=True)
        if problem is not None:  # the spawn would fail with a bare UnicodeEncodeError
            self._command_failures[command] = f"the key command of {origin} cannot run: {problem}"
            return None
        value, failure = await command_output(command, self.command_timeout)
        if failure is not None:
            self._command_failures[command] = f"the key command of {origin} {failure}"
        else:
            self._command_failures.pop(command, None)
        return value


async def command_output(command: str, seconds: float) -> tuple[str | None, str | None]:
    """The trimmed stdout of ``sh -c command`` and ``None``, or ``None`` and why not (it failed,
    printed nothing or took longer than ``seconds``). stderr is never kept: tools like
    password managers may echo what they were asked for."""
    try:
        with trio.fail_after(seconds):
            result = await trio.run_process(
                ["/bin/sh", "-c", command],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                stdin=b"",
            )
    except trio.TooSlowError:
        return None, f"did not finish within {seconds:g} s"
    except OSError as exc:
        return None, f"could not run: {exc.strerror}"
    if result.returncode != 0:
        return None, f"failed with exit code {result.returncode}"
    value = result.stdout.decode("utf-8", errors="replace").strip() or None
    return value, None if value is not None else "printed nothing"


async def send_oauth_request(request: oauth.OAuthRequest, provider: str) -> bytes:
    """Send one OAuth request; the reply body, or :class:`CredentialError` (status, no body).

    The vendor's error body is not quoted: it may echo the token it refused.
    """
    import httpx  # here: a start that refreshes nothing need not load it (issue 38)

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
