"""What a resumed session's context view tells without decoding (issue 38): each message's
stored role, line and JSON text, and its system messages, decoding only those."""

from __future__ import annotations

import orjson

from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.actors.session_store.projection import ContextMessages
from pitrio.messages.agent import CustomMessage, SystemMessage
from pitrio.messages.codec import to_json
from pitrio.messages.entries import CustomMessageEntry
from tests.actors.test_session_store_projection import Session, assistant, edit, user

HEADER = b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/p"}'
LINES = [
    b'{"type":"message","id":"a","parentId":null,"timestamp":"t",'
    b'"message":{"role":"system","content":"be brief","timestamp":1}}',
    b'{"type":"message","id":"b","parentId":"a","timestamp":"t",'
    b'"message":{"role":"user","content":"x","timestamp":2}}',
    b'{"type":"message","id":"c","parentId":"b","timestamp":"t",'
    b'"message":{"role":"user","content":"y","timestamp":3},"note":1}',
    b'{"type":"message","id":"d","parentId":"c","timestamp":"t","message":{"role":"assistant",'
    b'"content":[{"type":"text","text":"z"}],"api":"a","provider":"p","model":"m","usage":'
    b'{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,'
    b'"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":4}}',
]


def _session() -> Session:
    parsed = parse_session_bytes(b"\n".join([HEADER, *LINES, b""]), origin="f.jsonl")
    s = Session()
    for stored in parsed.entries:
        s.tree.add(stored)
        s.projection.append(stored)
    s.add(CustomMessageEntry, custom_type="note", content="hint", display=True)
    s.message(SystemMessage(content="be kind", timestamp=5))
    edited = s.message(assistant("to be edited"))
    s.message(user("last"))
    edit(s, edited, "rewritten")
    return s


def _built(view: ContextMessages) -> list[bool]:
    """Whether each of the first three stored lines' message was built (decoded and kept on
    its entry; the last assistant message is read as it is appended, for its model)."""
    return [item._message is not None for item in view._items[:3]]


def test_roles_lines_and_texts_come_from_the_entries_undecoded() -> None:
    view = _session().projection.context().messages
    roles = view.stored_roles()
    lines = view.stored_lines()
    texts = view.stored_texts(0, len(view))
    assert _built(view) == [False] * 3
    messages = list(view)
    assert roles == ["system", "user", "user", "assistant", None, "system", None, "user"]
    assert lines == [2, 3, 4, 5, 0, 0, 0, 0]  # typed entries were read from no line
    assert isinstance(messages[4], CustomMessage)
    for index, (role, text) in enumerate(zip(roles, texts, strict=True)):
        if role is None:
            assert text is None
        else:
            assert orjson.loads(text) == to_json(messages[index])
    for start in range(len(view) + 1):
        for stop in range(start, len(view) + 1):
            assert view.stored_texts(start, stop) == texts[start:stop]


def test_system_messages_decode_only_themselves() -> None:
    s = _session()
    view = s.projection.context().messages
    found = view.system_messages()
    assert [m.content for m in found] == ["be brief", "be kind"]
    assert _built(view) == [True, False, False]
    every = list(view)
    for start in range(len(view) + 1):
        expected = [m for m in every[start:] if isinstance(m, SystemMessage)]
        assert view.system_messages(start) == expected
