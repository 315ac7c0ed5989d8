"""The ``edit`` tool (spec §5.4): exact (then fuzzy) text replacements, several per call.

The text work is :mod:`~pitrio.actors.tool_executor.tools.edit_core`; this module checks the
arguments (including the legacy single ``oldText``/``newText`` form and ``edits`` sent as a
JSON string), reads and writes the file in a worker thread keeping its BOM and line endings,
and reports a diff. Calls on the same file are serialised by the batch (``mutates``).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import trio

from pitrio.actors.tool_executor.jsvalues import to_utf8
from pitrio.actors.tool_executor.tool import JSON_SCHEMA_PREFER, AgentTool, UpdateFn
from pitrio.actors.tool_executor.tools.fs_errors import error_code, node_error_text
from pitrio.actors.tool_executor.tools.paths import resolve_to_cwd
from pitrio.errors import ToolError
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.content import TextContent

if TYPE_CHECKING:
    from pitrio.actors.tool_executor.tools.edit_core import Replacement

_EDIT_ITEM: dict[str, Any] = {
    "type": "object",
    "required": ["oldText", "newText"],
    "properties": {
        "oldText": {
            "type": "string",
            "description": "Text to replace, exactly as it appears in the original file; it "
            "must occur once and must not overlap another edit's oldText",
        },
        "newText": {"type": "string", "description": "The text that replaces oldText"},
    },
}

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "required": ["path", "edits"],
    "properties": {
        "path": {
            "type": "string",
            "description": "File to edit, relative to the working directory or absolute",
        },
        "edits": {
            "type": "array",
            "items": _EDIT_ITEM,
            "description": "The replacements. Each is matched against the original file, not "
            "after the others are applied; they must not overlap or nest. Merge changes to the "
            "same or neighbouring lines into one edit.",
        },
    },
}

DESCRIPTION = (
    "Edit one file by replacing exact text. Each edits[].oldText must match a unique region "
    "of the original file, and the regions must not overlap; combine changes that touch the "
    "same or nearby lines into one edit, and do not pad oldText with long unchanged stretches "
    "to bridge distant changes."
)
PROMPT_SNIPPET = (
    "Make precise file edits with exact text replacement, including multiple disjoint edits "
    "in one call"
)
PROMPT_GUIDELINES = (
    "Use edit for precise changes; every edits[].oldText must match the file exactly.",
    "To change several places in one file, make one edit call with several entries in edits[] "
    "rather than several calls.",
    "Each edits[].oldText is matched against the original file, not against the result of "
    "earlier edits: no overlapping or nested edits; merge nearby changes into one.",
    "Keep each edits[].oldText as short as it can be while still unique in the file.",
)


def prepare_edit_arguments(args: dict[str, Any]) -> dict[str, Any]:
    """Accept ``edits`` as a JSON string and the legacy top-level ``oldText``/``newText``."""
    args = dict(args)
    if isinstance(args.get("edits"), str):
        try:
            parsed = json.loads(args["edits"])
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            args["edits"] = parsed
    old, new = args.get("oldText"), args.get("newText")
    if not isinstance(old, str) or not isinstance(new, str):
        return args
    edits = list(args["edits"]) if isinstance(args.get("edits"), list) else []
    edits.append({"oldText": old, "newText": new})
    rest = {key: value for key, value in args.items() if key not in ("oldText", "newText")}
    return {**rest, "edits": edits}


def edit_file(absolute: str, path: str, edits: list[Replacement]) -> AgentToolResult:
    """Read, apply, write (blocking); ``path`` is the path as given, for messages."""
    if not edits:
        raise ToolError("Edit tool input is invalid. edits must contain at least one replacement.")
    try:
        if not os.access(absolute, os.R_OK | os.W_OK):
            os.stat(absolute)  # raises the precise error when the file is missing
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        raise ToolError(f"Could not edit file: {path}. Error code: {error_code(exc)}.") from None
    try:
        with open(absolute, "rb") as handle:
            raw = handle.read().decode("utf-8", "replace")
    except IsADirectoryError:
        raise ToolError("EISDIR: illegal operation on a directory, read") from None
    except OSError as exc:
        raise ToolError(node_error_text(exc, "open", absolute)) from None
    final, result = edit_text(raw, path, edits)
    try:
        with open(absolute, "wb") as handle:
            handle.write(to_utf8(final))
    except OSError as exc:
        raise ToolError(node_error_text(exc, "open", absolute)) from None
    return result


def edit_text(raw: str, path: str, edits: list[Replacement]) -> tuple[str, AgentToolResult]:
    """The edited text of a file whose text is ``raw`` (its BOM and line endings kept) and
    the tool's result (pure)."""
    # The text work is imported by the first edit: a start only registers the tool (issue 38).
    from pitrio.actors.tool_executor.tools.edit_core import (
        apply_edits,
        detect_line_ending,
        generate_diff,
        normalize_to_lf,
        restore_line_endings,
        strip_bom,
        unified_patch,
    )

    bom, content = strip_bom(raw)
    ending = detect_line_ending(content)
    applied = apply_edits(normalize_to_lf(content), edits, path)
    final = bom + restore_line_endings(applied.new, ending)
    diff = generate_diff(applied.base, applied.new)
    # pi 1.6.0's details: the display diff, the unified patch, the first changed line.
    details: dict[str, Any] = {
        "diff": diff.text,
        "patch": unified_patch(path, applied.base, applied.new),
    }
    if diff.first_changed_line is not None:
        details["firstChangedLine"] = diff.first_changed_line
    return final, AgentToolResult(
        content=(TextContent(text=f"Successfully replaced {len(edits)} block(s) in {path}."),),
        details=details,
    )


def replacements(args: dict[str, Any]) -> list[Replacement]:
    """The edits of checked ``edit`` arguments."""
    from pitrio.actors.tool_executor.tools.edit_core import Replacement

    return [Replacement(item["oldText"], item["newText"]) for item in args.get("edits") or ()]


def create_edit_tool(cwd: str) -> AgentTool:
    """The ``edit`` tool for a session whose working directory is ``cwd``."""

    def target(args: dict[str, Any]) -> str:
        return resolve_to_cwd(args["path"], cwd)

    async def execute(_call_id: str, args: dict[str, Any], _update: UpdateFn) -> AgentToolResult:
        return await trio.to_thread.run_sync(
            edit_file, target(args), args["path"], replacements(args)
        )

    return AgentTool(
        name="edit",
        label="edit",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        execute=execute,
        prepare_arguments=prepare_edit_arguments,
        mutates=target,
        prompt_snippet=PROMPT_SNIPPET,
        prompt_guidelines=PROMPT_GUIDELINES,
        constrained_sampling=JSON_SCHEMA_PREFER,
    )
