"""The seven built-in tools (spec §5): ``read``, ``bash``, ``edit``, ``write``, ``grep``,
``find``, ``ls``.

:func:`create_builtin_tools` builds them for one session's working directory; the tool
executor registers them. Each tool keeps its text rules in pure functions beside it.
"""

from __future__ import annotations

import attrs

from pitrio.actors.tool_executor.processes import ProcessGroups
from pitrio.actors.tool_executor.registry import mark_schema_valid
from pitrio.actors.tool_executor.tool import AgentTool
from pitrio.actors.tool_executor.tools import bash, edit, find, grep, ls, read, write
from pitrio.actors.tool_executor.tools.bash import BashSettings, create_bash_tool
from pitrio.actors.tool_executor.tools.edit import create_edit_tool
from pitrio.actors.tool_executor.tools.find import create_find_tool
from pitrio.actors.tool_executor.tools.grep import create_grep_tool
from pitrio.actors.tool_executor.tools.ls import create_ls_tool
from pitrio.actors.tool_executor.tools.read import ReadSettings, create_read_tool
from pitrio.actors.tool_executor.tools.write import create_write_tool

BUILTIN_TOOL_NAMES = ("read", "bash", "edit", "write", "grep", "find", "ls")

BUILTIN_SCHEMAS = tuple(module.PARAMETERS for module in (read, bash, edit, write, grep, find, ls))
"""The built-in tools' parameter schemas: valid JSON Schema (checked by the tests, not at
every start-up; see ``registry.mark_schema_valid``)."""
for _schema in BUILTIN_SCHEMAS:
    mark_schema_valid(_schema)


@attrs.frozen(kw_only=True)
class BuiltinSettings:
    """Settings of the built-in tools.

    ``use_native_search``: run ``rg``/``fd`` when installed (``None``), always (``True``: a
    missing binary is an error, as in pi) or never (``False``: the pure-Python search).
    """

    read: ReadSettings = attrs.field(factory=ReadSettings)
    bash: BashSettings = attrs.field(factory=BashSettings)
    use_native_search: bool | None = None


def create_builtin_tools(
    cwd: str,
    settings: BuiltinSettings | None = None,
    processes: ProcessGroups | None = None,
) -> tuple[AgentTool, ...]:
    """The seven built-in tools for working directory ``cwd``, in pi's order."""
    settings = settings or BuiltinSettings()
    native = settings.use_native_search
    return (
        create_read_tool(cwd, settings.read),
        create_bash_tool(cwd, settings.bash, processes),
        create_edit_tool(cwd),
        create_write_tool(cwd),
        create_grep_tool(cwd, use_ripgrep=native),
        create_find_tool(cwd, use_fd=native),
        create_ls_tool(cwd),
    )


__all__ = [
    "BUILTIN_TOOL_NAMES",
    "BashSettings",
    "BuiltinSettings",
    "ReadSettings",
    "create_builtin_tools",
]
