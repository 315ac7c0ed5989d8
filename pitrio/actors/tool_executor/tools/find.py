"""The ``find`` tool (spec §5.7): files and directories matching a glob, honouring ``.gitignore``.

With ``fd`` on ``PATH`` the search is fd's (``--glob --hidden --no-require-git``); otherwise a
pure-Python walk produces the same output: paths relative to the search directory with ``/``
separators, directories ending in ``/``. A pattern without ``/`` matches file names; one with
``/`` matches the whole path (prefixed with ``**/`` unless it starts with ``/`` or ``**/``). As
with fd, a pattern without uppercase letters matches regardless of case.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Any

import trio

from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn, text_result
from pitrio.actors.tool_executor.tools.paths import resolve_to_cwd
from pitrio.actors.tool_executor.tools.truncate import (
    DEFAULT_MAX_BYTES,
    NO_LINE_LIMIT,
    format_size,
    truncate_head,
)
from pitrio.errors import ToolError
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.ostext import check_os_text

DEFAULT_LIMIT = 1000

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "required": ["pattern"],
    "properties": {
        "pattern": {
            "type": "string",
            "description": "Glob to match, e.g. '*.py', '**/*.json' or 'src/**/test_*.py'",
        },
        "path": {
            "type": "string",
            "description": "Directory to search (default: the working directory)",
        },
        "limit": {
            "type": "number",
            "description": f"Stop after this many results (default: {DEFAULT_LIMIT})",
        },
    },
}

DESCRIPTION = (
    "Find files and directories whose path matches a glob pattern. Paths are listed relative "
    "to the searched directory; files ignored by .gitignore are left out. Returns at most "
    f"{DEFAULT_LIMIT} results or {DEFAULT_MAX_BYTES // 1024}KB of output (whichever comes first)."
)
PROMPT_SNIPPET = "Find files by glob pattern (respects .gitignore)"


def effective_pattern(pattern: str) -> tuple[str, bool]:
    """The glob actually matched and whether it matches whole paths (fd's ``--full-path``)."""
    if "/" not in pattern:
        return pattern, False
    if pattern.startswith(("/", "**/")) or pattern == "**":
        return pattern, True
    return f"**/{pattern}", True


def not_a_directory(root: str) -> str:
    """fd's message for a search path that is missing or not a directory."""
    return f"[fd error]: Search path '{root}' is not a directory."


def format_results(paths: list[str], limit: int) -> tuple[str, dict[str, Any] | None]:
    """The output and details for relative result ``paths`` (pure)."""
    if not paths:
        return "No files found matching pattern", None
    truncation = truncate_head("\n".join(paths), max_lines=NO_LINE_LIMIT)
    text = truncation.content
    details: dict[str, Any] = {}
    notices: list[str] = []
    if len(paths) >= limit:
        notices.append(
            f"{limit} results limit reached. Use limit={limit * 2} for more, or refine pattern"
        )
        details["resultLimitReached"] = limit
    if truncation.truncated:
        notices.append(f"{format_size(DEFAULT_MAX_BYTES)} limit reached")
        details["truncation"] = truncation.to_details()
    if notices:
        text += f"\n\n[{'. '.join(notices)}]"
    return text, details or None


def find_python(
    root: str, pattern: str, limit: int, cancelled: Callable[[], bool] = lambda: False
) -> list[str]:
    """Walk ``root`` and list matching paths, relative, directories with ``/`` (blocking)."""
    # Here, as the native search below: imported by the first search, not by a start, which
    # only registers the tool (cold start, issue 38).
    from pitrio.actors.tool_executor.tools.globs import compile_glob, has_uppercase
    from pitrio.actors.tool_executor.tools.walk import Walker

    glob, full_path = effective_pattern(pattern)
    regex = compile_glob(glob, ignore_case=not has_uppercase(pattern))
    found: list[str] = []
    for entry in Walker(root, require_git=False, cancelled=cancelled):
        subject = entry.path if full_path else entry.rel.rsplit("/", 1)[-1]
        if regex.match(subject):
            found.append(entry.rel + "/" if entry.is_dir else entry.rel)
            if len(found) >= limit:
                break
    return found


async def find_fd(fd: str, root: str, pattern: str, limit: int) -> list[str]:
    """List matches with ``fd``, relativised like the pure-Python search."""
    from pitrio.actors.tool_executor.tools.native import run_lines  # first use (find_python)

    glob, full_path = effective_pattern(pattern)
    argv = [fd, "--glob", "--color=never", "--hidden", "--no-require-git"]
    argv += ["--max-results", str(limit)]
    if full_path:
        argv.append("--full-path")
    argv += ["--", glob, root]
    lines: list[str] = []

    def keep(line: str) -> bool:
        lines.append(line)
        return True

    result = await run_lines(argv, keep)
    if result.code not in (0, None) and not any(line.strip() for line in lines):
        raise ToolError(result.stderr.strip() or f"fd exited with code {result.code}")
    return [relative_result(line, root) for line in lines if line.strip()]


def relative_result(line: str, root: str) -> str:
    """An ``fd`` output line relative to the search root, keeping a directory's ``/``."""
    line = line.removesuffix("\r").strip()
    is_dir = line.endswith(("/", os.sep))
    relative = line[len(root) + 1 :] if line.startswith(root) else os.path.relpath(line, root)
    relative = relative.replace(os.sep, "/")
    return relative + "/" if is_dir and not relative.endswith("/") else relative


def create_find_tool(cwd: str, *, use_fd: bool | None = None) -> AgentTool:
    """The ``find`` tool; ``use_fd`` ``None`` means "when ``fd`` is installed"."""

    async def execute(_call_id: str, args: dict[str, Any], _update: UpdateFn) -> AgentToolResult:
        root = resolve_to_cwd(args.get("path") or ".", cwd)
        limit_arg = args.get("limit")
        limit = max(1, int(limit_arg)) if limit_arg is not None else DEFAULT_LIMIT
        pattern: str = check_os_text(args["pattern"], "pattern")  # fd's argv, with or without fd
        from pitrio.actors.tool_executor.tools.native import find_executable  # (find_python)

        fd = find_executable("fd") if use_fd is not False else None
        if use_fd and fd is None:
            raise ToolError("fd is not available and could not be downloaded")
        try:
            is_dir = stat.S_ISDIR((await trio.Path(root).stat()).st_mode)
        except OSError:
            is_dir = False
        if not is_dir:
            raise ToolError(not_a_directory(root))
        if fd is not None:
            found = await find_fd(fd, root, pattern, limit)
        else:
            stop = False
            try:
                found = await trio.to_thread.run_sync(
                    lambda: find_python(root, pattern, limit, lambda: stop),
                    abandon_on_cancel=True,
                )
            finally:
                stop = True
        text, details = format_results(found, limit)
        return text_result(text, details)

    return AgentTool(
        name="find",
        label="find",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        execute=execute,
        prompt_snippet=PROMPT_SNIPPET,
    )
