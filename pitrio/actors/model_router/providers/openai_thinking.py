"""The thinking fields of an OpenAI-compatible Chat Completions body, by ``compat.thinkingFormat``
(pi 1.6.0's formats; pure).

Facts from pi-ai 1.6.0's ``openai-completions.js``: each server family asks for thinking its
own way. ``level`` is the request's thinking level after clamping to the model (``off`` when
thinking is off); a model's ``thinkingLevelMap`` names the vendor's value of a level, and a
level it maps to nothing (absent, or ``null``) is sent under its own name where a format sends
names at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pitrio.actors.model_router.providers.openai_compat import OpenAICompat
from pitrio.messages.model import Model

_ABSENT = object()


DEFAULT_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
"""pi 1.6.0's thinking budgets of a top-level budget field (``xhigh`` and ``max`` take
``high``'s)."""
MIN_ANSWER_TOKENS = 1024
"""Tokens a budget always leaves for the answer under the shared output ceiling."""


def thinking_budget(model: Model, level: str, ceiling: int | None) -> int | None:
    """The budget for ``level`` under the body's output ceiling (``None``: thinking off or
    no room), as pi caps a top-level budget field and ``thinking.budget`` template values."""
    if level == "off" or not model.reasoning:
        return None
    budget = DEFAULT_BUDGETS["high" if level in ("xhigh", "max") else level]
    room = (ceiling if ceiling is not None else model.max_tokens) - MIN_ANSWER_TOKENS
    budget = min(budget, max(0, room))
    return budget if budget > 0 else None


def budget_field(compat: OpenAICompat) -> str | None:
    """The top-level field capping reasoning tokens, if the server takes one."""
    if compat.thinking_token_budget_field:
        return compat.thinking_token_budget_field
    return "thinking_token_budget" if compat.supports_thinking_token_budget else None


def thinking_fields(
    model: Model, compat: OpenAICompat, level: str, ceiling: int | None = None
) -> dict[str, Any]:
    """The body fields that ask ``model``'s server for thinking at ``level``, in pi's order
    (``ceiling``: the body's output limit, which a thinking budget must leave room under)."""
    if not model.reasoning:
        return {}
    budget = thinking_budget(model, level, ceiling)
    levels = model.thinking_level_map or {}
    effort = None if level == "off" else level  # pi's reasoningEffort: absent when off

    def named(value: str) -> Any:
        # pi's ``map[level] ?? level``: a null or absent mapping sends the level's own name.
        mapped = levels.get(value)
        return value if mapped is None else mapped

    def exact(value: str | None) -> Any:
        # pi's ``mapped === undefined ? effort : mapped``: a null mapping stays null.
        if value is None:
            return levels.get("off", _ABSENT)
        return levels.get(value, _ABSENT)

    off = levels.get("off", _ABSENT)
    form = compat.thinking_format
    out: dict[str, Any] = {}
    if form == "zai":
        out["thinking"] = (
            {"type": "enabled", "clear_thinking": False} if effort else {"type": "disabled"}
        )
        if effort and compat.supports_reasoning_effort:
            mapped = exact(effort)
            value = effort if mapped is _ABSENT else mapped
            if isinstance(value, str):
                out["reasoning_effort"] = value
    elif form == "qwen":
        out["enable_thinking"] = bool(effort)
        if effort and compat.supports_reasoning_effort:
            value = named(effort)
            if isinstance(value, str):
                out["reasoning_effort"] = value
    elif form == "qwen-chat-template":
        out["chat_template_kwargs"] = {"enable_thinking": bool(effort), "preserve_thinking": True}
    elif form == "chat-template":
        values = _template_values(levels, effort, compat.chat_template_kwargs, budget)
        if values:
            out["chat_template_kwargs"] = values
    elif form == "baseten":
        values = _template_values(levels, effort, compat.chat_template_args, budget)
        if values:
            out["chat_template_args"] = values
        if compat.supports_reasoning_effort:
            mapped = exact(effort)
            value = effort if mapped is _ABSENT else mapped
            if isinstance(value, str):
                out["reasoning_effort"] = value
    elif form == "deepseek":
        if effort:
            out["thinking"] = {"type": "enabled"}
        elif off is not None:
            out["thinking"] = {"type": "disabled"}
        if effort and compat.supports_reasoning_effort:
            out["reasoning_effort"] = named(effort)
    elif form == "openrouter":
        if effort:
            out["reasoning"] = {"effort": named(effort)}
        elif off is not None:
            out["reasoning"] = {"effort": "none" if off is _ABSENT else off}
    elif form == "ant-ling" and effort:
        # Off, ant-ling falls through to the OpenAI form below (pi's branch needs an effort).
        if isinstance(levels.get(effort), str):
            out["reasoning"] = {"effort": levels[effort]}
    elif form == "together":
        out["reasoning"] = {"enabled": bool(effort)}
        if effort and compat.supports_reasoning_effort:
            out["reasoning_effort"] = named(effort)
    elif form == "string-thinking":
        if effort:
            out["thinking"] = named(effort)
        elif off is not None:
            out["thinking"] = "none" if off is _ABSENT else off
    elif effort and compat.supports_reasoning_effort:
        value = named(effort)
        out["reasoning_effort"] = compat.reasoning_effort_map.get(value, value)
    elif not effort and compat.supports_reasoning_effort and isinstance(off, str):
        out["reasoning_effort"] = off
    field = budget_field(compat)
    if field is not None and budget is not None:
        out[field] = budget  # whatever the format: one server serves several
    return out


def _template_values(
    levels: Mapping[str, Any], effort: str | None, values: Mapping[str, Any], budget: int | None
) -> dict[str, Any]:
    """``chat_template_kwargs``/``_args`` with pi's ``$var`` values filled in (an entry that
    resolves to nothing is left out)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if not isinstance(value, Mapping):
            out[key] = value
            continue
        if not effort and value.get("omitWhenOff"):
            continue
        variable = value.get("$var")
        if variable == "thinking.enabled":
            out[key] = bool(effort)
            continue
        if variable == "thinking.budget":
            if budget is not None:
                out[key] = budget
            continue
        mapped = levels.get(effort if effort else "off", _ABSENT)
        if mapped is _ABSENT:
            if effort is not None:
                out[key] = effort
        elif isinstance(mapped, str):
            out[key] = mapped
    return out
