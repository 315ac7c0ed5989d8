"""The ``grep`` tool (spec §5.6): search file contents, honouring ``.gitignore``.

With ``rg`` on ``PATH`` the search is ripgrep's (``--json``, stopped at the match limit);
otherwise a pure-Python search with the same output walks the tree (hidden files included,
ignored paths and binary files skipped) and matches each line with Python's ``re``. Either
way the output is built by the pure :func:`format_matches`: ``path:line: text`` for matches,
``path-line- text`` for context lines, long lines cut to 500 characters, 50 KB at most, and the
notices pi appends.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import trio

from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn, text_result
from pitrio.actors.tool_executor.tools.paths import relative_posix, resolve_to_cwd
from pitrio.actors.tool_executor.tools.truncate import (
    DEFAULT_MAX_BYTES,
    GREP_MAX_LINE_LENGTH,
    NO_LINE_LIMIT,
    format_size,
    truncate_head,
    truncate_line,
)
from pitrio.errors import ToolError
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.ostext import check_os_text

DEFAULT_LIMIT = 100
BINARY_SNIFF_BYTES = 8192

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "required": ["pattern"],
    "properties": {
        "pattern": {
            "type": "string",
            "description": "Regular expression (or literal text) to search for",
        },
        "path": {
            "type": "string",
            "description": "Directory or file to search (default: the working directory)",
        },
        "glob": {
            "type": "string",
            "description": "Only search files matching this glob, e.g. '*.py' or 'src/**/*.ts'",
        },
        "ignoreCase": {
            "type": "boolean",
            "description": "Match regardless of case (default: false)",
        },
        "literal": {
            "type": "boolean",
            "description": "Take the pattern as plain text, not a regex (default: false)",
        },
        "context": {
            "type": "number",
            "description": "Lines of context to show before and after each match (default: 0)",
        },
        "limit": {
            "type": "number",
            "description": f"Stop after this many matches (default: {DEFAULT_LIMIT})",
        },
    },
}

DESCRIPTION = (
    "Search the contents of files for a pattern and list the matching lines with their file "
    "paths and line numbers. Files ignored by .gitignore are skipped. Returns at most "
    f"{DEFAULT_LIMIT} matches or {DEFAULT_MAX_BYTES // 1024}KB of output (whichever comes "
    f"first); lines longer than {GREP_MAX_LINE_LENGTH} characters are cut short."
)
PROMPT_SNIPPET = "Search file contents for patterns (respects .gitignore)"


@attrs.frozen
class Match:
    """One matching line: absolute file path, 1-based line number, the line's text."""

    path: str
    line: int
    text: str | None


@attrs.frozen(kw_only=True)
class GrepQuery:
    """A search as the arguments describe it, with the search path resolved."""

    pattern: str
    root: str
    is_dir: bool
    glob: str | None = None
    ignore_case: bool = False
    literal: bool = False
    context: int = 0
    limit: int = DEFAULT_LIMIT


def display_path(query: GrepQuery, path: str) -> str:
    """A match's path as shown: relative to a searched directory, else the file name."""
    if query.is_dir:
        relative = relative_posix(path, query.root)
        if relative and not relative.startswith(".."):
            return relative
    return os.path.basename(path)


