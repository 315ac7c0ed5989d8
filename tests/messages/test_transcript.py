"""Replaying a transcript's system messages (pi 1.6.0's ``getCurrentSystemMessage``), section
diffs, tool declarations, and the wire form of system messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pitrio.messages.agent import (
    AssistantMessage,
    SystemCheckpoint,
    SystemMessage,
    ToolDeclaration,
    ToolReference,
    Usage,
    user_message,
)
from pitrio.messages.codec import from_json, to_json
from pitrio.messages.content import TextContent
from pitrio.messages.convert import convert_to_llm
from pitrio.messages.entries import MessageEntry
from pitrio.messages.snapshot import Snapshot
from pitrio.messages.transcript import (
    SystemReplay,
    checkpoint_of,
    current_tools,
    declare_tool_changes,
    diff_sections,
    replay,
    spec_of,
    system_text,
    tool_changes,
)
from tests.shared_dir import SHARED

PI16 = SHARED / "fixtures" / "pi16"
SAMPLING = {"type": "json_schema", "strict": "prefer"}


def decl(name: str, description: str = "d") -> ToolDeclaration:
    return ToolDeclaration(
        name=name,
        description=description,
        parameters={"type": "object", "properties": {}},
        constrained_sampling=SAMPLING,
    )


def system(
    ts: int = 1,
    *,
    content: str = "",
    added: tuple[ToolDeclaration, ...] | None = None,
    removed: tuple[str, ...] | None = None,
    **sections: str | None,
) -> SystemMessage:
    return SystemMessage(
        content=content,
        sections=sections or None,
        timestamp=ts,
        tools_added=added,
        tools_removed=None if removed is None else tuple(ToolReference(name=n) for n in removed),
    )


def answer(text: str = "ok") -> AssistantMessage:
    return AssistantMessage(
        content=(TextContent(text=text),),
        api="faux",
        provider="faux",
        model="faux-1",
        usage=Usage(),
        stop_reason="stop",
        timestamp=3,
    )


def test_replay_patches_sections_by_name_and_resolves_tools_in_order() -> None:
    messages = [
        system(
            1,
            preamble="P",
            tools="<tools>\nA\n</tools>",
            cwd="<cwd>\n/w\n</cwd>",
            added=(decl("read"), decl("bash")),
        ),
        user_message("hi", timestamp=2),
        answer(),
        # Replace one section in place, remove one, add one (it goes last); redefine bash
        # (removed, then added: it moves to the end) and drop read.
        system(
            4,
            tools="<tools>\nB\n</tools>",
            cwd=None,
            skills="<skills>\nS\n</skills>",
            added=(decl("bash", "new"), decl("grep")),
            removed=("read", "bash"),
        ),
        system(5, content="Also this."),
    ]
    current = replay(messages)
    assert current is not None
    assert current.timestamp == 1  # the first one's
    assert current.sections == {
        "preamble": "P",
        "tools": "<tools>\nB\n</tools>",
        "skills": "<skills>\nS\n</skills>",
    }
    assert [(t.name, t.description) for t in current_tools(current)] == [
        ("bash", "new"),
        ("grep", "d"),
    ]
    assert current.content == "Also this."
    assert system_text(current) == (
        "Also this.\n\nP\n\n<tools>\nB\n</tools>\n\n<skills>\nS\n</skills>"
    )
    assert replay([user_message("no system")]) is None


def test_system_messages_are_not_chat_messages() -> None:
    messages = [system(1, preamble="P"), user_message("hi", timestamp=2)]
    assert [m.role for m in convert_to_llm(messages)] == ["user"]


def test_diff_sections() -> None:
    before = {"preamble": "P", "tools": "T", "skills": "S"}
    assert diff_sections(before, dict(before)) is None
    assert diff_sections({}, {"preamble": "P"}) == {"preamble": "P"}
    patch = diff_sections(before, {"preamble": "P", "tools": "T2", "cwd": "C"})
    assert patch == {"tools": "T2", "cwd": "C", "skills": None}
    assert list(patch) == ["tools", "cwd", "skills"]  # changes in order, removals last


def test_tool_changes_treat_a_redefinition_as_remove_then_add() -> None:
    changes = tool_changes(
        [decl("read"), decl("bash")], [decl("read"), decl("bash", "x"), decl("ls")]
    )
    assert [t.name for t in changes.added] == ["bash", "ls"]
    assert changes.removed == (ToolReference(name="bash"),)
    assert not tool_changes([decl("read")], [decl("read")])
    # constrainedSampling is part of the declaration.
    plain = ToolDeclaration(name="read", description="d", parameters=decl("read").parameters)
    assert tool_changes([decl("read")], [plain]).removed == (ToolReference(name="read"),)


def test_declaring_tools_fills_the_pending_system_message_or_adds_one() -> None:
    prompt = user_message("hi", timestamp=2)
    # A pending system message (the sections patch) carries the declaration.
    patch = system(1, preamble="P")
    out = declare_tool_changes((), [patch, prompt], [decl("read")])
    assert out[1] is prompt
    assert isinstance(out[0], SystemMessage)
    assert out[0].sections == {"preamble": "P"} and out[0].timestamp == 1
    assert [t.name for t in out[0].tools_added or ()] == ["read"]
    # Without one, a new system message goes before the first message that is not one.
    out = declare_tool_changes([decl("read")], [prompt], [decl("read"), decl("bash")])
    assert [m.role for m in out] == ["system", "user"]
    added = out[0]
    assert isinstance(added, SystemMessage)
    assert added.content == "" and added.sections is None
    assert [t.name for t in added.tools_added or ()] == ["bash"]
    # Nothing changed: the same messages, nothing added.
    assert declare_tool_changes([decl("read")], [prompt], [decl("read")]) == [prompt]
    assert declare_tool_changes([decl("read")], [], [decl("read")]) == []
    # A pending message's own tool fields are intent: replaced by the real difference.
    stale = system(1, preamble="P", added=(decl("zzz"),))
    out = declare_tool_changes([decl("read")], [stale, prompt], [decl("read")])
    assert isinstance(out[0], SystemMessage) and out[0].tools_added is None
    # Removals are declared too.
    out = declare_tool_changes([decl("read"), decl("bash")], [prompt], [decl("read")])
    assert isinstance(out[0], SystemMessage)
    assert out[0].tools_removed == (ToolReference(name="bash"),) and out[0].tools_added is None


def test_incremental_replay_matches_a_full_replay() -> None:
    replayer = SystemReplay()
    first = Snapshot(
        [system(1, preamble="P", added=(decl("read"),)), user_message("a", timestamp=2)]
    )
    assert replayer.current(first) == replay(first)
    handed_out = replayer.current(first)
    second = first.extended([answer(), system(4, preamble="Q", removed=("read",))])
    current = replayer.current(second)
    assert current == replay(second)
    assert current is not None and current.sections == {"preamble": "Q"}
    assert current_tools(current) == ()
    assert handed_out is not None and handed_out.sections == {"preamble": "P"}  # unchanged
    # A transcript that does not extend the last one is replayed from scratch.
    other = (user_message("x", timestamp=1),)
    assert replayer.current(other) is None
    # current_then: more messages that are not remembered.
    assert replayer.current_then(other, [system(9, preamble="R")]) == replay(
        [*other, system(9, preamble="R")]
    )
    assert replayer.current(other) is None


def test_wire_form_keeps_pis_key_order() -> None:
    message = system(7, preamble="P", added=(decl("read"),))
    encoded = to_json(message)
    assert list(encoded) == ["role", "content", "sections", "timestamp", "toolsAdded"]
    assert list(encoded["toolsAdded"][0]) == [
        "name",
        "description",
        "parameters",
        "constrainedSampling",
    ]
    assert from_json(encoded, SystemMessage) == message
    removal = to_json(system(8, removed=("bash",)))
    assert removal == {
        "role": "system",
        "content": "",
        "timestamp": 8,
        "toolsRemoved": [{"name": "bash"}],
    }
    # A compaction's checkpoint: the timestamp last, as pi writes it.
    current = replay([message])
    assert current is not None
    checkpoint = checkpoint_of(current, 99)
    assert list(to_json(checkpoint)) == ["role", "content", "sections", "toolsAdded", "timestamp"]
    assert from_json(to_json(checkpoint), SystemCheckpoint) == checkpoint
    assert checkpoint.message() == SystemMessage(
        content="", sections={"preamble": "P"}, timestamp=99, tools_added=(decl("read"),)
    )


def test_unknown_fields_of_a_system_message_are_kept() -> None:
    raw = {
        "role": "system",
        "content": "",
        "futureField": 1,
        "timestamp": 1,
        "toolsAdded": [{"name": "t", "description": "", "parameters": {}, "newKey": True}],
    }
    decoded = from_json(raw, SystemMessage)
    assert to_json(decoded)["futureField"] == 1
    assert to_json(decoded)["toolsAdded"][0]["newKey"] is True


@pytest.mark.skipif(not (PI16 / "pi160.session.jsonl").is_file(), reason="pi 1.6.0 fixtures")
def test_pi_160s_leading_system_entry_round_trips_byte_for_byte() -> None:
    line = Path(PI16 / "pi160.session.jsonl").read_text().splitlines()[3]
    raw = json.loads(line)
    entry = from_json(raw, MessageEntry)
    assert isinstance(entry.message, SystemMessage)
    assert json.dumps(to_json(entry)) == json.dumps(raw)
    message = entry.message
    assert list(message.sections or {}) == ["preamble", "tools", "rules", "docs", "cwd"]
    assert [t.name for t in message.tools_added or ()] == ["read", "bash", "edit", "write"]
    assert all(t.constrained_sampling == SAMPLING for t in message.tools_added or ())


def test_a_replay_s_tool_specs_are_kept_while_its_message_is_the_same() -> None:
    """The specs of the tools a replayed message declares are ``spec_of`` each; asked again
    with the same message (a replay hands it out until a system message changes it), the
    same specs come back, and a changed replay gets its own."""
    replay = SystemReplay()
    first = replay.current([system(added=(decl("read"), decl("bash")))])
    specs = replay.tool_specs(first)
    assert specs == tuple(spec_of(tool) for tool in current_tools(first))
    assert [spec.name for spec in specs] == ["read", "bash"]
    grown = [system(added=(decl("read"), decl("bash"))), answer()]
    assert replay.current(grown) is first
    assert replay.tool_specs(replay.current(grown)) is specs
    changed = replay.current([*grown, system(2, added=(decl("edit"),), removed=("bash",))])
    assert [spec.name for spec in replay.tool_specs(changed)] == ["read", "edit"]
    assert replay.tool_specs(None) == ()
