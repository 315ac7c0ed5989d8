"""Print and JSON modes in-process (pitrio/transports/print_mode.py; spec pi-rpc §8, §10, R32).

The CLI cannot script a model reply, so the error paths are driven here with a FauxProvider;
tests/transports/test_cli.py runs the real process.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest

import pitrio
from pitrio import FauxProvider, FauxReply, FauxToolCall
from pitrio.errors import AgentBusyError
from pitrio.messages.agent import AssistantMessage, Usage, user_message
from pitrio.messages.codec import from_json
from pitrio.messages.content import TextContent, ThinkingContent, ToolCall
from pitrio.messages.entries import SessionHeader
from pitrio.messages.events import AgentSessionEvent
from pitrio.transports.print_mode import build_prompts, final_reply, run_print_mode


def assistant(
    *blocks: TextContent | ThinkingContent | ToolCall,
    stop_reason: Any = "stop",
    error_message: str | None = None,
) -> AssistantMessage:
    return AssistantMessage(
        content=blocks,
        api="faux-api",
        provider="faux",
        model="faux-1",
        usage=Usage(),
        stop_reason=stop_reason,
        error_message=error_message,
        timestamp=1,
    )


# -- build_prompts ---------------------------------------------------------------------------


def test_build_prompts_without_stdin() -> None:
    assert build_prompts(["a", "b"], None) == ["a", "b"]
    assert build_prompts([], None) == []


def test_build_prompts_prepends_stdin_and_a_blank_line() -> None:
    assert build_prompts(["arg", "second"], "from stdin") == ["from stdin\n\narg", "second"]


def test_build_prompts_stdin_alone_is_the_prompt() -> None:
    assert build_prompts([], "from stdin") == ["from stdin"]


def test_build_prompts_empty_stdin_is_ignored() -> None:
    assert build_prompts(["a"], "") == ["a"]
    assert build_prompts([], "") == []


def test_build_prompts_does_not_mutate_its_argument() -> None:
    messages = ["arg"]
    build_prompts(messages, "in")
    assert messages == ["arg"]


# -- final_reply -----------------------------------------------------------------------------


def test_final_reply_of_nothing() -> None:
    assert final_reply([]) == ([], None)


def test_final_reply_when_the_last_message_is_not_an_assistant() -> None:
    assert final_reply([assistant(TextContent(text="old")), user_message("u")]) == ([], None)


def test_final_reply_text_blocks_one_per_line() -> None:
    message = assistant(
        ThinkingContent(thinking="hmm"),
        TextContent(text="first"),
        ToolCall(id="c", name="t", arguments={}),
        TextContent(text="second\nline"),
    )
    assert final_reply([message]) == (["first", "second\nline"], None)


def test_final_reply_only_the_last_message_counts() -> None:
    messages = [assistant(TextContent(text="early")), user_message("u")]
    messages.append(assistant(TextContent(text="late")))
    assert final_reply(messages) == (["late"], None)


@pytest.mark.parametrize("reason", ["stop", "toolUse"])
def test_final_reply_successful_stop_reasons(reason: str) -> None:
    assert final_reply([assistant(TextContent(text="x"), stop_reason=reason)]) == (["x"], None)


def test_final_reply_of_a_cut_reply_prints_it_and_says_so() -> None:
    lines, error = final_reply([assistant(TextContent(text="x"), stop_reason="length")])
    assert (lines, error) == (
        ["x"],
        "Response was truncated: the model reached its output token limit.",
    )


def test_final_reply_error_uses_error_message() -> None:
    message = assistant(TextContent(text="partial"), stop_reason="error", error_message="boom")
    assert final_reply([message]) == ([], "boom")


def test_final_reply_error_without_message() -> None:
    assert final_reply([assistant(stop_reason="error")]) == ([], "Request error")


def test_final_reply_aborted_without_message() -> None:
    assert final_reply([assistant(stop_reason="aborted")]) == ([], "Request aborted")


def test_final_reply_aborted_with_message() -> None:
    message = assistant(stop_reason="aborted", error_message="Request was aborted")
    assert final_reply([message]) == ([], "Request was aborted")


# -- run_print_mode --------------------------------------------------------------------------


async def run(
    prompts: list[str],
    *,
    json_mode: bool = False,
    faux: FauxProvider | None = None,
    model: str | None = "faux/faux-1",
    persist: bool = False,
    session_dir: str | None = None,
    thinking_level: str | None = None,
) -> tuple[int, bytes, str]:
    out = io.BytesIO()
    err = io.StringIO()
    code = await run_print_mode(
        prompts,
        json_mode=json_mode,
        model=model,
        persist=persist,
        session_dir=session_dir,
        thinking_level=thinking_level,
        stdout=out,
        stderr=err,
        faux=faux,
    )
    return code, out.getvalue(), err.getvalue()


# Every test runs away from the real home and agent dir (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("isolated_dirs")


async def test_print_mode_prints_the_final_reply() -> None:
    assert await run(["hi"], faux=FauxProvider(["hello there"])) == (0, b"hello there\n", "")


async def test_print_mode_error_goes_to_stderr_with_exit_1() -> None:
    faux = FauxProvider([FauxReply(text="partial", error="Model exploded")])
    assert await run(["hi"], faux=faux) == (1, b"", "Model exploded\n")


async def test_print_mode_aborted_reply_exits_1() -> None:
    faux = FauxProvider([FauxReply(stop_reason="aborted")])
    code, out, err = await run(["hi"], faux=faux)
    assert (code, out) == (1, b"")
    assert err == "Request was aborted\n"


async def test_json_mode_error_reply_exits_0_with_the_same_reply() -> None:
    faux = FauxProvider([FauxReply(text="partial", error="Model exploded")])
    code, out, err = await run(["hi"], json_mode=True, faux=faux)
    assert (code, err) == (0, "")
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert lines[0]["type"] == "session"
    from_json(lines[0], SessionHeader)
    for line in lines[1:]:
        if line["type"] == "message_update":
            # pi 1.6.0's form: the usage so far and the stream event, no message.
            assert sorted(line) == ["assistantMessageEvent", "type", "usage"]
            continue
        from_json(line, AgentSessionEvent)  # type: ignore[arg-type]
    assert [line["type"] for line in lines[-2:]] == ["agent_end", "agent_settled"]
    assert lines[-1] == {"type": "agent_settled", "aborted": False}
    assert "entry_appended" not in [line["type"] for line in lines]
    final = [line for line in lines if line["type"] == "message_end"][-1]["message"]
    assert final["role"] == "assistant"
    assert (final["stopReason"], final["errorMessage"]) == ("error", "Model exploded")
    assert lines[-2]["messages"][-1] == final


async def test_only_the_last_reply_decides() -> None:
    faux = FauxProvider([FauxReply(error="first failed"), "second ok"])
    assert await run(["one", "two"], faux=faux) == (0, b"second ok\n", "")
    faux = FauxProvider(["first ok", FauxReply(error="second failed")])
    assert await run(["one", "two"], faux=faux) == (1, b"", "second failed\n")


async def test_print_mode_prints_only_the_post_tool_reply() -> None:
    faux = FauxProvider(
        [FauxReply(text="calling a tool", tool_calls=[FauxToolCall("missing_tool")]), "done"]
    )
    assert await run(["go"], faux=faux) == (0, b"done\n", "")
    assert len(faux.requests) == 2


async def test_length_stop_is_printed() -> None:
    # At the model's own output limit (faux-1: 16384) the cut is the model's: pi 1.6.0 prints
    # the text, then says on stderr that it was cut, and exits 1.
    cut = FauxReply(text="cut sho", stop_reason="length", usage=Usage(output=16384))
    assert await run(["x"], faux=FauxProvider([cut])) == (
        1,
        b"cut sho\n",
        "Response was truncated: the model reached its output token limit.\n",
    )


async def test_multiline_and_unicode_reply_is_written_as_utf8() -> None:
    faux = FauxProvider(["zeile 1\nzeile 2 ✓"])
    assert await run(["x"], faux=faux) == (0, "zeile 1\nzeile 2 ✓\n".encode(), "")


async def test_prompts_run_in_order_in_one_session() -> None:
    faux = FauxProvider(["r1", "r2", "r3"])
    assert await run(["p1", "p2", "p3"], faux=faux) == (0, b"r3\n", "")
    # Each prompt saw the ones before it.
    assert [len(r.context.messages) for r in faux.requests] == [1, 3, 5]


async def test_no_prompts_prints_nothing_and_exits_0() -> None:
    faux = FauxProvider()
    assert await run([], faux=faux) == (0, b"", "")
    assert faux.requests == []


async def test_json_mode_no_prompts_writes_only_the_header() -> None:
    code, out, err = await run([], json_mode=True)
    assert (code, err) == (0, "")
    assert out.count(b"\n") == 1
    header = from_json(orjson.loads(out), SessionHeader)
    assert header.version == 3


async def test_json_mode_several_prompts() -> None:
    faux = FauxProvider(["a", "b"])
    code, out, _err = await run(["one", "two"], json_mode=True, faux=faux)
    assert code == 0
    types = [orjson.loads(line)["type"] for line in out.splitlines()]
    assert types.count("agent_start") == 2
    assert types.count("agent_end") == 2
    assert types.count("agent_settled") == 2
    assert types[-1] == "agent_settled"
    second_start = types.index("agent_start", 2)
    assert types[second_start - 2 : second_start] == ["agent_end", "agent_settled"]


async def test_unknown_model_exits_1_with_one_line() -> None:
    code, out, err = await run(["hi"], model="faux/nope")
    assert (code, out) == (1, b"")
    assert err.count("\n") == 1 and err.endswith("\n")
    assert "faux/nope" in err


async def test_json_mode_unknown_model_writes_no_json() -> None:
    code, out, err = await run(["hi"], json_mode=True, model="faux/nope")
    assert (code, out) == (1, b"")
    assert "faux/nope" in err


def thinking_levels(directory: Path) -> list[str]:
    [path] = list(directory.glob("*.jsonl"))
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    return [line["thinkingLevel"] for line in lines if line["type"] == "thinking_level_change"]


async def test_thinking_level_reaches_the_session(tmp_path: Path) -> None:
    directory = tmp_path / "s"
    code, _out, _err = await run(
        ["hi"],
        model="faux/faux-think",
        persist=True,
        session_dir=str(directory),
        thinking_level="high",
    )
    assert code == 0
    assert thinking_levels(directory) == ["high"]


async def test_default_thinking_level_is_medium_on_a_reasoning_model(tmp_path: Path) -> None:
    directory = tmp_path / "s"
    code, _out, _err = await run(
        ["hi"], model="faux/faux-think", persist=True, session_dir=str(directory)
    )
    assert code == 0
    assert thinking_levels(directory) == ["medium"]


async def test_thinking_level_is_clamped_for_a_non_reasoning_model(tmp_path: Path) -> None:
    directory = tmp_path / "s"
    code, _out, _err = await run(
        ["hi"],
        model="faux/faux-1",
        persist=True,
        session_dir=str(directory),
        thinking_level="high",
    )
    assert code == 0
    assert thinking_levels(directory) == ["off"]


@pytest.mark.parametrize("json_mode", [False, True])
async def test_a_thrown_prompt_error_exits_1(
    monkeypatch: pytest.MonkeyPatch, json_mode: bool
) -> None:
    """A prompt that raises (pi: no API key, preflight failure) exits 1 in both modes."""

    async def refuse(self: pitrio.AgentSession, text: str, **_: Any) -> Any:
        raise AgentBusyError(f"refused {text}")

    monkeypatch.setattr(pitrio.AgentSession, "prompt", refuse)
    code, out, err = await run(["hi"], json_mode=json_mode)
    assert (code, err) == (1, "Error: refused hi\n")
    if json_mode:  # the header was already written
        [line] = out.splitlines()
        assert orjson.loads(line)["type"] == "session"
    else:
        assert out == b""