def file_lines(path: str) -> list[str]:
    """A file's lines with any line ending (blocking); empty when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return []
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def format_matches(
    query: GrepQuery,
    matches: Sequence[Match],
    *,
    limit_reached: bool,
    lines_of: Callable[[str], list[str]],
) -> tuple[str, dict[str, Any] | None]:
    """The grep output and details for ``matches`` (pure apart from ``lines_of``)."""
    if not matches:
        return "No matches found", None
    out: list[str] = []
    cut = False
    for match in matches:
        shown = display_path(query, match.path)
        if query.context == 0 and match.text is not None:
            line, was_cut = truncate_line(match.text.replace("\r", ""))
            cut = cut or was_cut
            out.append(f"{shown}:{match.line}: {line}")
            continue
        lines = lines_of(match.path)
        if not lines:
            out.append(f"{shown}:{match.line}: (unable to read file)")
            continue
        first = max(1, match.line - query.context)
        last = min(len(lines), match.line + query.context)
        for number in range(first, last + 1):
            raw = lines[number - 1] if number - 1 < len(lines) else ""
            line, was_cut = truncate_line(raw.replace("\r", ""))
            cut = cut or was_cut
            if number == match.line:
                out.append(f"{shown}:{number}: {line}")
            else:
                out.append(f"{shown}-{number}- {line}")
    truncation = truncate_head("\n".join(out), max_lines=NO_LINE_LIMIT)
    text = truncation.content
    details: dict[str, Any] = {}
    notices: list[str] = []
    if limit_reached:
        notices.append(
            f"{query.limit} matches limit reached. Use limit={query.limit * 2} for more, "
            "or refine pattern"
        )
        details["matchLimitReached"] = query.limit
    if truncation.truncated:
        notices.append(f"{format_size(DEFAULT_MAX_BYTES)} limit reached")
        details["truncation"] = truncation.to_details()
    if cut:
        notices.append(
            f"Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines"
        )
        details["linesTruncated"] = True
    if notices:
        text += f"\n\n[{'. '.join(notices)}]"
    return text, details or None


# -- the pure-Python search ---------------------------------------------------------------


def compile_pattern(query: GrepQuery) -> re.Pattern[str]:
    """The regular expression to run; a bad pattern is a tool error like rg's."""
    source = re.escape(query.pattern) if query.literal else query.pattern
    try:
        return re.compile(source, re.IGNORECASE if query.ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"regex parse error:\n    {query.pattern}\nerror: {exc}") from None


class _GlobFilter:
    """``--glob`` as rg reads it: a pattern without ``/`` matches file names at any depth."""

    def __init__(self, glob: str) -> None:
        self.negated = glob.startswith("!")
        body = glob[1:] if self.negated else glob
        self.anchored = "/" in body.rstrip("/")
        # Here, as the walker and the native search below: imported by the first search, not
        # by a start, which only registers the tool (cold start, issue 38).
        from pitrio.actors.tool_executor.tools.globs import compile_glob

        self.regex = compile_glob(body.lstrip("/") if self.anchored else body.rstrip("/"))

    def matches(self, rel: str) -> bool:
        """Whether the path (relative to the search root) matches the glob itself."""
        return bool(self.regex.match(rel if self.anchored else rel.rsplit("/", 1)[-1]))

    def keeps_file(self, rel: str) -> bool:
        """Whether a file is searched."""
        return self.matches(rel) != self.negated

    def prunes_dir(self, rel: str) -> bool:
        """Whether a directory is skipped whole (only a negated glob does that)."""
        return self.negated and self.matches(rel)


def search_python(
    query: GrepQuery, cancelled: Callable[[], bool] = lambda: False
) -> tuple[list[Match], bool, dict[str, list[str]]]:
    """Search synchronously; returns matches, whether the limit was hit, and lines read."""
    from pitrio.actors.tool_executor.tools.walk import Walker  # first use (see _GlobFilter)

    regex = compile_pattern(query)
    glob = _GlobFilter(query.glob) if query.glob else None
    matches: list[Match] = []
    cache: dict[str, list[str]] = {}
    if query.is_dir:
        walker = Walker(
            query.root,
            require_git=True,
            cancelled=cancelled,
            skip_dir=glob.prunes_dir if glob is not None else None,
        )
        files: Iterator[str] = (
            entry.path
            for entry in walker
            # Regular files only, as rg searches what a walk finds: reading a FIFO or a
            # device (a walk of "/" meets /dev/console) would wait for ever.
            if entry.is_file and (glob is None or glob.keeps_file(entry.rel))
        )
    else:
        files = iter([query.root])
    for path in files:
        if cancelled():
            break
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        if b"\0" in data[:BINARY_SNIFF_BYTES]:
            continue  # binary, as rg decides by default
        lines = data.decode("utf-8", "replace").split("\n")
        found = False
        for number, line in enumerate(lines, start=1):
            if regex.search(line.rstrip("\r")):
                found = True
                matches.append(Match(path, number, line))
                if len(matches) >= query.limit:
                    break
        if found and query.context:
            cache[path] = file_lines(path)
        if len(matches) >= query.limit:
            return matches, True, cache
    return matches, False, cache


