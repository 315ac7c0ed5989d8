"""The thinking fields of pi 1.6.0's thinking formats (facts checked against real pi by
tests/interop/test_pi_thinking_formats.py; these run without it)."""

from __future__ import annotations

from typing import Any

import pytest

from pitrio.actors.model_router.providers.openai_compat import (
    OpenAICompat,
    compat_of,
    detect_compat,
)
from pitrio.actors.model_router.providers.openai_thinking import thinking_fields
from pitrio.messages.model import Model, ModelCost

MAP = {"off": "none", "minimal": None, "high": "hi"}


def model(mapped: bool = False, **changes: Any) -> Model:
    fields: dict[str, Any] = {
        "id": "m", "name": "m", "api": "openai-completions", "provider": "p",
        "base_url": "http://h/v1", "reasoning": True, "input": ("text",), "cost": ModelCost(),
        "context_window": 1000, "max_tokens": 100,
        "thinking_level_map": MAP if mapped else None,
    }  # fmt: skip
    fields.update(changes)
    return Model(**fields)


@pytest.mark.parametrize(
    ("form", "level", "mapped", "expected"),
    [
        ("openai", "high", True, {"reasoning_effort": "hi"}),
        ("openai", "off", True, {"reasoning_effort": "none"}),
        ("openai", "off", False, {}),
        ("openrouter", "off", False, {"reasoning": {"effort": "none"}}),
        ("deepseek", "high", False, {"thinking": {"type": "enabled"}, "reasoning_effort": "high"}),
        ("together", "off", False, {"reasoning": {"enabled": False}}),
        ("zai", "high", False,
         {"thinking": {"type": "enabled", "clear_thinking": False}, "reasoning_effort": "high"}),
        ("qwen", "off", False, {"enable_thinking": False}),
        ("qwen-chat-template", "high", False,
         {"chat_template_kwargs": {"enable_thinking": True, "preserve_thinking": True}}),
        ("ant-ling", "high", False, {}),
        ("ant-ling", "off", True, {"reasoning_effort": "none"}),
        ("string-thinking", "high", True, {"thinking": "hi"}),
    ],
)  # fmt: skip
def test_thinking_formats(form: str, level: str, mapped: bool, expected: dict[str, Any]) -> None:
    compat = OpenAICompat(thinking_format=form)
    assert thinking_fields(model(mapped), compat, level) == expected


def test_template_variables() -> None:
    kwargs = {"on": {"$var": "thinking.enabled"}, "effort": {"$var": "thinking.effort"},
              "hidden": {"$var": "thinking.effort", "omitWhenOff": True}, "fixed": 7}  # fmt: skip
    compat = OpenAICompat(thinking_format="chat-template", chat_template_kwargs=kwargs)
    assert thinking_fields(model(True), compat, "high") == {
        "chat_template_kwargs": {"on": True, "effort": "hi", "hidden": "hi", "fixed": 7}
    }
    assert thinking_fields(model(True), compat, "off") == {
        "chat_template_kwargs": {"on": False, "effort": "none", "fixed": 7}
    }


def test_detected_formats_and_efforts() -> None:
    assert detect_compat(model(provider="deepseek")).thinking_format == "deepseek"
    assert detect_compat(model(base_url="https://api.together.xyz/v1")).thinking_format == (
        "together"
    )
    zai = detect_compat(model(provider="zai"))
    assert (zai.thinking_format, zai.supports_reasoning_effort) == ("zai", False)
    assert not detect_compat(model(provider="xai")).supports_reasoning_effort
    assert detect_compat(model()).supports_reasoning_effort
    assert thinking_fields(model(reasoning=False), OpenAICompat(), "high") == {}


def test_thinking_budgets_leave_room_for_the_answer() -> None:
    field = OpenAICompat(thinking_token_budget_field="thinking_budget")
    assert thinking_fields(model(), field, "high", 16384) == {
        "reasoning_effort": "high",
        "thinking_budget": 16384 - 1024,
    }
    assert thinking_fields(model(), field, "low", 100000)["thinking_budget"] == 2048
    assert "thinking_budget" not in thinking_fields(model(), field, "high", 1024)  # no room
    assert "thinking_budget" not in thinking_fields(model(), field, "off", 100000)
    flag = OpenAICompat(supports_thinking_token_budget=True)
    assert thinking_fields(model(), flag, "max", 100000)["thinking_token_budget"] == 16384
    kwargs = {"b": {"$var": "thinking.budget"}}
    template = OpenAICompat(thinking_format="chat-template", chat_template_kwargs=kwargs)
    assert thinking_fields(model(), template, "medium", 100000) == {
        "chat_template_kwargs": {"b": 8192}
    }
    assert thinking_fields(model(), template, "off", 100000) == {}


def test_tools_with_tool_history() -> None:
    from pitrio.actors.model_router.providers import openai_completions
    from pitrio.messages import user_message
    from pitrio.messages.content import ToolCall
    from pitrio.messages.model import LlmContext, StreamOptions
    from tests.actors.providers.support import assistant, tool_result

    call = assistant(ToolCall(id="c1", name="read", arguments={}), stop_reason="toolUse")
    result = tool_result("c1", "x")
    history = LlmContext(
        system_prompt="s", messages=(user_message("hi", timestamp=0), call, result)
    )
    plain = LlmContext(system_prompt="s", messages=(user_message("hi", timestamp=0),))
    needs = model(compat={"requiresToolsWithToolHistory": True})
    assert openai_completions.build_body(needs, history, StreamOptions())["tools"] == []
    assert "tools" not in openai_completions.build_body(needs, plain, StreamOptions())
    assert "tools" not in openai_completions.build_body(model(), history, StreamOptions())


def test_the_flags_are_kept_for_the_same_model_object_only() -> None:
    """``compat_of`` answers as ``detect_compat``; the same model object gets the same flags
    again, another object (even an equal one) is detected afresh."""
    mistral, zai = model(provider="mistral"), model(provider="zai")
    first = compat_of(mistral)
    assert first == detect_compat(mistral) and first.requires_mistral_tool_ids
    assert compat_of(mistral) is first
    assert compat_of(zai) == detect_compat(zai) and compat_of(zai).thinking_format == "zai"
    again = model(provider="mistral")
    assert compat_of(again) == first and compat_of(again) is not first
    edited = model(provider="mistral", compat={"requiresMistralToolIds": False})
    assert not compat_of(edited).requires_mistral_tool_ids
