"""settings.json checked against pi 1.6.0's published schema: each bad key named with its file,
its key path and what was expected, and only that key left out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from pitrio.actors.session.resources.settings import (
    SETTINGS_SCHEMA_PATH,
    load_settings,
    validate_settings,
)
from pitrio.actors.supervisor.compaction import CompactionSettings

INTEROP_SCHEMA = (
    Path.home()
    / ".cache/pitrio-interop/pi-1.6.0/node_modules/@earendil-works/pi-coding-agent"
    / "schemas/settings.schema.json"
)


def problems_of(document: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    clean, problems = validate_settings(document, "settings.json")
    assert all(p.path == "settings.json" for p in problems)
    return clean, [(str(p.key), p.error) for p in problems]


def test_the_copied_schema_is_pis() -> None:
    schema = orjson.loads(SETTINGS_SCHEMA_PATH.read_bytes())
    assert schema["$id"] == "https://pi.dev/schemas/settings.schema.json"
    if INTEROP_SCHEMA.exists():  # scripts/gen_catalogue.py --check also compares them
        assert SETTINGS_SCHEMA_PATH.read_bytes() == INTEROP_SCHEMA.read_bytes()


def test_keys_pitrio_does_not_read_are_checked_against_pis_schema() -> None:
    clean, problems = problems_of(
        {
            "theme": 3,
            "terminal": {"showImages": "yes", "imageWidthCells": 40},
            "tuiMode": "weird",
            "quietStartup": "x",
            "npmCommand": ["npm", 3],
            "hideThinkingBlock": True,
        }
    )
    assert problems == [
        ("theme", "expected a string, got the number 3"),
        ("quietStartup", "expected true or false or \"header\", got the string 'x'"),
        ("npmCommand", "item [1]: expected a string, got the number 3"),
        ("terminal.showImages", "expected true or false, got the string 'yes'"),
        ("tuiMode", "expected one of regular, fullscreen, got the string 'weird'"),
    ]
    # Only the bad keys go: their neighbours in the same object stay.
    assert clean == {"terminal": {"imageWidthCells": 40}, "hideThinkingBlock": True}


def test_keys_pis_schema_allows_are_not_reported() -> None:
    document = {
        "$schema": "https://pi.dev/schemas/settings.schema.json",
        "someFutureKey": {"whatever": [1, 2]},
        "extensionChangelogVersions": {"pkg": "1.2.3"},
        "terminal": {"aKeyOfANewerPi": 1},
        "session": {"fsync": "never", "store": "sqlite:///x.db"},
        "compaction": {"modelOverrides": {"a/b": {"reserveTokens": 0, "futureField": "x"}}},
    }
    assert problems_of(document) == (document, [])


def schema_defaults(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A settings object holding every default pi's schema states."""
    out: dict[str, Any] = {}
    for key, prop in node.get("properties", {}).items():
        prop = defs.get(prop.get("$ref", "").rsplit("/", 1)[-1], prop)
        if "default" in prop:
            out[key] = prop["default"]
        elif prop.get("type") == "object" and "properties" in prop:
            inner = schema_defaults(prop, defs)
            if inner:
                out[key] = inner
    return out


def test_every_default_of_pis_schema_is_accepted() -> None:
    # pitrio's own checks of the keys it reads must not be stricter than pi about pi's values.
    schema = orjson.loads(SETTINGS_SCHEMA_PATH.read_bytes())
    defaults = schema_defaults(schema, schema["$defs"])
    assert len(defaults) > 30 and defaults["compaction"]["reserveTokens"] == 16384
    assert problems_of(defaults) == (defaults, [])


def test_token_settings_must_be_whole_numbers_and_overrides_are_checked_per_field() -> None:
    clean, problems = problems_of(
        {
            "compaction": {
                "reserveTokens": 1.5,
                "keepRecentTokens": 100,
                "modelOverrides": {
                    "openai/gpt-5.1": {"reserveTokens": -1, "keepRecentTokens": 5},
                    "a/b": 7,
                },
            }
        }
    )
    assert problems == [
        ("compaction.reserveTokens", "expected a whole number of at least 0, got the number 1.5"),
        (
            'compaction.modelOverrides["openai/gpt-5.1"].reserveTokens',
            "expected a whole number of at least 0, got the number -1",
        ),
        ('compaction.modelOverrides["a/b"]', "expected an object, got the number 7"),
    ]
    assert clean == {
        "compaction": {
            "keepRecentTokens": 100,
            "modelOverrides": {"openai/gpt-5.1": {"keepRecentTokens": 5}},
        }
    }


def test_a_problem_names_the_file_and_the_rest_of_the_file_is_used(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    path = agent / "settings.json"
    path.write_bytes(orjson.dumps({"theme": [], "compaction": {"keepRecentTokens": 99}}))
    settings = load_settings(agent)
    assert [str(p) for p in settings.problems] == [f"{path}: theme: expected a string, got a list"]
    assert settings.compaction == CompactionSettings(keep_recent_tokens=99)
