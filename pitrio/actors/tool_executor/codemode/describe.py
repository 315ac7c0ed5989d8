"""What the model and scripts read about codemode and the tools scripts call (pure).

The layout follows pi 1.6.0 (the intro, one line per global, ``Nested tools:`` grouped by
namespace with the tools without one first, a budget in estimated tokens filled one tool per
group per round, cheapest first, ``(some tools not listed)`` / ``(tools not listed)`` on a
group cut short, ``deferred`` tools never listed); the words and the declaration syntax are
pitrio's own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pitrio.actors.tool_executor.tool import AgentTool

CODEMODE = "codemode"
CHARS_PER_TOKEN = 4
DEFAULT_INLINE_BUDGET = 3000

INTRO = (
    "Runs a JavaScript program that can call your other tools. Send plain JavaScript source "
    "(no JSON wrapping, no markdown fence); it is the body of an async function in a QuickJS "
    "sandbox, so `await` and `return` work at the top level. There is no Node.js, file "
    "system, network or timer.\n"
    "- `await tools.<name>({ ...args })` gives the tool's text (or an object, when its "
    "declaration returns one) and throws an Error when the call fails; a tool that returns an "
    "object returns it on failure too, so look at its fields. Calls still running when the "
    "program ends are cancelled.\n"
    '- An optional first line sets limits: `// @options: {"max_output_tokens": 10000, '
    '"timeout_ms": 60000}`'
)
GLOBALS = (
    "Globals:\n"
    "- Output: `text(value)`, `image(dataUrlOrImageBlock)`, `console.log(...)` and a top-level "
    "`return`; `exit()` stops the program. Several text items each start with a "
    "`==> text N/M <==` line; console lines come last, in one `<console_output>` block. Each "
    "image is also saved to a temporary file whose path the result gives.\n"
    "- `store(key, value)` / `load(key)`: JSON values kept from one codemode call to the next.\n"
    "- `ALL_TOOLS`, `await searchTools(query, { limit?, namespace? })`, "
    "`await describeTool(name)`, `await describeNamespace(name)`: find tools not listed here, "
    "such as MCP tools."
)
SNIPPET = "Run a JavaScript program that calls your other tools"
GUIDELINES = (
    "Prefer one codemode program over many separate tool calls when calls are independent "
    "(await them together with Promise.allSettled), depend on each other, or return more "
    "output than you need to read.",
)


def identifier(name: str) -> str:
    """A tool's name as a JavaScript identifier: other characters become ``_``."""
    chars = [
        char
        if (char.isascii() and (char.isalpha() or char in "_$" or (index and char.isdigit())))
        else "_"
        for index, char in enumerate(name)
    ]
    return "".join(chars) or "_"


