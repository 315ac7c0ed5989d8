"""The ``anthropic-messages`` provider: Anthropic's Messages API, streamed.

Request: ``POST {baseUrl}/v1/messages?beta=true`` (the SDK's beta client) with
``x-api-key``, ``anthropic-version`` and
``stream: true``; thinking is a token budget (``thinking: {type: "enabled", budget_tokens}``,
which must fit inside ``max_tokens``); prompt caching marks the system prompt and the last
user turn with ``cache_control``. Answer: named SSE events ``message_start`` (id, model,
input usage), ``content_block_start`` / ``content_block_delta`` (``text_delta``,
``thinking_delta``, ``signature_delta``, ``input_json_delta``) / ``content_block_stop`` per
block, ``message_delta`` (stop reason, output usage), ``message_stop``; ``ping`` keeps the
connection alive and ``error`` reports a failure mid-stream (e.g. ``overloaded_error``).
Thinking blocks keep their signature; ``redacted_thinking`` keeps its opaque ``data`` as the
signature, so both can be sent back unchanged on the next turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from pitrio.actors.model_router.providers.anthropic_forms import (
    adaptive_effort,
    adaptive_thinking,
    compat_of,
    tools_of,
)
from pitrio.actors.model_router.providers.anthropic_plain import oauth_turns, plain_turns
from pitrio.actors.model_router.providers.anthropic_stream import API, AnthropicParser
from pitrio.actors.model_router.providers.anthropic_threads import (
    MESSAGE_THREADS_BETA,
    OFF,
    ThreadPlan,
    ThreadStates,
    classify_rejection,
    create_plan,
    plan_request,
    record_reply,
    threads_supported,
)
from pitrio.actors.model_router.providers.anthropic_turns import (
    _ID_INVALID as _ID_INVALID,  # re-exported: its home moved (a test compares it)
)
from pitrio.actors.model_router.providers.anthropic_turns import (
    AnthropicTurns as AnthropicTurns,
)
from pitrio.actors.model_router.providers.anthropic_turns import (
    build_messages as build_messages,
)
from pitrio.actors.model_router.providers.anthropic_turns import facts_of as facts_of
from pitrio.actors.model_router.providers.anthropic_turns import (
    normalize_tool_id as normalize_tool_id,
)
from pitrio.actors.model_router.providers.anthropic_turns import stored_prefix
from pitrio.actors.model_router.providers.base import (
    OUTPUT_LIMIT_CAP,
    EventSender,
    ProviderSettings,
    output_limit,
    request_cache_retention,
    request_settings,
)
from pitrio.actors.model_router.providers.claude_code import (
    claude_code_body,
    claude_code_tools,
    reply_tool_names,
)
from pitrio.actors.model_router.providers.convert import (
    PrefixCache,
    encode_json_pieces,
)
from pitrio.actors.model_router.providers.http import (
    HttpProvider,
    HttpRequest,
    RequestFailure,
    SseParser,
    join_url,
)
from pitrio.actors.model_router.thinking import (
    effective_thinking_level,
    fit_thinking_budget,
    thinking_budget,
)
from pitrio.messages.agent import (
    AssistantMessage,
    Diagnostic,
    LlmMessage,
    now_ms,
)
from pitrio.messages.model import LlmContext, Model, StreamOptions

ANTHROPIC_VERSION = "2023-06-01"
BETA_FEATURES = "fine-grained-tool-streaming-2025-05-14"
THINKING_BETA = "interleaved-thinking-2025-05-14"
MIN_BUDGET = 1024
"""Anthropic's smallest accepted thinking budget."""


def _cache_control(settings: ProviderSettings) -> dict[str, str] | None:
    if settings.cache_retention == "none":
        return None
    if settings.cache_retention == "long":
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


_PREFIXES: PrefixCache[AnthropicTurns] = PrefixCache()


