"""The package commands without pi: pi 1.6.0's command-line rules and messages, the sources
(npm specs, git URLs, local paths), the ``npmCommand`` setting and the arguments given to
it, git clones, and what ``install``/``remove``/``list``/``update`` leave in settings.
(``tests/interop/test_pi_packages_cli.py`` compares the same commands with pi itself.)"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from pitrio.actors.session.resources import packages as sources
from pitrio.sdk.packages import PackageError, PackageManager
from pitrio.transports import cli
from pitrio.transports.packages_cli import parse


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["list", "--bogus"], 'Unknown option --bogus for "list".'),
        (["list", "-l"], 'Unknown option -l for "list".'),
        (["install", "a", "b"], "Unexpected argument b."),
        (["update", "--extension"], "Missing value for --extension."),
        (
            ["update", "--extension", "a", "--extension", "b"],
            "--extension can only be provided once",
        ),
        (
            ["update", "--all", "--self"],
            "--all cannot be combined with --self, --extensions, --models, or --extension",
        ),
        (["update", "x", "--all"], "--all cannot be combined with a positional source"),
        (
            ["update", "x", "--extensions"],
            "positional update targets cannot be combined with --self, --extensions, or --all",
        ),
        (["update", "--models", "x"], "--models cannot be combined with a positional source"),
        # The first kind of problem in pi's order wins, whatever the order on the line.
        (["install", "a", "b", "--zzz"], 'Unknown option --zzz for "install".'),
    ],
)
def test_command_lines_pi_refuses(argv: list[str], problem: str) -> None:
    assert parse(argv).problem == problem


def test_what_update_updates() -> None:
    assert (parse(["update"]).target, parse(["update"]).skipped_note) == ("self", True)
    assert parse(["update", "pi"]).target == "self"
    assert parse(["update", "self", "--extensions"]).target == "all"
    assert parse(["update", "--self", "--extensions"]).target == "all"
    assert parse(["update", "--extensions"]).target == "extensions"
    named = parse(["update", "--extension", "npm:x"])
    assert (named.target, named.source) == ("extensions", "npm:x")
    assert parse(["update", "npm:x"]).target == "extensions"
    assert parse(["update", "--models"]).target == "models"
    assert parse(["uninstall", "x", "-l"]).command == "remove"


def test_sources_are_read_as_pi_reads_them() -> None:
    npm = sources.parse_source("npm:@scope/tools@1.2.3")
    assert npm == sources.NpmSource(
        spec="@scope/tools@1.2.3", name="@scope/tools", version="1.2.3", pinned=True
    )
    assert sources.parse_source("npm:tools@^1").pinned is False  # type: ignore[union-attr]
    git = sources.parse_source("git:github.com/user/repo@v1")
    assert git == sources.GitSource(
        repo="https://github.com/user/repo", host="github.com", path="user/repo", ref="v1"
    )
    ssh = sources.parse_source("git:git@github.com:user/repo")
    assert ssh == sources.GitSource(
        repo="git@github.com:user/repo", host="github.com", path="user/repo", ref=None
    )
    https = sources.parse_source("https://gitlab.com/group/repo.git#main")
    assert (https.host, https.path, https.ref) == ("gitlab.com", "group/repo", "main")  # type: ignore[union-attr]
    assert isinstance(sources.parse_source("./here"), sources.LocalSource)
    assert isinstance(sources.parse_source("pkgs/tools"), sources.LocalSource)
    base = Path("/a/b")
    assert sources.identity("npm:tools@1.0.0", base) == sources.identity("npm:tools", base)
    assert sources.identity("git:github.com/u/r@v2", base) == "git:github.com/u/r"
    assert sources.identity("../x", base) == "local:/a/x"
    assert sources.suggestion("tools", ["npm:tools@1.0.0"]) == "npm:tools@1.0.0"
    assert sources.suggestion("github.com/u/r", ["git:github.com/u/r"]) == "git:github.com/u/r"


def test_the_package_manager_an_npm_command_runs() -> None:
    assert sources.package_manager(["npm"]) == "npm"
    assert sources.package_manager(["/usr/local/bin/pnpm"]) == "pnpm"
    assert sources.package_manager(["mise", "exec", "node@20", "--", "bun"]) == "bun"
    assert sources.package_manager(["corepack", "pnpm"]) == "pnpm"
    with pytest.raises(ValueError, match="Ambiguous npmCommand package managers: npm, pnpm"):
        sources.package_manager(["wrap", "npm", "pnpm"])


QUIET = ("--legacy-peer-deps", "--no-audit", "--no-fund")


class Recorder:
    """Stands for npm and git: records each command and does what it would to the disk."""

    def __init__(self) -> None:
        self.commands: list[tuple[list[str], Path | None]] = []

    def __call__(self, command: Sequence[str], cwd: Path | None) -> None:
        words = list(command)
        self.commands.append((words, cwd))
        if "install" in words and "--prefix" in words:
            root = Path(words[words.index("--prefix") + 1])
            for spec in words[words.index("install") + 1 : words.index("--prefix")]:
                name = sources.parse_source(f"npm:{spec}").name  # type: ignore[union-attr]
                target = root / "node_modules" / name
                target.mkdir(parents=True, exist_ok=True)
                version = "2.0.0" if (target / "package.json").exists() else "1.0.0"
                (target / "package.json").write_text(json.dumps({"version": version}))
        if words[:2] == ["git", "clone"]:
            Path(words[3]).mkdir(parents=True)
            (Path(words[3]) / "package.json").write_text("{}")


def _manager(tmp_path: Path, runner: Recorder, settings: dict[str, object]) -> PackageManager:
    agent, cwd = tmp_path / "agent", tmp_path / "work"
    agent.mkdir(exist_ok=True)
    cwd.mkdir(exist_ok=True)
    (agent / "settings.json").write_text(json.dumps(settings))
    return PackageManager(
        cwd=cwd, agent=agent, project_trusted=True, run=runner, progress=lambda line: None
    )


def test_npm_command_runs_the_install_and_update_as_pi_does(tmp_path: Path) -> None:
    runner = Recorder()
    wrapper = ["mise", "exec", "node@22", "--", "npm"]
    manager = _manager(tmp_path, runner, {"npmCommand": wrapper})
    manager.install("npm:tools@^1", local=False)
    root = (tmp_path / "agent" / "npm").resolve()
    assert runner.commands[0] == (
        [*wrapper, "install", "tools@^1", "--prefix", str(root), *QUIET],
        None,
    )
    assert json.loads((root / "package.json").read_text()) == {
        "name": "pi-extensions",
        "private": True,
    }
    assert (root / ".gitignore").read_text() == "*\n!.gitignore\n"
    assert manager.update(None) == ["npm:tools@^1 1.0.0 -> 2.0.0"]
    with pytest.raises(PackageError, match=r"No matching package found for tools\. Did you mean"):
        manager.update("tools")
    assert manager.remove("npm:tools", local=False)
    assert runner.commands[-1][0][len(wrapper) :] == [
        *("uninstall", "tools", "--prefix", str(root)),
        *QUIET,
    ]
    assert json.loads((tmp_path / "agent" / "settings.json").read_text())["packages"] == []


def test_a_git_source_is_cloned_at_its_ref_and_its_dependencies_installed(tmp_path: Path) -> None:
    runner = Recorder()
    manager = _manager(tmp_path, runner, {})
    manager.install("git:github.com/user/repo@v1", local=False)
    target = (tmp_path / "agent" / "git" / "github.com" / "user" / "repo").resolve()
    assert runner.commands == [
        (["git", "clone", "https://github.com/user/repo", str(target)], None),
        (["git", "checkout", "v1"], target),
        (["npm", "install", "--omit=dev", *QUIET], target),
    ]
    (listed,) = manager.configured()
    assert (listed.source, listed.scope, listed.installed_path) == (
        "git:github.com/user/repo@v1",
        "user",
        target,
    )
    assert manager.remove("git:github.com/user/repo", local=False)
    assert not (tmp_path / "agent" / "git" / "github.com").exists()  # emptied parents pruned


def test_the_same_package_is_recorded_once_and_filters_are_kept(tmp_path: Path) -> None:
    runner = Recorder()
    filtered = {"source": "npm:tools@1.0.0", "skills": []}
    manager = _manager(tmp_path, runner, {"packages": [filtered]})
    manager.install("npm:tools@1.1.0", local=False)
    saved = json.loads((tmp_path / "agent" / "settings.json").read_text())["packages"]
    assert saved == [{"source": "npm:tools@1.1.0", "skills": []}]
    assert manager.configured()[0].filtered


def test_the_command_line_reports_and_exits_as_pi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "pkg").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert cli.main(["list"]) == 0
    assert capsys.readouterr().out == "No packages installed.\n"
    assert cli.main(["install", "../pkg"]) == 0
    assert capsys.readouterr().out == "Installing ../pkg...\nInstalled ../pkg\n"
    assert cli.main(["install", "./nope"]) == 1
    assert capsys.readouterr().err == f"Error: Path does not exist: {work / 'nope'}\n"
    assert cli.main(["remove", "npm:x"]) == 1
    assert capsys.readouterr().err == "No matching package found for npm:x\n"
    assert cli.main(["update"]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("Extensions are skipped. Run pitrio update --extensions")
    assert captured.err == "error: pitrio cannot update itself; run: pip install -U pitrio\n"
    assert cli.main(["config"]) == 1
    assert "pitrio config is not available yet" in capsys.readouterr().err
    assert cli.main(["uninstall", "../pkg"]) == 0
    assert capsys.readouterr().out.endswith("Removed ../pkg\n")