def _literal(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def ts_type(schema: Any, depth: int = 0) -> str:
    """A JSON schema as a one-line TypeScript type (``unknown`` where it says nothing)."""
    if not isinstance(schema, Mapping) or depth > 6:
        return "unknown"
    if "const" in schema:
        return _literal(schema["const"])
    if isinstance(schema.get("enum"), list):
        return " | ".join(_literal(value) for value in schema["enum"]) or "never"
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(ts_type(part, depth + 1) for part in schema[key]) or "unknown"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(ts_type({**schema, "type": one}, depth + 1) for one in kind)
    if kind == "string":
        return "string"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    if kind == "array":
        inner = ts_type(schema.get("items"), depth + 1)
        return f"({inner})[]" if " " in inner else f"{inner}[]"
    properties = schema.get("properties")
    if kind == "object" or isinstance(properties, Mapping):
        if not isinstance(properties, Mapping) or not properties:
            return "Record<string, unknown>"
        required = set(schema.get("required") or ())
        fields = [
            f"{_key(name)}{'' if name in required else '?'}: {ts_type(field, depth + 1)}"
            for name, field in properties.items()
        ]
        return "{ " + "; ".join(fields) + " }"
    return "unknown"


def _key(name: str) -> str:
    return name if identifier(name) == name else _literal(name)


def declaration(tool: AgentTool, guidelines: Sequence[str] = ()) -> str:
    """What a script sees of a tool: description, guidelines, and its call as TypeScript."""
    bullets = [f"- {line.strip()}" for line in guidelines if line.strip()]
    description = tool.description.strip()
    if bullets:
        description = f"{description}\n\n" + "\n".join(bullets)
    output = "string" if tool.output_schema is None else ts_type(tool.output_schema)
    call = f"tools.{identifier(tool.name)}(args: {ts_type(tool.parameters)}): Promise<{output}>"
    return f"{description}\n```ts\n{call}\n```" if description else f"```ts\n{call}\n```"


def _section(tool: AgentTool) -> str:
    name = identifier(tool.name)
    heading = f"### `{name}`" if name == tool.name else f"### `{name}` (`{tool.name}`)"
    return f"{heading}\n{declaration(tool, tool.prompt_guidelines)}"


def _select(groups: list[list[tuple[str, int]]], budget: int | None) -> set[str]:
    """Which tools fit: each round, every group places its cheapest tool left; a group whose
    next tool does not fit stops, the others go on."""
    if budget is None:
        return {name for group in groups for name, _ in group}
    queues = [sorted(group, key=lambda entry: entry[1]) for group in groups if group]
    shown: set[str] = set()
    left = budget
    while queues:
        still: list[list[tuple[str, int]]] = []
        for queue in queues:
            name, cost = queue[0]
            if cost > left:
                continue
            left -= cost
            shown.add(name)
            queue.pop(0)
            if queue:
                still.append(queue)
        queues = still
    return shown


def describe(listed: Sequence[AgentTool], *, inline_budget: int | None) -> str:
    """The codemode tool's description, listing ``listed`` (``deferred`` ones are left out)."""
    tools = [t for t in listed if t.name != CODEMODE and t.exposure != "deferred"]
    sections = [INTRO, GLOBALS]
    if not tools:
        return "\n\n".join(sections)
    grouped: dict[str, tuple[Mapping[str, Any] | None, list[AgentTool]]] = {"": (None, [])}
    for tool in tools:
        space: Mapping[str, Any] | None = tool.namespace
        key = f"ns:{space['name']}" if space else ""
        grouped.setdefault(key, (space, []))[1].append(tool)
    ordered = sorted(
        grouped.values(), key=lambda group: (group[0] is not None, (group[0] or {}).get("name", ""))
    )
    rendered = {tool.name: _section(tool) for tool in tools}
    costs = [
        [(tool.name, -(-len(rendered[tool.name]) // CHARS_PER_TOKEN)) for tool in members]
        for _, members in ordered
    ]
    shown = _select(costs, inline_budget)
    parts = ["Nested tools:"]
    for space, members in ordered:
        visible = [tool for tool in members if tool.name in shown]
        if space is not None:
            note = (
                ""
                if len(visible) == len(members)
                else " (tools not listed)"
                if not visible
                else " (some tools not listed)"
            )
            about = str(space.get("description") or "").strip()
            parts.append(f"## {space['name']}{note}" + (f"\n{about}" if about else ""))
        parts.extend(rendered[tool.name] for tool in visible)
    sections.append("\n\n".join(parts))
    return "\n\n".join(sections)


def script_call_note(tool: AgentTool) -> str:
    """A declared tool's description with how scripts call it (``codemode.mode`` ``on``)."""
    output = "its text" if tool.output_schema is None else f"`{ts_type(tool.output_schema)}`"
    return (
        f"{tool.description.strip()}\n\n"
        f"From codemode: `await tools.{identifier(tool.name)}(args)` gives {output}."
    )


def loadout_descriptions(
    declared: Sequence[AgentTool],
    callable_tools: Sequence[AgentTool],
    *,
    mode: str = "on",
    inline_budget: int | None = DEFAULT_INLINE_BUDGET,
) -> dict[str, str]:
    """New descriptions while codemode is active: codemode's own listing, and with mode ``on``
    a note on each declared tool scripts can call."""
    reachable = [tool for tool in callable_tools if tool.exposure != "model-only"]
    names = {tool.name for tool in reachable}
    descriptions: dict[str, str] = {}
    if mode == "on":
        for tool in declared:
            if tool.name in names:
                descriptions[tool.name] = script_call_note(tool)
    listed = reachable if mode == "only" else [t for t in reachable if t.exposure != "direct"]
    descriptions[CODEMODE] = describe(listed, inline_budget=inline_budget)
    return descriptions
