"""The SDK's create_session: resources loaded, prompts expanded, the system prompt built."""

from __future__ import annotations

from pathlib import Path

import pytest

import pitrio
from pitrio.actors.model_router import FauxProvider
from pitrio.errors import PitrioError, UnknownModelError
from pitrio.messages.agent import UserMessage
from pitrio.messages.content import text_of


async def test_templates_expand_and_the_system_prompt_lists_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(tmp_path / "agent"))
    prompts = tmp_path / "proj" / ".pitrio" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "review.md").write_text("---\ndescription: Review a file\n---\nReview $1 carefully")
    faux = FauxProvider()
    async with pitrio.create_session(
        cwd=str(tmp_path / "proj"), model="faux/faux-1", persist=False, faux=faux
    ) as session:
        await session.prompt("/review main.py")
        sent = faux.last_request.context
        commands = await session.handle.commands()
    first_user = next(m for m in sent.messages if isinstance(m, UserMessage))
    assert text_of(first_user.content) == "Review main.py carefully"
    assert "read" in sent.system_prompt and "bash" in sent.system_prompt
    assert str(tmp_path / "proj") in sent.system_prompt
    assert [c["name"] for c in commands] == ["review"]
    assert commands[0]["description"] == "Review a file"


async def test_start_errors_are_plain_pitrio_errors(tmp_path: Path) -> None:
    with pytest.raises(UnknownModelError):
        async with pitrio.create_session(cwd=str(tmp_path), model="faux/nope", persist=False):
            pass
    with pytest.raises(PitrioError, match="cannot be combined"):
        async with pitrio.create_session(
            cwd=str(tmp_path), session="abc", continue_recent=True, persist=False
        ):
            pass
