"""Project trust (pi 1.6.0's docs/security.md): the rule, trust.json, and its effect on every
project-local file a session loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pitrio
from pitrio.actors.mcp.config import load_mcp_config
from pitrio.actors.model_router import FauxProvider
from pitrio.actors.session.resources.loader import ResourceOptions, load_resources
from pitrio.actors.session.resources.trust import (
    ExtensionAnswer,
    TrustFileError,
    TrustInputs,
    apply_updates,
    canonical_path,
    decide,
    has_protected_resources,
    parse_trust_file,
    read_trust_file,
    save_decisions,
    trust_options,
)

CWD = "/work/proj"


# -- the rule ------------------------------------------------------------------------------


def test_an_override_wins_over_everything() -> None:
    saved = {CWD: False}
    approve = TrustInputs(cwd=CWD, override=True, has_protected=True, saved=saved, default="never")
    assert decide(approve).trusted is True
    assert decide(approve).reason == "override"
    refuse = TrustInputs(cwd=CWD, override=False, has_protected=False, default="always")
    assert decide(refuse).trusted is False


def test_no_protected_files_is_trusted_unless_a_saved_no_says_otherwise() -> None:
    assert decide(TrustInputs(cwd=CWD, default="never")).trusted is True
    saved_no = TrustInputs(cwd=CWD, saved={"/work": False}, default="always")
    decision = decide(saved_no)
    assert (decision.trusted, decision.reason, decision.saved_path) == (False, "saved", "/work")


def test_an_extension_answer_comes_before_the_saved_one() -> None:
    inputs = TrustInputs(
        cwd=CWD,
        has_protected=True,
        saved={CWD: False},
        extension=ExtensionAnswer(trusted=True, remember=True),
    )
    decision = decide(inputs)
    assert (decision.trusted, decision.reason) == (True, "extension")
    assert decision.save == ((CWD, True),)
    forgotten = decide(
        TrustInputs(cwd=CWD, has_protected=True, extension=ExtensionAnswer(trusted=False))
    )
    assert (forgotten.trusted, forgotten.save) == (False, ())


def test_the_closest_saved_decision_applies_and_null_is_passed_over() -> None:
    saved: dict[str, bool | None] = {"/work": True, "/work/proj": None, "/": False}
    decision = decide(TrustInputs(cwd=CWD, has_protected=True, saved=saved, default="never"))
    assert (decision.trusted, decision.saved_path) == (True, "/work")
    closer = decide(
        TrustInputs(cwd=CWD, has_protected=True, saved={**saved, CWD: False}, default="always")
    )
    assert (closer.trusted, closer.saved_path) == (False, CWD)


@pytest.mark.parametrize(
    ("default", "can_ask", "trusted", "ask", "reason"),
    [
        ("always", False, True, False, "default"),
        ("never", True, False, False, "default"),
        ("ask", False, False, False, "no-ui"),  # print, JSON, RPC: not trusted
        ("ask", True, False, True, "ask"),
    ],
)
def test_default_project_trust(
    default: str, can_ask: bool, trusted: bool, ask: bool, reason: str
) -> None:
    inputs = TrustInputs(cwd=CWD, has_protected=True, default=default, can_ask=can_ask)  # type: ignore[arg-type]
    decision = decide(inputs)
    assert (decision.trusted, decision.ask, decision.reason) == (trusted, ask, reason)


def test_dialog_options_and_what_each_saves() -> None:
    options = {option.label: option for option in trust_options(CWD)}
    assert list(options) == [
        "Trust",
        "Trust parent folder (/work)",
        "Trust (this session only)",
        "Do not trust",
        "Do not trust (this session only)",
    ]
    assert options["Trust parent folder (/work)"].updates == (("/work", True), (CWD, None))
    assert options["Trust (this session only)"].updates == ()
    assert options["Do not trust"].updates == ((CWD, False),)
    assert [o.label for o in trust_options("/")][:2] == ["Trust", "Trust (this session only)"]


# -- trust.json ----------------------------------------------------------------------------


def test_trust_file_is_parsed_strictly_with_the_file_named() -> None:
    assert parse_trust_file(b'\xef\xbb\xbf{"/a": true, "/b": null}', "t.json") == {
        "/a": True,
        "/b": None,
    }
    with pytest.raises(TrustFileError, match=r"Invalid trust store t\.json: expected an object"):
        parse_trust_file(b"[]", "t.json")
    with pytest.raises(TrustFileError, match=r'value for "/a" must be true, false, or null'):
        parse_trust_file(b'{"/a": 1}', "t.json")
    with pytest.raises(TrustFileError, match=r"Failed to read trust store t\.json"):
        parse_trust_file(b"{", "t.json")


def test_saving_merges_sorts_and_drops_nulls(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    assert read_trust_file(agent) == {}
    save_decisions(agent, [("/z", True), ("/a", False)])
    save_decisions(agent, [("/m", True), ("/z", None)])
    text = (agent / "trust.json").read_text()
    assert text == '{\n  "/a": false,\n  "/m": true\n}\n'  # pi's JSON.stringify(_, null, 2)
    assert apply_updates({"/b": None, "/a": True}, [("/c", False)]) == {"/a": True, "/c": False}


def test_protected_resources(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = tmp_path / "repo" / "sub"
    (project / ".pi").mkdir(parents=True)
    assert not has_protected_resources(str(project), (".pitrio", ".pi"), home)  # a bare .pi
    (project / ".pi" / "APPEND_SYSTEM.md").write_text("x")
    assert has_protected_resources(str(project), (".pitrio", ".pi"), home)
    assert not has_protected_resources(str(project), (".pitrio",), home)  # .pi not read
    (tmp_path / "repo" / ".agents" / "skills").mkdir(parents=True)  # an ancestor's
    assert has_protected_resources(str(project), (".pitrio",), home)
    # ~/.agents/skills is the user's own
    assert not has_protected_resources(str(tmp_path / "repo"), (".pitrio",), tmp_path / "repo")


# -- what an untrusted project does not load -----------------------------------------------


def _project(tmp_path: Path) -> tuple[Path, Path]:
    agent = tmp_path / "agent"
    agent.mkdir()
    cwd = tmp_path / "proj"
    config = cwd / ".pitrio"
    (config / "prompts").mkdir(parents=True)
    (config / "prompts" / "greet.md").write_text("Say hi")
    (config / "skills" / "lint").mkdir(parents=True)
    (config / "skills" / "lint" / "SKILL.md").write_text(
        "---\nname: lint\ndescription: Lint things\n---\nRun the linter"
    )
    (config / "settings.json").write_text(json.dumps({"steeringMode": "all"}))
    (config / "APPEND_SYSTEM.md").write_text("PROJECT APPEND")
    (cwd / ".agents" / "skills" / "fmt").mkdir(parents=True)
    (cwd / ".agents" / "skills" / "fmt" / "SKILL.md").write_text(
        "---\nname: fmt\ndescription: Format things\n---\nRun the formatter"
    )
    (cwd / "AGENTS.md").write_text("PROJECT CONTEXT")
    return agent, cwd


def test_resources_of_an_untrusted_project(tmp_path: Path) -> None:
    agent, cwd = _project(tmp_path)
    home = tmp_path / "home"
    trusted = load_resources(cwd, agent, ResourceOptions(home=home))
    assert {s.name for s in trusted.skills} == {"lint", "fmt"}
    assert [t.name for t in trusted.templates] == ["greet"]
    assert trusted.settings.get("steeringMode") == "all"
    assert trusted.system_prompt.append == "PROJECT APPEND"
    untrusted = load_resources(cwd, agent, ResourceOptions(home=home, project_trusted=False))
    assert untrusted.skills == () and untrusted.templates == ()
    assert untrusted.settings.get("steeringMode") is None
    assert untrusted.settings.project_path is None
    assert not untrusted.system_prompt.append
    # context files load either way, as in pi 1.6.0
    assert [c.content for c in untrusted.context_files] == ["PROJECT CONTEXT"]


def test_an_untrusted_projects_mcp_file_is_not_read(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (tmp_path / ".pitrio").mkdir()
    server = {"command": "never-started", "args": []}
    (tmp_path / ".pitrio" / "mcp.json").write_text(json.dumps({"mcpServers": {"p": server}}))
    assert [s.name for s in load_mcp_config(agent, str(tmp_path)).servers] == ["p"]
    assert load_mcp_config(agent, str(tmp_path), project=False).servers == ()


# -- sessions: the extension of an untrusted project is never imported ---------------------

MARKER_EXTENSION = """
from pathlib import Path
Path({marker!r}).write_text("imported")

