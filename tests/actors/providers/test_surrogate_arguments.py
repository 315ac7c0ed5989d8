"""Issue 36: a model's tool call whose arguments hold a lone surrogate (kept, as JSON.parse
keeps it, so the tool can refuse it by name) goes back to the provider in the next request
written as JSON.stringify writes it (escaped), not as an encoding error that ends the run."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from pitrio.actors.model_router.providers import mistral, openai_completions, openai_responses
from pitrio.actors.model_router.stream_builder import parse_arguments
from pitrio.messages import ToolCall
from pitrio.messages.agent import AssistantMessage
from pitrio.messages.model import LlmContext, StreamOptions
from tests.actors.providers.support import make_model, tool_turn

ESCAPED = '{"path":"x\\ud800"}'


def with_arguments(api: str, arguments: dict[str, Any]) -> LlmContext:
    """The tool round trip of :func:`tool_turn` with other arguments in its call."""
    context = tool_turn(api)
    user, assistant, result = context.messages
    assert isinstance(assistant, AssistantMessage)
    content = tuple(
        attrs.evolve(block, arguments=arguments) if isinstance(block, ToolCall) else block
        for block in assistant.content
    )
    return attrs.evolve(context, messages=(user, attrs.evolve(assistant, content=content), result))


def test_the_arguments_are_parsed_with_the_lone_surrogate_kept() -> None:
    assert parse_arguments(ESCAPED) == {"path": "x\ud800"}
    assert parse_arguments('{"path": "x') is None  # still incomplete: not yet an object


@pytest.mark.parametrize(
    ("module", "api"),
    [
        (openai_completions, "openai-completions"),
        (openai_responses, "openai-responses"),
        (mistral, "mistral-conversations"),
    ],
)
def test_the_next_request_carries_them_escaped(module: Any, api: str) -> None:
    model = make_model(api)
    context = with_arguments(api, {"path": "x\ud800"})
    body = module.build_body(model, context, StreamOptions())
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("arguments"), str):
                found.append(value["arguments"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(body)
    assert found == [ESCAPED]
