"""``resources_discover`` (pi 1.6.0, issue 35 item 5): after ``session_start``, the skill and
prompt template paths extensions return join the session's: listed by ``get_commands``,
expanded in prompts, and the skills in the first request's system prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pitrio.actors.session.extensions.events import ResourcesDiscoverEvent
from pitrio.messages.events import ExtensionError
from tests.actors.test_session_extensions import agent_dir, session_with

__all__ = ["agent_dir"]  # the fixture, used by name


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def test_discovered_skills_and_templates_join_the_session(
    tmp_path: Path, agent_dir: Path
) -> None:
    extra = tmp_path / "extra"
    _write(
        extra / "skills" / "zebra-care" / "SKILL.md",
        "---\ndescription: Look after zebras.\n---\nFeed them.",
    )
    _write(extra / "prompts" / "greet.md", "---\ndescription: Greet someone\n---\nSay hello to $1")
    order: list[str] = []
    seen: list[Any] = []

    def setup(api: Any) -> None:
        def start(event: Any, ctx: Any) -> None:
            order.append("session_start")

        def discover(event: Any, ctx: Any) -> Any:
            order.append("resources_discover")
            seen.append(event)
            return {
                "skillPaths": [str(extra / "skills")],
                "promptPaths": [str(extra / "prompts" / "greet.md")],
                "themePaths": [str(extra / "themes")],  # accepted, nothing to load
            }

        def broken(event: Any, ctx: Any) -> Any:
            raise RuntimeError("no paths today")

        api.on("session_start", start)
        api.on("resources_discover", broken)
        api.on("resources_discover", discover)

    async with session_with(tmp_path, setup) as h:
        await h.session.prompt("first")  # waits for the discovery before its prompt is built
        system = h.faux.last_request.context.system_prompt
        await h.drain()
        names = [c["name"] for c in await h.session.handle.commands()]
        await h.session.prompt("/greet Ada")
        sent = h.faux.last_request.context.messages[-1]
    assert order == ["session_start", "resources_discover"]
    (event,) = seen
    assert isinstance(event, ResourcesDiscoverEvent)
    assert (event.cwd, event.reason) == (str(tmp_path / "proj"), "startup")
    assert "zebra-care" in system and "Look after zebras." in system
    assert "greet" in names and "skill:zebra-care" in names
    assert "Say hello to Ada" in repr(sent)
    errors = [e for e in h.seen if isinstance(e, ExtensionError)]
    assert [(e.event, e.error) for e in errors] == [("resources_discover", "no paths today")]


async def test_a_missing_path_is_reported_and_the_rest_loads(
    tmp_path: Path, agent_dir: Path
) -> None:
    extra = tmp_path / "extra"
    _write(extra / "prompts" / "ok.md", "Fine $1")

    def setup(api: Any) -> None:
        def discover(event: Any, ctx: Any) -> Any:
            return {"promptPaths": [str(extra / "nowhere"), str(extra / "prompts")]}

        api.on("resources_discover", discover)

    async with session_with(tmp_path, setup) as h:
        await h.session.prompt("hi")
        await h.drain()
        names = [c["name"] for c in await h.session.handle.commands()]
    assert "ok" in names
    errors = [e for e in h.seen if isinstance(e, ExtensionError)]
    assert len(errors) == 1 and str(extra / "nowhere") in errors[0].error
    assert "does not exist" in errors[0].error
