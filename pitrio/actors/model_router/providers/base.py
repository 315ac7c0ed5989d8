"""What every provider adapter implements: a stream function.

A stream function sends the :mod:`assistant stream events <pitrio.messages.stream>` of one
response on ``send`` (``start`` first, exactly one ``done`` or ``error`` last) and returns. It
never raises for request, model or runtime failures: those become a final ``error`` event whose
message has ``stop_reason="error"`` and an ``error_message``. Cancellation (abort) is ordinary
trio cancellation of the task running it; the caller turns the last partial message into the
``aborted`` one, so a provider needs no abort logic beyond being cancellable.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs

from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import EventSender as EventSender  # the providers import it here

if TYPE_CHECKING:
    from pitrio.actors.model_router.providers.retry import RetryPolicy

StreamFn = Callable[[Model, LlmContext, StreamOptions, EventSender], Awaitable[None]]
"""``await stream(model, context, options, send)``: stream one response as events on ``send``."""


CacheRetention = Literal["none", "short", "long"]


@attrs.frozen(kw_only=True)
class HttpSettings:
    """Timeouts, pool size and provider-level retries of the shared HTTP client.

    Provider-level retries follow the vendor SDKs pi's providers use (OpenAI's, Anthropic's):
    a request that failed before anything streamed (a connection failure, or a status those
    SDKs repeat) is sent again up to ``max_retries`` times (pi 1.6.0's default is none: a
    transient failure goes straight to the session's auto-retry, where the client sees it),
    after the server's ``retry-after`` or ``initial_retry_delay * 2**n`` capped at
    ``max_retry_backoff`` with jitter
    (:mod:`~pitrio.actors.model_router.providers.retry`). Nothing of a repeated try is sent
    on; only a failure that outlives them reaches the session's auto-retry. A requested delay
    beyond ``max_retry_delay_ms`` (``0`` = no cap) fails at once, the delay in the error text.
    """

    connect_timeout: float = 30.0
    read_timeout: float = 300.0
    """Longest silence between two reads of a response (thinking models pause long): pi
    1.6.0's ``httpIdleTimeoutMs``, or ``retry.provider.timeoutMs`` where that is set;
    ``math.inf`` where the setting disables it."""
    websocket_connect_timeout: float = 15.0
    """pi 1.6.0's ``websocketConnectTimeoutMs`` (``math.inf``: disabled)."""
    proxy: str | None = None
    """pi 1.6.0's ``httpProxy``: every HTTP request goes through it, as if it were
    ``HTTP_PROXY`` and ``HTTPS_PROXY`` (``NO_PROXY`` still exempts its hosts)."""
    write_timeout: float = 60.0
    pool_timeout: float = 60.0
    max_connections: int = 100
    max_keepalive: int = 20
    trust_env: bool = True
    """Honour ``HTTP(S)_PROXY``/``NO_PROXY`` and friends."""
    max_retries: int = 0
    initial_retry_delay: float = 0.5
    max_retry_backoff: float = 8.0
    max_retry_delay_ms: int = 60000
    max_error_body: int = 65536
    """Bytes of an error response read for the error message."""
    drain_timeout: float = 1.0
    """After the final event, how long to wait for the body's end (so the connection is reused)."""

    def retry_policy(self) -> RetryPolicy:
        """The retry rules these settings describe."""
        # Here: only an HTTP provider's request asks, and its module imported the rules
        # already; a start (and a faux model) does not need them (cold start, issue 38).
        from pitrio.actors.model_router.providers.retry import RetryPolicy

        return RetryPolicy(
            max_retries=self.max_retries,
            initial_delay=self.initial_retry_delay,
            max_delay=self.max_retry_backoff,
            max_retry_delay_ms=self.max_retry_delay_ms,
        )


@attrs.frozen(kw_only=True)
class ProviderSettings:
    """Settings every HTTP provider reads (pi's ``thinkingBudgets``, cache retention, HTTP)."""

    thinking_budgets: dict[str, int] | None = None
    cache_retention: CacheRetention = "short"
    http: HttpSettings = attrs.field(factory=HttpSettings)
    diagnostics: bool = False
    """Attach a ``diagnostics`` entry (status, retry-after, error class) to failed messages.
    pi's messages have none; a client asks for them (``$PITRIO_PROVIDER_DIAGNOSTICS=1``)."""
    transport: str = "auto"
    """pi's ``transport`` setting: ``sse``, ``websocket``, ``websocket-cached`` or ``auto``
    (only ``openai-codex-responses`` has a WebSocket transport)."""


def provider_settings(settings: Mapping[str, Any]) -> ProviderSettings:
    """:class:`ProviderSettings` from pi's (merged) ``settings.json`` keys.

    Reads ``thinkingBudgets``, ``retry.provider.{timeoutMs,maxRetries,maxRetryDelayMs}``
    (spec §8.2), ``transport`` and pi 1.6.0's ``httpIdleTimeoutMs``,
    ``websocketConnectTimeoutMs`` and ``httpProxy``; values of the wrong type are ignored
    (the settings layer reports them). The legacy ``retry.maxDelayMs`` stands for
    ``maxRetryDelayMs`` when that is unset (pi 1.6.0 migrates it there).
    ``timeoutMs`` bounds each read of a response, the closest a streaming client gets to a
    request timeout without cutting long answers.
    """
    http: dict[str, Any] = {}
    idle = _timeout(settings.get("httpIdleTimeoutMs"))
    if idle is not None:
        http["read_timeout"] = idle
    connect = _timeout(settings.get("websocketConnectTimeoutMs"))
    if connect is not None:
        http["websocket_connect_timeout"] = connect
    proxy = settings.get("httpProxy")
    if isinstance(proxy, str) and proxy.strip():
        http["proxy"] = proxy.strip()
    retry = settings.get("retry")
    provider = retry.get("provider") if isinstance(retry, Mapping) else None
    if isinstance(retry, Mapping):
        legacy = _number(retry.get("maxDelayMs"))
        if legacy is not None and legacy >= 0:
            http["max_retry_delay_ms"] = int(legacy)
    if isinstance(provider, Mapping):
        timeout = _number(provider.get("timeoutMs"))
        if timeout is not None and timeout > 0:
            http["read_timeout"] = timeout / 1000
        retries = _number(provider.get("maxRetries"))
        if retries is not None and retries >= 0:
            http["max_retries"] = int(retries)
        delay = _number(provider.get("maxRetryDelayMs"))
        if delay is not None and delay >= 0:
            http["max_retry_delay_ms"] = int(delay)
    budgets_value = settings.get("thinkingBudgets")
    budgets: dict[str, int] | None = None
    if isinstance(budgets_value, Mapping):
        budgets = {}
        for level, raw in budgets_value.items():
            number = _number(raw)
            if number is not None and number > 0:
                budgets[str(level)] = int(number)
    transport = settings.get("transport")
    legacy = settings.get("websockets")  # pi's older boolean, read as transport when alone
    if transport is None and isinstance(legacy, bool):
        transport = "websocket" if legacy else "sse"
    if transport not in ("sse", "websocket", "websocket-cached", "auto"):
        transport = "auto"
    return ProviderSettings(
        thinking_budgets=budgets or None, http=HttpSettings(**http), transport=str(transport)
    )


def _timeout(value: Any) -> float | None:
    """Seconds of a ``...Ms`` timeout setting: ``0`` or ``"disabled"`` is no limit
    (``math.inf``); anything else that is not a number leaves the default (``None``)."""
    if value == "disabled":
        return math.inf
    number = _number(value)
    if number is None or number < 0:
        return None
    return number / 1000 if number > 0 else math.inf


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


OUTPUT_LIMIT_CAP = 32000
"""The most output tokens a request asks for when its caller names no limit."""


def request_settings(settings: ProviderSettings, options: StreamOptions) -> ProviderSettings:
    """``settings`` with the request's own cache retention where it names one (pi 1.6.0's
    ``cacheRetention`` option wins over the provider's setting)."""
    retention = options.cache_retention
    if retention is None or retention == settings.cache_retention:
        return settings
    return attrs.evolve(settings, cache_retention=retention)


def request_cache_retention(settings: ProviderSettings, options: StreamOptions) -> CacheRetention:
    """The prompt caching of one request: its own, else the provider's setting."""
    return options.cache_retention or settings.cache_retention


def cache_session_id(options: StreamOptions) -> str | None:
    """The session id a request may cache and route by: none when the request itself turns
    caching off (pi 1.6.0's Codex reads only the request's option, not the setting)."""
    return None if options.cache_retention == "none" else options.session_id


def output_limit(model: Model, options: StreamOptions) -> int | None:
    """The output token limit one request sends: the caller's, else the model's capped at
    :data:`OUTPUT_LIMIT_CAP` (pi's default for every provider), else none."""
    if options.max_tokens:
        return options.max_tokens
    if model.max_tokens > 0:
        return min(model.max_tokens, OUTPUT_LIMIT_CAP)
    return None