def setup(api):
    pass
"""

TRUSTING_EXTENSION = """
def setup(api):
    def decide(event, ctx):
        Path_ = __import__("pathlib").Path
        Path_({seen!r}).write_text(event.cwd + "|" + ctx.mode)
        return {answer}
    api.on("project_trust", decide)
"""


def _marker_project(tmp_path: Path) -> tuple[Path, Path, Path]:
    agent = tmp_path / "agent"
    agent.mkdir()
    cwd = tmp_path / "proj"
    extensions = cwd / ".pitrio" / "extensions"
    extensions.mkdir(parents=True)
    marker = tmp_path / "imported.txt"
    (extensions / "marker.py").write_text(MARKER_EXTENSION.format(marker=str(marker)))
    return agent, cwd, marker


async def _start(cwd: Path, agent: Path, **more: object) -> tuple[str, ...]:
    async with pitrio.create_session(
        cwd=str(cwd),
        model="faux/faux-1",
        persist=False,
        faux=FauxProvider(),
        agent_dir=agent,
        project_trust_rules=True,
        **more,
    ) as session:
        return tuple(session.notices)


async def test_an_untrusted_projects_extension_is_never_imported(tmp_path: Path) -> None:
    agent, cwd, marker = _marker_project(tmp_path)
    notices = await _start(cwd, agent)
    assert not marker.exists()
    assert any("is not trusted" in n and str(agent / "trust.json") in n for n in notices)
    await _start(cwd, agent, project_trust=False)
    assert not marker.exists()
    (agent / "settings.json").write_text(json.dumps({"defaultProjectTrust": "never"}))
    save_decisions(agent, [(str(tmp_path), False)])
    await _start(cwd, agent)
    assert not marker.exists()


async def test_a_trusted_projects_extension_is_imported(tmp_path: Path) -> None:
    agent, cwd, marker = _marker_project(tmp_path)
    save_decisions(agent, [(canonical_path(tmp_path), True)])  # a parent's decision
    notices = await _start(cwd, agent)
    assert marker.read_text() == "imported"
    assert not any("is not trusted" in n for n in notices)
    marker.unlink()
    (agent / "trust.json").unlink()
    await _start(cwd, agent, project_trust=True)  # --approve
    assert marker.exists()
    marker.unlink()
    (agent / "settings.json").write_text(json.dumps({"defaultProjectTrust": "always"}))
    await _start(cwd, agent)
    assert marker.exists()


async def test_a_user_extension_decides_and_remembers(tmp_path: Path) -> None:
    agent, cwd, marker = _marker_project(tmp_path)
    seen = tmp_path / "seen.txt"
    (agent / "extensions").mkdir()
    (agent / "extensions" / "gate.py").write_text(
        TRUSTING_EXTENSION.format(seen=str(seen), answer='{"trusted": "yes", "remember": True}')
    )
    await _start(cwd, agent)
    assert marker.exists()
    assert seen.read_text() == f"{canonical_path(cwd)}|print"
    assert json.loads((agent / "trust.json").read_text()) == {canonical_path(cwd): True}


async def test_an_undecided_extension_leaves_the_rule_to_the_default(tmp_path: Path) -> None:
    agent, cwd, marker = _marker_project(tmp_path)
    seen = tmp_path / "seen.txt"
    (agent / "extensions").mkdir()
    (agent / "extensions" / "gate.py").write_text(
        TRUSTING_EXTENSION.format(seen=str(seen), answer='{"trusted": "undecided"}')
    )
    await _start(cwd, agent)
    assert seen.exists() and not marker.exists()
    assert not (agent / "trust.json").exists()


async def test_a_broken_trust_file_stops_the_start_naming_it(tmp_path: Path) -> None:
    agent, cwd, _ = _marker_project(tmp_path)
    (agent / "trust.json").write_text('{"/x": "yes"}')
    with pytest.raises(pitrio.PitrioError, match=r'trust\.json: value for "/x"'):
        await _start(cwd, agent)
