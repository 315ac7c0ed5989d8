"""Context files (AGENTS.md / CLAUDE.md) and the system-prompt files."""

from __future__ import annotations

from pathlib import Path

from pitrio.actors.session.resources.context_files import (
    ContextFile,
    context_file_in,
    load_context_files,
    load_system_prompt_sources,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_agent_dir_first_then_root_down_to_cwd(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    cwd = tmp_path / "a" / "b" / "c"
    cwd.mkdir(parents=True)
    write(agent / "AGENTS.md", "global")
    write(tmp_path / "CLAUDE.md", "top")
    write(tmp_path / "a" / "b" / "AGENTS.md", "middle")
    write(cwd / "AGENTS.md", "here")
    files, problems = load_context_files(str(cwd), str(agent))
    assert problems == ()
    assert files == (
        ContextFile(str(agent / "AGENTS.md"), "global"),
        ContextFile(str(tmp_path / "CLAUDE.md"), "top"),
        ContextFile(str(tmp_path / "a" / "b" / "AGENTS.md"), "middle"),
        ContextFile(str(cwd / "AGENTS.md"), "here"),
    )


def test_one_file_per_directory_in_name_order(tmp_path: Path) -> None:
    write(tmp_path / "CLAUDE.md", "claude")
    assert context_file_in(str(tmp_path))[0] == ContextFile(str(tmp_path / "CLAUDE.md"), "claude")
    write(tmp_path / "CLAUDE.MD", "shouting claude")
    write(tmp_path / "AGENTS.MD", "shouting agents")
    found, _ = context_file_in(str(tmp_path))
    assert found is not None and found.content == "shouting agents"
    write(tmp_path / "AGENTS.md", "agents")
    found, _ = context_file_in(str(tmp_path))
    assert found is not None and found.content == "agents"


def test_an_unreadable_candidate_is_reported_and_the_next_used(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").mkdir()
    write(tmp_path / "CLAUDE.md", "fallback")
    found, problems = context_file_in(str(tmp_path))
    assert found == ContextFile(str(tmp_path / "CLAUDE.md"), "fallback")
    assert [p.path for p in problems] == [str(tmp_path / "AGENTS.md")]


def test_the_agent_dir_inside_the_chain_is_not_read_twice(tmp_path: Path) -> None:
    cwd = tmp_path / "agent" / "work"
    cwd.mkdir(parents=True)
    write(tmp_path / "agent" / "AGENTS.md", "global")
    files, _ = load_context_files(str(cwd), str(tmp_path / "agent"))
    assert [f.content for f in files] == ["global"]


def test_system_prompt_files(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    cwd = tmp_path / "proj"
    project_dirs = [str(cwd / ".pitrio"), str(cwd / ".pi")]

    def load(**kwargs: object) -> tuple[object, ...]:
        sources, problems = load_system_prompt_sources(
            cwd=str(cwd),
            agent_dir=str(agent),
            project_dirs=project_dirs,
            **kwargs,  # type: ignore[arg-type]
        )
        assert problems == ()
        return (sources.custom_prompt, sources.append)

    cwd.mkdir(parents=True)
    assert load() == (None, None)
    write(agent / "SYSTEM.md", "agent system")
    write(agent / "APPEND_SYSTEM.md", "agent append")
    assert load() == ("agent system", "agent append")
    write(cwd / ".pi" / "SYSTEM.md", "pi system")
    assert load() == ("pi system", "agent append")
    write(cwd / ".pitrio" / "SYSTEM.md", "pitrio system")
    write(cwd / ".pitrio" / "APPEND_SYSTEM.md", "pitrio append")
    assert load() == ("pitrio system", "pitrio append")
    # The command line wins; a value naming a file is read from it.
    write(cwd / "prompt.txt", "from a file")
    assert load(system_prompt="prompt.txt") == ("from a file", "pitrio append")
    assert load(system_prompt="Be brief.", append_system_prompt=("one", "prompt.txt")) == (
        "Be brief.",
        "one\n\nfrom a file",
    )
    sources, _ = load_system_prompt_sources(
        cwd=str(cwd),
        agent_dir=str(agent),
        project_dirs=project_dirs,
        append_system_prompt=("prompt.txt",),
    )
    assert sources.custom_prompt_path == str(cwd / ".pitrio" / "SYSTEM.md")
    assert sources.append_paths == (str(cwd / "prompt.txt"),)
