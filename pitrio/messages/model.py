"""Model descriptors and what one provider request carries (spec §1.8, §2.8)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import attrs

from pitrio.messages.agent import LlmMessage, ThinkingLevel
from pitrio.messages.codec import extra_field


@attrs.frozen(kw_only=True)
class ModelCost:
    """Model prices in USD per million tokens."""

    input: float = 0
    output: float = 0
    cache_read: float = 0
    cache_write: float = 0
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class Model:
    """A model as pi describes it: identity, API, limits and prices."""

    id: str
    name: str
    api: str
    provider: str
    base_url: str
    reasoning: bool
    input: tuple[Literal["text", "image"], ...]
    cost: ModelCost
    context_window: int
    max_tokens: int
    # pi's wire order puts these optional fields last (get_state, get_available_models).
    thinking_level_map: dict[str, str | None] | None = None
    compat: Any = None
    headers: dict[str, str] | None = None
    extra: dict[str, Any] | None = extra_field()

    @property
    def ref(self) -> str:
        """``provider/id``, the way a user names the model."""
        return f"{self.provider}/{self.id}"


@attrs.frozen(kw_only=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON-schema parameters.

    ``constrained_sampling`` (pi's ``constrainedSampling: {type: "json_schema", strict}``):
    ``"prefer"`` asks providers that can to declare the tool strict (arguments constrained to
    the schema), ``"require"`` makes a provider that cannot fail the request; ``None`` never.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    constrained_sampling: Literal["prefer", "require"] | None = None
    extra: dict[str, Any] | None = extra_field()


def sampling_strictness(declared: dict[str, Any] | None) -> Literal["prefer", "require"] | None:
    """The :attr:`ToolSpec.constrained_sampling` of a tool declared with pi's
    ``constrainedSampling`` object (``{"type": "json_schema", "strict": "prefer"}``)."""
    if not declared or declared.get("type") != "json_schema":
        return None
    strict = declared.get("strict")
    return strict if strict in ("prefer", "require") else None


@attrs.frozen(kw_only=True)
class LlmContext:
    """One provider request's context: system prompt, LLM messages, tools."""

    system_prompt: str
    messages: Sequence[LlmMessage]
    """Immutable: a tuple, or a :class:`~pitrio.messages.snapshot.Snapshot` of a session's
    transcript (which shares its items with the previous request's)."""
    tools: tuple[ToolSpec, ...] = ()
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class StreamOptions:
    """Per-request options passed to a provider stream."""

    reasoning: ThinkingLevel | None = None
    session_id: str | None = None
    api_key: str | None = None
    max_tokens: int | None = None
    cache_retention: Literal["none", "short", "long"] | None = None
    """This request's prompt caching, over the provider's setting (``None``: the setting).
    pi 1.6.0 sends its one-off summary calls with ``none``: no cache writes."""
    disable_continuation: bool = False
    """Never continue a provider-side thread of the session (pi 1.6.0's
    ``disableContinuation``, which its cache-warming requests set): the whole request goes."""
    hooks: Any = attrs.field(default=None, eq=False, repr=False)
    """What an HTTP provider calls at each stage of this request (a
    :class:`~pitrio.actors.model_router.provider_hooks.ProviderHooks`: the extensions'
    ``before_provider_headers`` ... ``provider_stream_event``); ``None``: nothing."""
    extra: dict[str, Any] | None = extra_field()
