"""Session paths through the SDK (issue 36): ``--session``, ``--fork``, ``--session-dir`` and
the cwd are refused with the option named when no file system can take them; a directory whose
real name is not UTF-8 (its bytes kept by ``surrogateescape``) still works, bash included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

import pitrio
from pitrio import FauxProvider, FauxReply, FauxToolCall
from pitrio.errors import UnencodableTextError
from pitrio.messages.agent import ToolResultMessage
from pitrio.messages.content import text_of

SURROGATE = "contains a lone surrogate (\\ud800 at offset {}): it cannot be encoded as UTF-8"


# Every test runs away from the real home and agent dir (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("isolated_dirs")


@pytest.mark.parametrize(
    ("option", "value", "field", "offset"),
    [
        ("session", "s/x\ud800.jsonl", "--session", 3),
        ("fork", "f/x\ud800.jsonl", "--fork", 3),
        ("session_dir", "d\ud800", "--session-dir", 1),
        ("session", "s/x\0.jsonl", "--session", None),
    ],
)
async def test_a_session_option_the_os_cannot_take_is_refused(
    tmp_path: Path, option: str, value: str, field: str, offset: int | None
) -> None:
    with pytest.raises(UnencodableTextError) as caught:
        async with pitrio.create_session(cwd=str(tmp_path), model="faux/faux-1", **{option: value}):
            pass
    expected = (
        f"The {field} " + SURROGATE.format(offset)
        if offset is not None
        else f"The {field} contains a NUL character (at offset 3): the OS cannot take one"
    )
    assert str(caught.value) == expected
    assert not await trio.to_thread.run_sync(lambda: list(tmp_path.glob("**/*.jsonl")))


async def test_a_cwd_the_os_cannot_take_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnencodableTextError) as caught:
        async with pitrio.create_session(cwd=f"{tmp_path}/\ud800", model="faux/faux-1"):
            pass
    assert str(caught.value) == "The cwd " + SURROGATE.format(len(str(tmp_path)) + 1)


async def test_a_directory_named_with_bytes_that_are_not_utf8_works(tmp_path: Path) -> None:
    project = tmp_path / os.fsdecode(b"caf\xe9")  # "caf\udce9": the real name's byte kept
    project.mkdir()
    faux = FauxProvider(
        [FauxReply(tool_calls=[FauxToolCall("bash", {"command": "pwd"}, id="c1")]), "done"]
    )
    async with pitrio.create_session(cwd=str(project), model="faux/faux-1", faux=faux) as agent:
        await agent.prompt("where am I?")
        messages = await agent.messages()
        path = agent.session_file
    # pi 1.6.0: the session's context starts with its system message.
    assert [m.role for m in messages] == ["system", "user", "assistant", "toolResult", "assistant"]
    result = messages[3]
    assert isinstance(result, ToolResultMessage) and not result.is_error, result
    # The shell printed the real bytes; the tool decodes its output with replacement.
    assert text_of(result.content).strip() == str(tmp_path) + "/caf\ufffd"
    assert path is not None and os.fsencode(path).count(b"caf\xe9") == 1
