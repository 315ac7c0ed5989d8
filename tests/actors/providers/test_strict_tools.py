"""Strict tool declarations (pi 1.6.0's constrained sampling), per provider.

The file tools ask for strict sampling ``"prefer"``; a provider whose model allows strict tools
declares them strict with the rewritten schema, the others as they are.
"""

from __future__ import annotations

from typing import Any

import pytest

from pitrio.actors.model_router.providers import (
    anthropic,
    azure_openai_responses,
    bedrock_converse_forms,
    google,
    google_vertex,
    mistral,
    openai_codex_responses,
    openai_completions,
    openai_responses,
)
from pitrio.actors.model_router.providers.anthropic_forms import strict_refuses
from pitrio.actors.model_router.providers.base import ProviderSettings
from pitrio.actors.model_router.providers.strict_tools import (
    UnsupportedStrictSchema,
    make_strict_schema,
    resolve_strict,
    tool_parameters,
)
from pitrio.actors.tool_executor.tools import bash, edit, read, write
from pitrio.errors import ProviderError
from pitrio.messages import user_message
from pitrio.messages.model import LlmContext, StreamOptions, ToolSpec
from tests.actors.providers.support import make_model

READ = ToolSpec(
    name="read",
    description="Read a file",
    parameters=read.PARAMETERS,
    constrained_sampling="prefer",
)
LS = ToolSpec(
    name="ls",
    description="List",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
CONTEXT = LlmContext(
    system_prompt="sys", messages=(user_message("hi", timestamp=1),), tools=(READ, LS)
)

STRICT_READ: dict[str, Any] = {
    "type": "object",
    "required": ["path", "offset", "limit"],
    "properties": {
        "path": read.PARAMETERS["properties"]["path"],
        "offset": {"anyOf": [read.PARAMETERS["properties"]["offset"], {"type": "null"}]},
        "limit": {"anyOf": [read.PARAMETERS["properties"]["limit"], {"type": "null"}]},
    },
    "additionalProperties": False,
}


# -- the rewrite ---------------------------------------------------------------------------


def test_strict_schema_requires_all_closes_objects_and_makes_optionals_nullable() -> None:
    strict = make_strict_schema(read.PARAMETERS)
    assert strict == STRICT_READ
    # pi's key order: the object's own keys first, additionalProperties appended.
    assert list(strict) == ["type", "required", "properties", "additionalProperties"]
    assert list(strict["properties"]) == ["path", "offset", "limit"]
    assert read.PARAMETERS["required"] == ["path"]  # the tool's own schema is untouched
    assert "additionalProperties" not in read.PARAMETERS


def test_strict_schema_recurses_into_array_items() -> None:
    strict = make_strict_schema(edit.PARAMETERS)
    item = strict["properties"]["edits"]["items"]
    assert item["required"] == ["oldText", "newText"]
    assert item["additionalProperties"] is False
    assert list(item) == ["type", "required", "properties", "additionalProperties"]
    assert strict["required"] == ["path", "edits"]


def test_an_object_without_required_gets_it_after_its_properties() -> None:
    strict = make_strict_schema({"type": "object", "properties": {"a": {"type": "string"}}})
    assert list(strict) == ["type", "properties", "required", "additionalProperties"]
    assert strict["properties"]["a"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}


def test_a_property_that_takes_null_is_not_wrapped() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"enum": ["x", None]},
            "c": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
    }
    strict = make_strict_schema(schema)
    assert strict["properties"] == schema["properties"]
    assert strict["required"] == ["a", "b", "c"]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}},
        {"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}},
        {"type": "object", "properties": {"a": {"description": "no type"}}},
        {"type": "object", "additionalProperties": True},
        {"type": "object", "properties": {"a": {"anyOf": [{"type": "object"}]}}},
        {"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}},
        {"type": "object", "required": ["nope"], "properties": {}},
        {"type": "string"},
        {"properties": {"a": {"type": "string"}}},
    ],
)
def test_schemas_strict_mode_cannot_express_are_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedStrictSchema):
        make_strict_schema(schema)


