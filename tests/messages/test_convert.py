"""convert_to_llm (spec §1.6): what each agent-message role becomes for the provider."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent, ToolCall
from pitrio.messages.convert import (
    BRANCH_SUMMARY_PREFIX,
    BRANCH_SUMMARY_SUFFIX,
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
    bash_execution_to_text,
    convert_message,
    convert_to_llm,
    default_convert_to_llm,
)

IMAGE = ImageContent(data="iVBORw0KGgo=", mime_type="image/png")
USER = UserMessage(content="hello", timestamp=1)
USER_BLOCKS = UserMessage(content=(TextContent(text="look"), IMAGE), timestamp=2)
ASSISTANT = AssistantMessage(
    content=(
        ThinkingContent(thinking="hmm", thinking_signature="sig"),
        TextContent(text="reading"),
        ToolCall(id="call_1", name="read", arguments={"path": "notes.txt"}),
    ),
    api="faux-api", provider="faux", model="faux-1", usage=Usage(input=5, output=3),
    stop_reason="toolUse", timestamp=3,
)  # fmt: skip
TOOL_RESULT = ToolResultMessage(
    tool_call_id="call_1", tool_name="read", content=(TextContent(text="Project notes"),),
    details={"lines": 3}, is_error=False, timestamp=4,
)  # fmt: skip


def bash(**changes: object) -> BashExecutionMessage:
    fields: dict[str, object] = {
        "command": "ls", "output": "a\nb", "exit_code": 0, "cancelled": False,
        "truncated": False, "timestamp": 10,
    }  # fmt: skip
    fields.update(changes)
    return BashExecutionMessage(**fields)  # type: ignore[arg-type]


def only_text(message: object) -> str:
    assert isinstance(message, UserMessage)
    assert isinstance(message.content, tuple)
    (block,) = message.content
    assert isinstance(block, TextContent)
    return block.text


# --- the literal wrappers ------------------------------------------------------------------


def test_literal_wrappers_are_exact() -> None:
    assert COMPACTION_SUMMARY_PREFIX == (
        "The conversation history before this point was compacted into the following summary:"
        "\n\n<summary>\n"
    )
    assert COMPACTION_SUMMARY_SUFFIX == "\n</summary>"
    assert BRANCH_SUMMARY_PREFIX == (
        "The following is a summary of a branch that this conversation came back from:"
        "\n\n<summary>\n"
    )
    assert BRANCH_SUMMARY_SUFFIX == "</summary>"


def test_compaction_summary_becomes_a_user_message() -> None:
    converted = convert_message(
        CompactionSummaryMessage(summary="## Goal\nX", tokens_before=1234, timestamp=77)
    )
    assert converted == UserMessage(
        content=(
            TextContent(
                text="The conversation history before this point was compacted into the "
                "following summary:\n\n<summary>\n## Goal\nX\n</summary>"
            ),
        ),
        timestamp=77,
    )


def test_branch_summary_becomes_a_user_message_without_newline_before_the_suffix() -> None:
    converted = convert_message(
        BranchSummaryMessage(summary="went left", from_id="ab12cd34", timestamp=78)
    )
    assert converted == UserMessage(
        content=(
            TextContent(
                text="The following is a summary of a branch that this conversation came back "
                "from:\n\n<summary>\nwent left</summary>"
            ),
        ),
        timestamp=78,
    )


# --- pass-through roles --------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [USER, USER_BLOCKS, ASSISTANT, TOOL_RESULT],
    ids=["user-text", "user-blocks", "assistant", "toolResult"],
)
def test_llm_roles_pass_through_unchanged(message: AgentMessage) -> None:
    assert convert_message(message) is message
    assert convert_to_llm([message]) == [message]


# --- custom messages -----------------------------------------------------------------------


def test_custom_string_content_becomes_a_text_block() -> None:
    custom = CustomMessage(
        custom_type="fixture-info",
        content="Extra context.",
        display=False,
        details={"source": "fixture"},
        timestamp=20,
    )
    assert convert_message(custom) == UserMessage(
        content=(TextContent(text="Extra context."),), timestamp=20
    )


def test_custom_block_content_is_kept() -> None:
    blocks = (TextContent(text="Lint: 0 problems."), IMAGE)
    custom = CustomMessage(custom_type="lint-report", content=blocks, display=True, timestamp=21)
    converted = convert_message(custom)
    assert converted == UserMessage(content=blocks, timestamp=21)


def test_custom_is_converted_whether_displayed_or_not() -> None:
    shown = CustomMessage(custom_type="t", content="x", display=True, timestamp=1)
    hidden = CustomMessage(custom_type="t", content="x", display=False, timestamp=1)
    assert convert_message(shown) == convert_message(hidden)


# --- bash executions -----------------------------------------------------------------------


def test_bash_output_is_fenced() -> None:
    assert bash_execution_to_text(bash()) == "Ran `ls`\n```\na\nb\n```"


def test_bash_empty_output() -> None:
    assert bash_execution_to_text(bash(output="")) == "Ran `ls`\n(no output)"


def test_bash_cancelled_wins_over_exit_code() -> None:
    assert bash_execution_to_text(bash(cancelled=True, exit_code=137)) == (
        "Ran `ls`\n```\na\nb\n```\n\n(command cancelled)"
    )


@pytest.mark.parametrize(("exit_code", "suffix"), [
    (2, "\n\nCommand exited with code 2"),
    (-1, "\n\nCommand exited with code -1"),
    (0, ""),
    (None, ""),
])  # fmt: skip
def test_bash_exit_code(exit_code: int | None, suffix: str) -> None:
    assert bash_execution_to_text(bash(exit_code=exit_code, output="")) == (
        "Ran `ls`\n(no output)" + suffix
    )


def test_bash_truncated_names_the_full_output_path() -> None:
    text = bash_execution_to_text(
        bash(truncated=True, full_output_path="/tmp/pi-bash-1.log", exit_code=1)
    )
    assert text == (
        "Ran `ls`\n```\na\nb\n```\n\nCommand exited with code 1"
        "\n\n[Output truncated. Full output: /tmp/pi-bash-1.log]"
    )


def test_bash_truncated_without_a_path_adds_nothing() -> None:
    assert bash_execution_to_text(bash(truncated=True)) == "Ran `ls`\n```\na\nb\n```"
    assert bash_execution_to_text(bash(full_output_path="/tmp/x")) == "Ran `ls`\n```\na\nb\n```"


def test_bash_execution_becomes_a_user_text_message_with_its_timestamp() -> None:
    message = bash(command="echo hi", output="hi", timestamp=99)
    converted = convert_message(message)
    assert isinstance(converted, UserMessage)
    assert converted.timestamp == 99
    assert only_text(converted) == "Ran `echo hi`\n```\nhi\n```"


@pytest.mark.parametrize(("exclude", "kept"), [(True, False), (False, True), (None, True)])
def test_bash_exclude_from_context(exclude: bool | None, kept: bool) -> None:
    message = bash(exclude_from_context=exclude)
    assert (convert_message(message) is not None) is kept
    assert len(convert_to_llm([USER, message])) == (2 if kept else 1)


# --- whole transcripts ---------------------------------------------------------------------

TRANSCRIPT: list[AgentMessage] = [
    CompactionSummaryMessage(summary="S", tokens_before=10, timestamp=0),
    USER,
    ASSISTANT,
    TOOL_RESULT,
    bash(exclude_from_context=True),
    bash(command="pwd", output="/home/user/project"),
    CustomMessage(custom_type="note", content="c", display=True, timestamp=5),
    BranchSummaryMessage(summary="B", from_id="root", timestamp=6),
    USER_BLOCKS,
]


def test_convert_to_llm_keeps_order_and_drops_excluded() -> None:
    converted = convert_to_llm(TRANSCRIPT)
    assert [type(m).__name__ for m in converted] == [
        "UserMessage", "UserMessage", "AssistantMessage", "ToolResultMessage",
        "UserMessage", "UserMessage", "UserMessage", "UserMessage",
    ]  # fmt: skip
    assert only_text(converted[0]).endswith("S\n</summary>")
    assert converted[1] is USER
    assert only_text(converted[4]).startswith("Ran `pwd`")
    assert only_text(converted[5]) == "c"
    assert only_text(converted[6]).endswith("\nB</summary>")
    assert converted[7] is USER_BLOCKS


def test_convert_to_llm_accepts_any_iterable_and_empty() -> None:
    assert convert_to_llm(iter(TRANSCRIPT)) == convert_to_llm(TRANSCRIPT)
    assert convert_to_llm([]) == []


def test_default_convert_to_llm_keeps_only_llm_roles() -> None:
    assert default_convert_to_llm(TRANSCRIPT) == [USER, ASSISTANT, TOOL_RESULT, USER_BLOCKS]
    assert default_convert_to_llm(iter([])) == []


def test_unknown_message_kinds_are_dropped() -> None:
    assert convert_message("not a message") is None  # type: ignore[arg-type]
    assert convert_to_llm([USER, object(), ASSISTANT]) == [USER, ASSISTANT]  # type: ignore[list-item]


@settings(max_examples=30)
@given(st.text(), st.text(), st.booleans(), st.one_of(st.none(), st.integers(-300, 300)))
def test_bash_text_shape(command: str, output: str, cancelled: bool, exit_code: int | None) -> None:
    text = bash_execution_to_text(
        bash(command=command, output=output, cancelled=cancelled, exit_code=exit_code)
    )
    head = f"Ran `{command}`\n"
    assert text.startswith(head)
    body = f"```\n{output}\n```" if output else "(no output)"
    assert text[len(head) :].startswith(body)
    rest = text[len(head) + len(body) :]
    if cancelled:
        assert rest == "\n\n(command cancelled)"
    elif exit_code:
        assert rest == f"\n\nCommand exited with code {exit_code}"
    else:
        assert rest == ""


def test_the_prefix_converter_converts_only_what_is_new() -> None:
    from pitrio.messages.convert import PrefixConverter, convert_to_llm
    from pitrio.messages.snapshot import Snapshot

    def user_message(text: str) -> UserMessage:
        return UserMessage(content=text, timestamp=1)

    custom = CustomMessage(custom_type="note", content="hint", display=True, timestamp=2)
    first = [user_message("a"), custom]
    converter = PrefixConverter()
    out1 = converter.convert(first)
    assert list(out1) == convert_to_llm(first)
    grown = [*first, user_message("b")]
    out2 = converter.convert(grown)
    assert list(out2) == convert_to_llm(grown)
    assert out2[1] is out1[1]  # the custom message's conversion was reused, not redone
    assert out2.follows(out1)  # and the provider is told so (no comparison there either)
    changed = [user_message("z"), *grown[1:]]
    out3 = converter.convert(changed)
    assert list(out3) == convert_to_llm(changed) and out3[1] is not out1[1]
    assert not out3.follows(out2)
    assert isinstance(out3, Snapshot) and not hasattr(out3, "append")  # immutable
    assert converter.convert(changed) is out3  # nothing new: the same snapshot


def test_the_prefix_converter_trusts_a_snapshot_made_from_its_last_input() -> None:
    # Constant time: a snapshot that says it extends the previous input is not compared
    # (here it lies, so the stale conversion of its first item shows that nothing looked).
    from pitrio.messages.convert import PrefixConverter
    from pitrio.messages.snapshot import Snapshot

    a, b, z = (UserMessage(content=text, timestamp=1) for text in "abz")
    converter = PrefixConverter()
    first = Snapshot((a,))
    converter.convert(first)
    liar = Snapshot((z, b))
    liar.base, liar.base_len = first.token, len(first)
    trusted = converter.convert(liar)
    assert [m.content for m in trusted] == ["a", "b"]
    compared = converter.convert((b, z))  # a plain tuple: compared, found different
    assert [m.content for m in compared] == ["b", "z"]


def test_extends_compares_a_prefix_by_value_with_identical_items_taken_at_once() -> None:
    from pitrio.messages import user_message
    from pitrio.messages.convert import extends

    first, second, third = (user_message(text, timestamp=n) for n, text in enumerate("abc"))
    previous = (first, second)
    assert extends(previous, (first, second, third))
    assert extends(previous, [first, second])  # a list is compared as a tuple
    assert extends(previous, (first, user_message("b", timestamp=1)))  # equal, not identical
    assert not extends(previous, (first,))  # shorter
    assert not extends(previous, (first, user_message("changed", timestamp=1), third))
    assert extends((), (third,))


def test_extends_trusts_a_snapshot_extended_along_a_line_without_reading_it() -> None:
    # Issue 38: the driver's prompt-section replay keeps the transcript of the state it read
    # last; other state reads in between extend the agent's snapshots further. The answer
    # comes from the snapshots' line, not from reading their items (reading raises here).
    from pitrio.messages.convert import extends
    from pitrio.messages.snapshot import Snapshot

    class Unreadable(Snapshot[int]):
        __slots__ = ()

        def __iter__(self):  # type: ignore[no-untyped-def]
            raise AssertionError("read")

        def __getitem__(self, index):  # type: ignore[no-untyped-def]
            raise AssertionError("read")

    seen = Snapshot(range(1000))
    skipped = seen.extended([1])
    latest = skipped.extended([2])
    latest.__class__ = Unreadable
    assert extends(seen, latest)
