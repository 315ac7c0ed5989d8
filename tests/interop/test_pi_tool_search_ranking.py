"""The ``tool_search`` ranking against pi 1.6.0's own ``Bm25Ranker`` and
``createToolSearchDocument`` (run by node on the same tools and queries): the same tools in the
same order with the same scores, and the same terms from the tokenizer (ASCII text; 1.6.0
segments other scripts with ICU, pitrio at spaces)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from pitrio.actors.mcp.ranking import rank, search_document, tokenize
from tests.interop.pi_install import find_pi

NODE, CLI, WHY = find_pi()
pytestmark = pytest.mark.skipif(CLI is None, reason=WHY)

SCRIPT = """
import {Bm25Ranker, createToolSearchDocument, tokenize} from "%s";
const input = JSON.parse(process.argv[1]);
const docs = input.tools.map((t) => createToolSearchDocument(t, t.namespace));
process.stdout.write(JSON.stringify({
  ranks: input.queries.map((q) => new Bm25Ranker().rank(q, docs, 5)),
  tokens: input.texts.map((t) => tokenize(t)),
}));
"""

TOOLS: list[dict[str, Any]] = [
    {
        "name": "mcp__time__get_current_time",
        "description": "Get current time in a specific timezone",
        "parameters": {
            "type": "object",
            "properties": {"timezone": {"type": "string", "description": "IANA timezone name"}},
        },
        "namespace": {"name": "mcp__time", "description": "Clock and time zones"},
    },
    {
        "name": "mcp__time__convert_time",
        "description": "Convert time between timezones",
        "parameters": {"type": "object", "properties": {"source_timezone": {"type": "string"}}},
        "namespace": {"name": "mcp__time", "description": "Clock and time zones"},
    },
    {
        "name": "mcp__github__search_issues",
        "description": "Search issues and pull requests in GitHub repositories",
        "parameters": {
            "type": "object",
            "$defs": {"Filter": {"type": "object", "properties": {"labels": {"type": "array"}}}},
            "properties": {
                "query": {"type": "string", "description": "Search query"},
                "filter": {"$ref": "#/$defs/Filter"},
                "sort": {"anyOf": [{"type": "string", "description": "Sort by date"}]},
            },
        },
        "namespace": {
            "name": "mcp__github",
            "description": "GitHub",
            "instructions": "Use for repositories, issues and pull requests",
        },
    },
    {
        "name": "mcp__github__create_issue",
        "description": "Create an issue",
        "parameters": {"type": "object", "properties": {"title": {"type": "string"}}},
        "namespace": {"name": "mcp__github", "description": "GitHub"},
    },
    {
        "name": "mcp__peekaboo__app",
        "description": "Control applications: launch, quit, focus windows",
        "parameters": {"type": "object", "properties": {}},
    },
    {
        "name": "mcp__peekaboo__see",
        "description": "Take a screenshot of the screen or a window",
        "parameters": {"type": "object", "properties": {"window": {"type": "string"}}},
    },
]
QUERIES = [
    "current time",
    "convert_time",
    "time__convert_time",
    "issues",
    "search pull requests",
    "screenshot window",
    "peekaboo app",
    "labels",
    "the of and",
    "nothing matches zzz",
    "GitHub create issue",
]
TEXTS = ["getCurrentTime HTTPServer issues searches boxes classes", "a-b_c.d  the WITH"]


def test_the_ranking_and_terms_are_pis() -> None:
    assert NODE is not None and CLI is not None
    module = CLI.parent / "extensions" / "tool-search" / "tool.js"
    payload = json.dumps({"tools": TOOLS, "queries": QUERIES, "texts": TEXTS})
    done = subprocess.run(
        [str(NODE), "--input-type=module", "-e", SCRIPT % module.as_uri(), payload],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    pis = json.loads(done.stdout)
    documents = []
    for spec in TOOLS:
        ns = spec.get("namespace")
        namespace = (
            None if ns is None else (ns["name"], ns.get("description"), ns.get("instructions"))
        )
        documents.append(
            search_document(spec["name"], spec["description"], spec["parameters"], namespace)
        )
    for query, expected in zip(QUERIES, pis["ranks"], strict=True):
        ours = rank(query, documents, 5)
        assert [name for name, _ in ours] == [m["name"] for m in expected], query
        for (_name, score), match in zip(ours, expected, strict=True):
            assert score == pytest.approx(match["score"], rel=1e-12), query
    assert [tokenize(text) for text in TEXTS] == pis["tokens"]
