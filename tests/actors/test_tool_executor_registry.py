"""The pure tool registry: allow/deny patterns, active set, prompt entries (§3.14, §5.9)."""

from __future__ import annotations

from typing import Any

import pytest

from pitrio.actors.tool_executor.registry import (
    PromptEntry,
    ToolRegistry,
    compile_name_patterns,
    normalize_guidelines,
    normalize_snippet,
)
from pitrio.actors.tool_executor.tool import AgentTool, text_result
from pitrio.errors import ToolNotFoundError, ToolRegistryError
from pitrio.messages.agent import AgentToolResult


async def _run(_id: str, _args: dict[str, Any], _update: Any) -> AgentToolResult:
    return text_result("ok")


def tool(name: str, **kwargs: Any) -> AgentTool:
    return AgentTool(name=name, execute=_run, **kwargs)


def test_patterns() -> None:
    regex = compile_name_patterns(["read", "mcp_*"])
    assert regex.match("read") and regex.match("mcp_search") and regex.match("mcp_")
    assert not regex.match("reader") and not regex.match("xmcp_a")
    assert not compile_name_patterns([]).match("anything")


def test_deny_filters_registration() -> None:
    registry = ToolRegistry(deny=["ba*"])
    assert registry.register([tool("bash"), tool("read")], activate=True) == ("read",)
    assert registry.get("bash") is None
    assert registry.active_names() == ("read",)


def test_allow_list_registers_and_activates_only_allowed() -> None:
    registry = ToolRegistry(allow=["read", "g*"], deny=["grep"])
    names = registry.register(
        [tool("read"), tool("bash"), tool("grep"), tool("glob")], activate=False
    )
    assert names == ("read", "glob")
    assert registry.active_names() == ("read", "glob")


def test_replacing_keeps_the_active_position() -> None:
    registry = ToolRegistry()
    registry.register([tool("a"), tool("b")], activate=True)
    registry.register([tool("a", description="new")], activate=True)
    assert registry.active_names() == ("a", "b")
    assert registry.active_tools()[0].description == "new"


def test_set_active_and_unknown_names() -> None:
    registry = ToolRegistry()
    registry.register([tool("a"), tool("b")], activate=False)
    registry.set_active(["b", "a", "b"])
    assert registry.active_names() == ("b", "a")
    with pytest.raises(ToolNotFoundError, match="Unknown tool: c"):
        registry.set_active(["a", "c"])
    assert registry.active_names() == ("b", "a")


def test_unregistering_removes_definitions_and_active_names() -> None:
    registry = ToolRegistry()
    registry.register([tool("a"), tool("b"), tool("c")], activate=True)
    registry.unregister(["b", "nope"])  # an unknown name is ignored
    assert registry.active_names() == ("a", "c")
    assert [t.name for t in registry.all_tools()] == ["a", "c"]
    with pytest.raises(ToolNotFoundError, match="Unknown tool: b"):
        registry.set_active(["b"])


def test_invalid_definitions_are_refused() -> None:
    registry = ToolRegistry()
    with pytest.raises(ToolRegistryError, match="Invalid tool name"):
        registry.register([tool("")], activate=True)
    with pytest.raises(ToolRegistryError, match="Invalid parameters schema for tool bad"):
        registry.register([tool("bad", parameters={"type": "nonsense"})], activate=True)
    assert registry.all_tools() == ()


def test_prompt_entries_are_normalised() -> None:
    assert normalize_snippet("  Run\n  things \r\n now ") == "Run things now"
    assert normalize_snippet(" \n ") is None and normalize_snippet(None) is None
    assert normalize_guidelines([" a ", "", "b", "a"]) == ("a", "b")
    registry = ToolRegistry()
    registry.register(
        [
            tool("x", prompt_snippet="Do\nX", prompt_guidelines=(" g1", "g1 ", "g2")),
            tool("y"),
        ],
        activate=True,
    )
    assert registry.prompt_entries() == (
        PromptEntry("x", "Do X", ("g1", "g2")),
        PromptEntry("y", None, ()),
    )


def test_builtin_schemas_are_valid_json_schema() -> None:
    # Registration trusts them (no check at start-up), so they are checked here.
    import jsonschema.validators  # type: ignore[import-untyped]

    from pitrio.actors.tool_executor.tools import BUILTIN_SCHEMAS, create_builtin_tools

    assert len(BUILTIN_SCHEMAS) == 7
    assert {id(t.parameters) for t in create_builtin_tools("/")} == set(map(id, BUILTIN_SCHEMAS))
    for schema in BUILTIN_SCHEMAS:
        jsonschema.validators.validator_for(schema).check_schema(schema)


def test_the_codemode_schema_is_trusted_and_valid_json_schema() -> None:
    # Every session registers codemode (inactive): its schema is trusted like the built-ins'.
    import jsonschema.validators

    from pitrio.actors.tool_executor.codemode.tool import PARAMETERS
    from pitrio.actors.tool_executor.registry import _KNOWN_VALID

    assert _KNOWN_VALID.get(id(PARAMETERS)) is PARAMETERS
    jsonschema.validators.validator_for(PARAMETERS).check_schema(PARAMETERS)


def test_an_invalid_custom_schema_is_still_refused() -> None:
    with pytest.raises(ToolRegistryError, match="Invalid parameters schema"):
        ToolRegistry().register([tool("x", parameters={"type": 5})], activate=True)
