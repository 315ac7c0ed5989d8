"""A document that passed its schema passes again without jsonschema (issue 38: start-up)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pitrio.actors import json_schema, schema_verdicts
from pitrio.actors.model_router.models_schema import SCHEMA_PATH

GOOD = {"providers": {"mock": {"baseUrl": "http://x/v1", "api": "openai-completions"}}}
BAD = {"providers": {"mock": {"baseUrl": 3}}}


@pytest.fixture
def verdicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "__pycache__" / "schema-verdicts"
    monkeypatch.setattr(schema_verdicts, "VERDICTS_PATH", path)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return path


def _checked(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Records each document the validator is asked to check."""
    asked: list[Any] = []
    real = json_schema.validator(SCHEMA_PATH)

    class Counting:
        def iter_errors(self, document: Any) -> Any:
            asked.append(document)
            return real.iter_errors(document)

    monkeypatch.setattr(json_schema, "validator", lambda path: Counting())
    return asked


def test_a_document_that_passed_passes_again_unchecked(
    verdicts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _checked(monkeypatch)
    assert list(json_schema.errors(GOOD, SCHEMA_PATH)) == []
    assert verdicts.stat().st_size == 20
    assert list(json_schema.errors(GOOD, SCHEMA_PATH)) == []
    assert asked == [GOOD]  # the second time from the verdicts file
    changed = {"providers": {"mock": {"baseUrl": "http://y/v1", "api": "openai-completions"}}}
    assert list(json_schema.errors(changed, SCHEMA_PATH)) == []
    assert asked == [GOOD, changed]


def test_a_document_that_failed_is_checked_every_time(
    verdicts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _checked(monkeypatch)
    first = list(json_schema.errors(BAD, SCHEMA_PATH))
    assert first and list(json_schema.errors(BAD, SCHEMA_PATH)) == first
    assert asked == [BAD, BAD] and not verdicts.exists()


def test_another_schema_or_jsonschema_is_another_verdict(
    verdicts: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    key = schema_verdicts.verdict_key(GOOD, SCHEMA_PATH)
    assert key is not None
    schema_verdicts.remember_pass(key)
    assert schema_verdicts.passed_before(key)
    copy = tmp_path / "other.schema.json"
    copy.write_bytes(SCHEMA_PATH.read_bytes() + b" ")
    assert schema_verdicts.verdict_key(GOOD, copy) not in (None, key)
    monkeypatch.setattr(schema_verdicts, "_validator_stamp", lambda: b"1:2")
    assert schema_verdicts.verdict_key(GOOD, SCHEMA_PATH) not in (None, key)


def test_the_newest_passes_are_kept_and_a_foreign_file_is_ignored(verdicts: Path) -> None:
    keys = [bytes([n]) * 20 for n in range(schema_verdicts.KEPT + 5)]
    for key in keys:
        schema_verdicts.remember_pass(key)
    assert verdicts.stat().st_size == 20 * schema_verdicts.KEPT
    assert schema_verdicts.passed_before(keys[-1]) and not schema_verdicts.passed_before(keys[4])
    verdicts.write_bytes(b"not ours")
    assert not schema_verdicts.passed_before(keys[-1])
    schema_verdicts.remember_pass(keys[0])
    assert schema_verdicts.passed_before(keys[0])


def test_nothing_is_written_without_bytecode(
    verdicts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert list(json_schema.errors(GOOD, SCHEMA_PATH)) == []
    assert not verdicts.exists()