def test_resolve_prefer_require_and_none() -> None:
    assert resolve_strict(READ, True) is True
    assert resolve_strict(READ, False) is None
    assert resolve_strict(LS, True) is None
    odd = {"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}}
    prefer = ToolSpec(name="t", description="", parameters=odd, constrained_sampling="prefer")
    assert resolve_strict(prefer, True) is None  # falls back to a plain declaration
    require = ToolSpec(name="t", description="", parameters=odd, constrained_sampling="require")
    with pytest.raises(ProviderError, match='Tool "t" requires JSON-schema constrained sampling'):
        resolve_strict(require, True)
    with pytest.raises(ProviderError, match="strict tools are unsupported"):
        resolve_strict(require, False)
    assert tool_parameters(READ, None) is read.PARAMETERS
    assert tool_parameters(READ, True) == STRICT_READ


def test_the_file_tools_ask_for_strict_sampling_and_the_others_do_not() -> None:
    from pitrio.actors.tool_executor.tools import create_builtin_tools

    asks = {tool.name: tool.spec.constrained_sampling for tool in create_builtin_tools("/tmp")}
    assert asks == {
        "read": "prefer",
        "bash": "prefer",
        "edit": "prefer",
        "write": "prefer",
        "grep": None,
        "find": None,
        "ls": None,
    }
    for module in (read, bash, edit, write):
        make_strict_schema(module.PARAMETERS)  # each can be strict


def test_anthropic_refused_keywords() -> None:
    assert strict_refuses("minimum", 0)
    assert strict_refuses("minItems", 2) and not strict_refuses("minItems", 1)
    assert strict_refuses("format", "regex") and not strict_refuses("format", "uuid")
    assert not strict_refuses("description", "x")


# -- per provider --------------------------------------------------------------------------


def test_openai_completions() -> None:
    plain = openai_completions.build_body(
        make_model("openai-completions"), CONTEXT, StreamOptions()
    )
    assert [list(t["function"]) for t in plain["tools"]] == [
        ["name", "description", "parameters"]
    ] * 2
    model = make_model("openai-completions", compat={"supportsStrictMode": True})
    tools = openai_completions.build_body(model, CONTEXT, StreamOptions())["tools"]
    assert tools[0]["function"] == {
        "name": "read",
        "description": "Read a file",
        "parameters": STRICT_READ,
        "strict": True,
    }
    assert tools[1]["function"]["strict"] is False
    assert tools[1]["function"]["parameters"] is LS.parameters


def test_openai_responses_and_azure() -> None:
    plain = openai_responses.build_body(make_model("openai-responses"), CONTEXT, StreamOptions())
    assert all("strict" not in t for t in plain["tools"])
    assert plain["tools"][0]["parameters"] is read.PARAMETERS
    model = make_model("openai-responses", compat={"supportsStrictMode": True})
    tools = openai_responses.build_body(model, CONTEXT, StreamOptions())["tools"]
    assert [t["strict"] for t in tools] == [True, False]
    assert list(tools[0]) == ["type", "name", "description", "parameters", "strict"]
    assert tools[0]["parameters"] == STRICT_READ
    azure = azure_openai_responses.build_body(
        make_model("azure-openai-responses"), CONTEXT, StreamOptions(), deployment="d"
    )
    assert [t["strict"] for t in azure["tools"]] == [True, False]  # on by default at Azure
    off = make_model("azure-openai-responses", compat={"supportsStrictMode": False})
    azure_off = azure_openai_responses.build_body(off, CONTEXT, StreamOptions(), deployment="d")
    assert all("strict" not in t for t in azure_off["tools"])


def test_codex_sends_null_for_tools_that_are_not_strict() -> None:
    body = openai_codex_responses.build_body(
        make_model("openai-codex-responses"), CONTEXT, StreamOptions()
    )
    assert [t["strict"] for t in body["tools"]] == [True, None]
    assert body["tools"][0]["parameters"] == STRICT_READ


def test_anthropic_strict_only_with_supports_strict_tools() -> None:
    settings = ProviderSettings()
    plain = anthropic.build_body(
        make_model("anthropic-messages"), CONTEXT, StreamOptions(), settings
    )
    first = plain["tools"][0]
    assert "strict" not in first
    assert first["input_schema"] == {
        "type": "object",
        "properties": read.PARAMETERS["properties"],
        "required": ["path"],
    }
    model = make_model("anthropic-messages", compat={"supportsStrictTools": True})
    tools = anthropic.build_body(model, CONTEXT, StreamOptions(), settings)["tools"]
    assert tools[0]["strict"] is True
    assert list(tools[0])[:4] == ["name", "description", "eager_input_streaming", "strict"]
    assert tools[0]["input_schema"] == STRICT_READ
    assert list(tools[0]["input_schema"]) == list(STRICT_READ)
    assert "strict" not in tools[1]


def test_anthropic_keeps_a_tool_with_refused_keywords_plain() -> None:
    bounded = ToolSpec(
        name="n",
        description="",
        parameters={"type": "object", "properties": {"k": {"type": "number", "minimum": 1}}},
        constrained_sampling="prefer",
    )
    context = LlmContext(system_prompt="", messages=CONTEXT.messages, tools=(bounded,))
    model = make_model("anthropic-messages", compat={"supportsStrictTools": True})
    tool = anthropic.build_body(model, context, StreamOptions(), ProviderSettings())["tools"][0]
    assert "strict" not in tool
    assert tool["input_schema"]["required"] == []


def test_bedrock_strict_member_last() -> None:
    settings = ProviderSettings()
    model = make_model("bedrock-converse-stream", compat={"supportsStrictMode": True})
    body = bedrock_converse_forms.build_body(model, CONTEXT, StreamOptions(), settings, {})
    spec = body["toolConfig"]["tools"][0]["toolSpec"]
    assert list(spec) == ["name", "inputSchema", "description", "strict"]
    assert spec["inputSchema"] == {"json": STRICT_READ}
    assert "strict" not in body["toolConfig"]["tools"][1]["toolSpec"]
    plain = bedrock_converse_forms.build_body(
        make_model("bedrock-converse-stream"), CONTEXT, StreamOptions(), settings, {}
    )
    assert "strict" not in plain["toolConfig"]["tools"][0]["toolSpec"]


def test_google_validated_mode_for_gemini_3() -> None:
    settings = ProviderSettings()
    old = google.build_body(
        make_model("google-generative-ai", id="gemini-2.5-pro"), CONTEXT, StreamOptions(), settings
    )
    assert "toolConfig" not in old
    assert old["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == read.PARAMETERS
    new = google.build_body(
        make_model("google-generative-ai", id="gemini-3-pro-preview"),
        CONTEXT,
        StreamOptions(),
        settings,
    )
    assert list(new)[:4] == ["contents", "systemInstruction", "tools", "toolConfig"]
    assert new["toolConfig"] == {"functionCallingConfig": {"mode": "VALIDATED"}}
    declaration = new["tools"][0]["functionDeclarations"][0]
    assert declaration["parametersJsonSchema"] == STRICT_READ
    assert list(declaration) == ["name", "description", "parametersJsonSchema"]


def test_google_rewrites_const_as_enum_but_not_property_names() -> None:
    tool = ToolSpec(
        name="t",
        description="",
        parameters={
            "type": "object",
            "properties": {"const": {"type": "string", "const": "x"}, "n": {"const": True}},
        },
    )
    context = LlmContext(system_prompt="", messages=CONTEXT.messages, tools=(tool,))
    body = google.build_body(
        make_model("google-generative-ai"), context, StreamOptions(), ProviderSettings()
    )
    props = body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]["properties"]
    assert props["const"] == {"type": "string", "enum": ["x"]}
    assert props["n"] == {"const": True}  # only strings and numbers


def test_vertex_declarations_name_first() -> None:
    body = google_vertex.vertex_order(
        google.build_body(make_model("google-vertex"), CONTEXT, StreamOptions(), ProviderSettings())
    )
    declaration = body["tools"][0]["functionDeclarations"][0]
    assert list(declaration) == ["name", "description", "parametersJsonSchema"]


def test_mistral_strict_is_opt_in() -> None:
    plain = mistral.build_body(make_model("mistral-conversations"), CONTEXT, StreamOptions())
    assert [t["function"]["strict"] for t in plain["tools"]] == [False, False]
    model = make_model("mistral-conversations", compat={"supportsStrictMode": True})
    tools = mistral.build_body(model, CONTEXT, StreamOptions())["tools"]
    assert [t["function"]["strict"] for t in tools] == [True, False]
    assert tools[0]["function"]["parameters"] == STRICT_READ
