"""Issue 36: a session name, a label and a message holding a lone surrogate or a NUL (a
client may send either; JSON writes both as escapes) are kept by both stores, the file's and
PostgreSQL's (whose text columns hold neither: its listing columns get U+FFFD, the stored
lines keep the exact text), and read back unchanged."""

from __future__ import annotations

import pytest

from pitrio.messages.agent import UserMessage
from pitrio.messages.content import text_of
from tests.actors.test_session_store_postgres import (  # noqa: F401 (the fixture)
    Backend,
    running,
    store_backend,
    user_message,
)


@pytest.mark.parametrize("bad", ["\ud800", "\udfff", "\0"])
async def test_names_labels_and_messages_keep_what_json_can_carry(
    store_backend: Backend,  # noqa: F811
    bad: str,
) -> None:
    async with running(store_backend.new()) as store:
        first = await store.append_message(user_message(f"one {bad} and", timestamp=1))
        await store.append_label_change(first.id, f"lab{bad}el")
        await store.append_session_info(f"na{bad}me")
    async with running(store_backend.reopen(store)) as again:
        assert await again.session_name() == f"na{bad}me"
        assert await again.labels() == {first.id: f"lab{bad}el"}
        messages = (await again.context()).messages.materialize()
        assert isinstance(messages[0], UserMessage)
        assert text_of(messages[0].content) == f"one {bad} and"