def _stored_prefix(
    model: Model, messages: Sequence[LlmMessage]
) -> tuple[AnthropicTurns, int] | None:
    """An encoded builder holding the turns of the stored messages that start ``messages`` (a
    resumed session's transcript, still undecoded), and how many messages it holds; ``None``
    when there is no such prefix (:func:`~.anthropic_turns.stored_prefix`; issue 38: the first
    turn after a resume decodes and encodes only what that module does not take)."""
    prefix = stored_prefix(model, messages)
    builder = None if prefix is None else AnthropicTurns.from_prefix(model, prefix)
    return None if builder is None or prefix is None else (builder, prefix.consumed)


def encoded_turns(model: Model, context: LlmContext, cache: dict[str, Any] | None) -> list[Any]:
    """The turns of :func:`build_messages` (cache mark included), resumed from the previous
    request of the same transcript (:class:`PrefixCache`), or on a resumed session's first
    request from its stored JSON (:func:`_stored_prefix`): only new messages are prepared
    and encoded."""
    builder = _PREFIXES.builder(
        model,
        context.messages,
        lambda: AnthropicTurns(model, encoded=True),
        lambda messages: _stored_prefix(model, messages),
    )
    return builder.finish(cache)


def build_body(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    settings: ProviderSettings,
    *,
    encoded: bool = False,
    messages: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of one streamed request (``encoded``: earlier turns as reused JSON
    fragments, see :func:`encoded_turns`; else plain, and pure; ``messages``: these turns,
    made by the caller with the cache mark of these settings)."""
    settings = request_settings(settings, options)
    cache = _cache_control(settings)
    if messages is None and encoded:
        messages = encoded_turns(model, context, cache)
    elif messages is None:
        messages = build_messages(model, context, cache)
    # The Messages API requires a limit: a model with none gets the cap.
    max_tokens = output_limit(model, options) or OUTPUT_LIMIT_CAP
    body: dict[str, Any] = {"model": model.id, "messages": messages, "max_tokens": max_tokens}
    body["stream"] = True
    if context.system_prompt:
        system: dict[str, Any] = {"type": "text", "text": context.system_prompt}
        if cache is not None:
            system["cache_control"] = cache
        body["system"] = [system]
    if context.tools:
        body["tools"] = tools_of(model, context, cache)
    if not model.reasoning:
        return body
    level = effective_thinking_level(model, options.reasoning)
    if level == "off":
        body["thinking"] = {"type": "disabled"}
    elif adaptive_thinking(model):
        body["thinking"] = {"type": "adaptive", "display": "summarized"}
        body["output_config"] = {"effort": adaptive_effort(model, level)}
    else:
        budget = thinking_budget(model, options.reasoning, settings.thinking_budgets)
        if budget is not None:
            total, budget = fit_thinking_budget(max_tokens, model.max_tokens, budget)
            body["max_tokens"] = total
            body["thinking"] = {
                "type": "enabled",
                "budget_tokens": budget or MIN_BUDGET,
                "display": "summarized",
            }
    return body


OAUTH_TOKEN_MARK = "sk-ant-oat"
"""What marks an Anthropic OAuth access token (pi's test)."""
OAUTH_BETAS = ("claude-code-20250219", "oauth-2025-04-20")
CLAUDE_CODE_VERSION = "2.1.75"
CLAUDE_CODE_IDENTITY = "You are Claude Code, Anthropic's official CLI for Claude."
"""The first system block pi sends with an OAuth token (the API requires it for those)."""


@attrs.frozen(kw_only=True)
class AnthropicRequest(HttpRequest):
    """A Messages API request; ``tool_names`` (with an OAuth token) maps the reply's tool
    names back (see :func:`reply_tool_names`); ``None``: the reply's names are kept."""

    tool_names: Mapping[str, str] | None = None
    thread: ThreadPlan | None = None
    """The message thread this request was sent in (its whole request included), if any."""


def is_oauth_token(model: Model, api_key: str | None) -> bool:
    """Whether ``api_key`` is a Claude Pro/Max OAuth token used as one (a Copilot model's
    bearer token never is, whatever it holds: pi checks Copilot first)."""
    return (
        bool(api_key)
        and OAUTH_TOKEN_MARK in (api_key or "")
        and (model.provider != "github-copilot")
    )


def thread_session(model: Model, options: StreamOptions, settings: ProviderSettings) -> str | None:
    """The session whose requests may use message threads (pi 1.6.0: the endpoint takes
    them, caching is on and the request names a session), else ``None``."""
    if not threads_supported(model) or request_cache_retention(settings, options) == "none":
        return None
    return options.session_id or None


def build_request(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    *,
    api_key: str | None,
    headers: Mapping[str, str],
    settings: ProviderSettings,
    threads: ThreadStates | None = None,
) -> HttpRequest:
    """The HTTP request of one streamed response; with ``threads`` (the sessions' thread
    states, read and updated) a threaded session's request joins its message thread."""
    oauth_token = is_oauth_token(model, api_key)
    session = thread_session(model, options, settings)
    threaded = (
        threads is not None
        and session is not None
        and not options.disable_continuation
        and threads.get(session) != OFF
    )
    # A thread may send only the newer turns, so its turns are plain (the encoded prefix
    # cannot be cut by turn); an OAuth token's name tools in Claude Code's casing. Each kept
    # between requests (anthropic_plain: a turn converts only its new messages).
    cache = _cache_control(request_settings(settings, options))
    chain_at = None
    if threaded:
        kept = plain_turns(model, context.messages, oauth=oauth_token)
        joined, chain_at = kept.request_turns(cache)
        body = build_body(model, context, options, settings, messages=joined)
    elif oauth_token:
        encoded = oauth_turns(model, context.messages, cache)
        body = build_body(model, context, options, settings, messages=encoded)
    else:
        body = build_body(model, context, options, settings, encoded=True)
    # pi 1.6.0's betas: fine-grained tool streaming where the tools cannot stream eagerly, and
    # interleaved thinking when a reasoning model thinks, but the adaptive ones (it is built
    # into those).
    beta: list[str] = []
    if context.tools and compat_of(model).get("supportsEagerToolInputStreaming") is False:
        beta.append(BETA_FEATURES)
    thinking = model.reasoning and options.reasoning is not None
    if thinking and effective_thinking_level(model, options.reasoning) == "off":
        thinking = False
    if thinking and not adaptive_thinking(model):
        beta.append(THINKING_BETA)
    if session is not None:  # also once threads are off: the resend was accepted with it
        beta.append(MESSAGE_THREADS_BETA)
    if oauth_token:  # a Claude Pro/Max token (pitrio login anthropic): Claude Code's identity
        body = claude_code_tools(body)  # the turns' names are renamed as they are made
        beta = [*OAUTH_BETAS, *beta]
        identity: dict[str, Any] = {"type": "text", "text": CLAUDE_CODE_IDENTITY}
        if cache is not None:
            identity["cache_control"] = cache
        body["system"] = [identity, *body.get("system", [])]
    request_headers = {
        "content-type": "application/json",
        "anthropic-version": ANTHROPIC_VERSION,
        # pi's client is the Anthropic SDK, told it may run in a browser.
        "anthropic-dangerous-direct-browser-access": "true",
    }
    if beta:
        request_headers["anthropic-beta"] = ",".join(beta)
    if oauth_token:
        request_headers["authorization"] = f"Bearer {api_key}"
        request_headers["user-agent"] = f"claude-cli/{CLAUDE_CODE_VERSION}"
        request_headers["x-app"] = "cli"
    elif api_key and model.provider == "github-copilot":  # Copilot's token is a bearer token
        request_headers["authorization"] = f"Bearer {api_key}"
    elif api_key:
        request_headers["x-api-key"] = api_key
        if compat_of(model).get("authHeader"):
            request_headers["authorization"] = f"Bearer {api_key}"
    request_headers.update({name.lower(): value for name, value in headers.items()})
    plan = None
    if threaded and threads is not None and session is not None:
        sent_betas = [b.strip() for b in request_headers.get("anthropic-beta", "").split(",")]
        betas = [b for b in sent_betas if b]
        plan = plan_request(threads, model, session, body, betas, chain_at)
    return AnthropicRequest(
        # pi 1.6.0 sends through the SDK's beta client, whose path says so.
        url=join_url(model.base_url, "v1/messages?beta=true"),
        headers=request_headers,
        body=encode_json_pieces(body if plan is None else plan.body),
        tool_names=reply_tool_names(context) if oauth_token else None,
        thread=plan,
    )


def reply_turns(model: Model, reply: AssistantMessage, *, oauth: bool) -> list[Any]:
    """``reply`` as the next request will send it (its assistant turn, or none when it has
    nothing to send), tool names in Claude Code's casing under an OAuth token."""
    builder = AnthropicTurns(model)
    builder.feed(reply)
    turns = [turn for turn in builder.finish() if turn["role"] == "assistant"]
    if oauth and turns:
        turns = claude_code_body({"messages": turns})["messages"]
    return turns


class AnthropicProvider(HttpProvider):
    """The ``anthropic-messages`` StreamFn (:meth:`stream`) over the shared pool."""

    api_label = API
    accept = "application/json"  # what pi's Anthropic client asks for, streaming or not
    error_style = "anthropic"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.threads = ThreadStates()
        """Every session's message-thread state (see :mod:`.anthropic_threads`)."""

    def build_request(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        *,
        api_key: str | None,
        headers: Mapping[str, str],
    ) -> HttpRequest:
        """See :func:`build_request`."""
        return build_request(
            model,
            context,
            options,
            api_key=api_key,
            headers=headers,
            settings=self.settings,
            threads=self.threads,
        )

    def new_parser(self, model: Model) -> AnthropicParser:
        """A parser for one response of ``model``."""
        return AnthropicParser(model)

    async def send_request(
        self, request: HttpRequest, parser: SseParser, send: EventSender
    ) -> None:
        """As the base, the parser told first how the request renamed its tools; a thread
        request's clean reply is recorded for the next, and its rejection answered as pi
        1.6.0 does (:meth:`_thread_fallback`)."""
        if not isinstance(parser, AnthropicParser) or not isinstance(request, AnthropicRequest):
            await super().send_request(request, parser, send)
            return
        parser.tool_names = request.tool_names
        if request.thread is not None:
            self._record_on_done(parser, request, request.thread)
        failure = await self.exchange(request, parser, send)
        if failure is not None and request.thread is not None:
            failure = await self._thread_fallback(request, request.thread, failure, parser, send)
        if failure is not None:
            await send.send(parser.fail(failure.text, **failure.diagnostic))

    def _record_on_done(
        self, parser: AnthropicParser, request: AnthropicRequest, plan: ThreadPlan
    ) -> None:
        model = parser.model
        oauth = request.tool_names is not None

        def record(message: AssistantMessage, served_model: str | None) -> None:
            turns = reply_turns(model, message, oauth=oauth)
            record_reply(self.threads, model, plan, turns, message.response_id, served_model)

        parser.on_done = record

    async def _thread_fallback(
        self,
        request: AnthropicRequest,
        plan: ThreadPlan,
        failure: RequestFailure,
        parser: AnthropicParser,
        send: EventSender,
    ) -> RequestFailure | None:
        """Answer a refused thread request once, in full (pi 1.6.0): as a new thread when the
        old one cannot be continued, else without ``thread``, which turns the session's
        threads off once the endpoint took it. Other failures stand (returned)."""
        if failure.status is None:
            return failure  # no answer at all: nothing says the thread was the trouble
        verdict, reason = classify_rejection(failure.status, failure.body)
        if verdict is None:
            return failure
        # On the message whatever the resend does (pi records it before resending).
        parser.builder.add_diagnostic(
            Diagnostic(
                type="anthropic_thread_fallback",
                timestamp=now_ms(),
                error={"message": parser.redact(failure.text)},
                details={"reason": reason},
            )
        )
        if verdict == "new-thread":
            created = create_plan(
                plan.session_id, plan.full, plan.betas, fixed=plan.fixed, chain_at=plan.chain_at
            )
            self._record_on_done(parser, request, created)
            resend = attrs.evolve(request, body=encode_json_pieces(created.body), thread=created)
            return await self.exchange(resend, parser, send)
        parser.on_done = None
        plain = attrs.evolve(request, body=encode_json_pieces(plan.full), thread=None)
        outcome = await self.exchange(plain, parser, send)
        if outcome is None:
            self.threads.set(plan.session_id, OFF)
        return outcome
