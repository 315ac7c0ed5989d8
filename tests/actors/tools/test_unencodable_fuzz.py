"""Fuzzing every string argument of the built-in tools that reaches the OS (issue 36): with any
text at all (lone surrogates and NULs included) a tool either runs or fails with a
:class:`~pitrio.errors.PitrioError` whose message names the field; never a bare
``UnicodeEncodeError`` or ``ValueError`` from deep in a syscall, and nothing is written
outside the scratch directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pitrio.actors.tool_executor.tool import AgentTool
from pitrio.actors.tool_executor.tools.bash import create_bash_tool
from pitrio.actors.tool_executor.tools.edit import create_edit_tool
from pitrio.actors.tool_executor.tools.find import create_find_tool
from pitrio.actors.tool_executor.tools.grep import create_grep_tool
from pitrio.actors.tool_executor.tools.ls import create_ls_tool
from pitrio.actors.tool_executor.tools.read import create_read_tool
from pitrio.actors.tool_executor.tools.write import create_write_tool
from pitrio.errors import PitrioError
from pitrio.messages.ostext import os_text_problem

from .support import run_one

# Mostly ordinary text, with a lone surrogate or a NUL often enough to matter.
HOSTILE = st.lists(
    st.one_of(
        st.text(alphabet="abc./ -_*", min_size=0, max_size=4),
        st.integers(0xD800, 0xDFFF).map(chr),
        st.just("\0"),
        st.characters(codec=None, min_codepoint=0),
    ),
    min_size=1,
    max_size=6,
).map("".join)

# (tool, the field fuzzed, the other arguments), one case per field that reaches the OS.
FIELDS: list[tuple[str, str, dict[str, Any]]] = [
    ("bash", "command", {}),
    ("read", "path", {}),
    ("write", "path", {"content": "x"}),
    ("edit", "path", {"edits": [{"oldText": "a", "newText": "b"}]}),
    ("ls", "path", {}),
    ("find", "path", {"pattern": "*"}),
    ("find", "pattern", {}),
    ("grep", "path", {"pattern": "a"}),
    ("grep", "pattern", {}),
    ("grep", "glob", {"pattern": "a"}),
]


def make_tool(name: str, cwd: str) -> AgentTool:
    makers = {
        "bash": create_bash_tool,
        "read": create_read_tool,
        "write": create_write_tool,
        "edit": create_edit_tool,
        "ls": create_ls_tool,
        "find": create_find_tool,
        "grep": create_grep_tool,
    }
    return makers[name](cwd)  # type: ignore[operator]


@pytest.mark.parametrize(("tool_name", "field", "others"), FIELDS)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=HOSTILE)
def test_any_text_in_a_field_is_run_or_refused_by_name(
    tmp_path: Path, tool_name: str, field: str, others: dict[str, Any], value: str
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    (cwd / "a.txt").write_text("a\n")
    args = {**others, field: value}
    if tool_name == "bash":  # a harmless command around the fuzzed text
        args[field] = f": '{value.replace(chr(39), '')}'"
    if tool_name in ("write", "edit"):
        args[field] = f"sub/{value}"  # never the scratch files themselves

    async def main() -> None:
        tool = make_tool(tool_name, str(cwd))
        try:
            await run_one(tool, args)
        except PitrioError as exc:
            problem = os_text_problem(args[field], field)
            if problem is not None:
                # The field and what (bash names a NUL first, and words its message its own way).
                kinds = ("The {} contains a NUL character (at offset ", "The {} contains a lone")
                assert str(exc).startswith(tuple(k.format(field) for k in kinds)), (args, exc)
            else:  # a failure of its own (not found, no match): never an encoding one
                assert "codec" not in str(exc) and "null byte" not in str(exc), (args, exc)
        else:
            assert os_text_problem(args[field], field) is None, args

    trio.run(main)
    # Nothing escaped the scratch directory.
    assert sorted(os.listdir(tmp_path)) == ["cwd"]