# -- ripgrep --------------------------------------------------------------------------------


async def search_ripgrep(rg: str, query: GrepQuery) -> tuple[list[Match], bool]:
    """Search with ``rg --json``, stopping it at the limit."""
    from pitrio.actors.tool_executor.tools.native import run_lines  # first use (_GlobFilter)

    argv = [rg, "--json", "--line-number", "--color=never", "--hidden"]
    if query.ignore_case:
        argv.append("--ignore-case")
    if query.literal:
        argv.append("--fixed-strings")
    if query.glob:
        argv += ["--glob", query.glob]
    argv += ["--", query.pattern, query.root]
    matches: list[Match] = []

    def on_line(line: str) -> bool:
        if not line.strip():
            return True
        try:
            event = json.loads(line)
        except ValueError:
            return True
        if event.get("type") != "match":
            return True
        data = event.get("data") or {}
        path = (data.get("path") or {}).get("text")
        number = data.get("line_number")
        text = (data.get("lines") or {}).get("text")
        if path and isinstance(number, int):
            if isinstance(text, str):
                text = text.replace("\r\n", "\n").removesuffix("\n")
            matches.append(Match(path, number, text))
        return len(matches) < query.limit

    result = await run_lines(argv, on_line)
    if not result.stopped and result.code not in (0, 1):
        raise ToolError(result.stderr.strip() or f"ripgrep exited with code {result.code}")
    return matches, result.stopped or len(matches) >= query.limit


def create_grep_tool(cwd: str, *, use_ripgrep: bool | None = None) -> AgentTool:
    """The ``grep`` tool; ``use_ripgrep`` ``None`` means "when ``rg`` is installed"."""

    async def execute(_call_id: str, args: dict[str, Any], _update: UpdateFn) -> AgentToolResult:
        root = resolve_to_cwd(args.get("path") or ".", cwd)
        check_os_text(args["pattern"], "pattern")  # ripgrep's argv: refused with or without it
        if args.get("glob"):
            check_os_text(args["glob"], "glob")
        try:
            is_dir = stat.S_ISDIR((await trio.Path(root).stat()).st_mode)
        except OSError:
            raise ToolError(f"Path not found: {root}") from None
        context = args.get("context")
        query = GrepQuery(
            pattern=args["pattern"],
            root=root,
            is_dir=is_dir,
            glob=args.get("glob") or None,
            ignore_case=bool(args.get("ignoreCase")),
            literal=bool(args.get("literal")),
            context=int(context) if context and context > 0 else 0,
            limit=max(1, int(limit)) if (limit := args.get("limit")) is not None else DEFAULT_LIMIT,
        )
        from pitrio.actors.tool_executor.tools.native import find_executable  # (_GlobFilter)

        rg = find_executable("rg") if use_ripgrep is not False else None
        if use_ripgrep and rg is None:
            raise ToolError("ripgrep (rg) is not available and could not be downloaded")
        if rg is not None:
            matches, limit_reached = await search_ripgrep(rg, query)
            text, details = await trio.to_thread.run_sync(
                lambda: format_matches(
                    query, matches, limit_reached=limit_reached, lines_of=_cached(file_lines)
                ),
                abandon_on_cancel=True,
            )
            return text_result(text, details)
        stop = False

        def work() -> tuple[str, dict[str, Any] | None]:
            found, limit_reached, cache = search_python(query, lambda: stop)
            return format_matches(
                query,
                found,
                limit_reached=limit_reached,
                lines_of=lambda path: cache.get(path) or file_lines(path),
            )

        try:
            text, details = await trio.to_thread.run_sync(work, abandon_on_cancel=True)
        finally:
            stop = True  # an abandoned search stops at its next file
        return text_result(text, details)

    return AgentTool(
        name="grep",
        label="grep",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        execute=execute,
        prompt_snippet=PROMPT_SNIPPET,
    )


def _cached(read: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    cache: dict[str, list[str]] = {}

    def lines(path: str) -> list[str]:
        if path not in cache:
            cache[path] = read(path)
        return cache[path]

    return lines
