"""MCP tool names, namespaces, summaries and exposure as pi 1.6.0 makes them."""

from __future__ import annotations

import hashlib

from pitrio.actors.mcp.naming import (
    assign_tool_names,
    declared_exposure,
    is_mcp_tool,
    mcp_namespace,
    mcp_tool_name,
    server_summary,
    tool_exposure,
)


def _hashed(server: str, tool: str, plain: str) -> str:
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{plain[:55]}_{digest}"


def test_names_replace_every_character_but_letters_digits_and_underscore() -> None:
    assert mcp_tool_name("time", "get_current_time") == "mcp__time__get_current_time"
    assert mcp_tool_name("dev-radius", "do.it/now") == "mcp__dev_radius__do_it_now"
    assert mcp_tool_name("s", "caf\u00e9") == "mcp__s__caf_"


def test_a_long_name_is_cut_and_hashed_to_64_characters() -> None:
    name = mcp_tool_name("s" * 40, "t" * 40)
    plain = f"mcp__{'s' * 40}__{'t' * 40}"
    assert name == _hashed("s" * 40, "t" * 40, plain) and len(name) == 64


def test_tools_whose_names_collide_all_get_the_hash_whatever_their_order() -> None:
    names = assign_tool_names("srv", ["a-b", "a_b", "c"])
    assert names["c"] == "mcp__srv__c"
    assert names["a-b"] == _hashed("srv", "a-b", "mcp__srv__a_b")
    assert names["a_b"] == _hashed("srv", "a_b", "mcp__srv__a_b")
    assert assign_tool_names("srv", ["a_b", "a-b"]) == {k: names[k] for k in ("a_b", "a-b")}


def test_a_name_owned_by_another_server_is_hashed_and_an_own_one_kept() -> None:
    owners = {"mcp__a__b__c": "a\0b__c"}
    assert assign_tool_names("a__b", ["c"], owners) == {"c": _hashed("a__b", "c", "mcp__a__b__c")}
    assert assign_tool_names("a", ["b__c"], owners) == {"b__c": "mcp__a__b__c"}


def test_namespace_summary_and_what_counts_as_mcp() -> None:
    assert mcp_namespace("dev-radius") == "mcp__dev_radius"
    assert server_summary("  Docs search\nmore", "ignored") == "Docs search"
    assert (
        server_summary(None, "\nFirst line of instructions\nsecond") == "First line of instructions"
    )
    assert server_summary("", None) == ""
    assert is_mcp_tool("mcp__x__y") and is_mcp_tool("read_mcp_resource") and not is_mcp_tool("read")


def test_exposure_exact_name_first_then_the_first_pattern_then_the_server() -> None:
    overrides = (("get_*", "codemode"), ("get_code", "direct"), ("g*", "hidden"))
    assert tool_exposure("deferred", overrides, "get_code") == "direct"
    assert tool_exposure("deferred", overrides, "get_issue") == "codemode"
    assert tool_exposure("deferred", overrides, "go") == "hidden"
    assert tool_exposure("deferred", overrides, "search") == "deferred"
    assert tool_exposure(None, (), "search") == "codemode"


def test_pitrio_reaches_each_exposure_as_1_6_0_does() -> None:
    assert [declared_exposure(e) for e in ("codemode", "deferred", "direct", "hidden")] == [
        "codemode",
        "deferred",
        "direct",
        "hidden",
    ]
