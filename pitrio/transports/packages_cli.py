"""``pitrio install|remove|uninstall|update|list|config``: pi 1.6.0's package commands.

The command line is read as pi reads it (the options each command takes, the first problem
reported, exit 1), the messages are pi's; the work is :mod:`pitrio.sdk.packages`'. What pitrio
cannot do is said plainly: it does not update itself (``pip install -U pitrio``), its model
catalogue is built in (``update --models`` has nothing to refresh), and pi's ``config``
screen has no pitrio counterpart yet.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import attrs

from pitrio.errors import PitrioError

Command = Literal["install", "remove", "update", "list", "config"]

USAGE = {
    "install": "pitrio install <source> [-l] [--approve|--no-approve]",
    "remove": "pitrio remove <source> [-l] [--approve|--no-approve]",
    "update": (
        "pitrio update [source|self|pi] [--self|--extensions|--models|--all] "
        "[--extension <source>] [--approve|--no-approve] [--force]"
    ),
    "list": "pitrio list [--approve|--no-approve]",
    "config": "pitrio config [-l] [--approve|--no-approve]",
}

HELP = {
    "install": "Install a package (npm:<spec>, a git URL, or a local path) and add it to "
    "settings.\n\nOptions:\n  -l, --local       Install for this project (its settings.json)"
    "\n  -a, --approve     Trust project-local files for this command\n  -na, --no-approve "
    "Ignore project-local files for this command\n",
    "remove": "Remove a package and its entry in settings (alias: pitrio uninstall).\n\n"
    "Options:\n  -l, --local       Remove from this project's settings\n  -a, --approve     "
    "Trust project-local files for this command\n  -na, --no-approve Ignore project-local "
    "files for this command\n",
    "update": "Update installed packages (pitrio itself: pip install -U pitrio).\n\nOptions:\n"
    "  --extensions          Update every installed package\n  --extension <source>  Update "
    "one package\n  --all                 Both\n  --self                pitrio itself (not "
    "supported)\n  --models              Model catalogues (built in: nothing to refresh)\n"
    "  -a, --approve         Trust project-local files for this command\n"
    "  -na, --no-approve     Ignore project-local files for this command\n",
    "list": "List the packages of the user's and the project's settings.\n\nOptions:\n"
    "  -a, --approve      Trust project-local files for this command\n"
    "  -na, --no-approve  Ignore project-local files for this command\n",
    "config": "pi's screen that switches package resources on and off (not in pitrio yet).\n",
}

SELF_UPDATE = "error: pitrio cannot update itself; run: pip install -U pitrio"
NO_CONFIG = (
    "pitrio config is not available yet: narrow a package's resources with its object form "
    'in settings.json ({"source": ..., "extensions": [...], "skills": [...]}).'
)


@attrs.define
class Parsed:
    """One package command line, with the first problem found (pi reports only that)."""

    command: Command
    source: str | None = None
    local: bool = False
    trust: bool | None = None
    help: bool = False
    invalid_option: str | None = None
    missing_value: str | None = None
    unexpected: str | None = None
    conflicting: str | None = None
    target: Literal["self", "extensions", "all", "models"] = "self"
    skipped_note: bool = False

    @property
    def problem(self) -> str | None:
        """The one problem pi reports, in its order: an unknown option, a missing value, an
        unexpected argument, conflicting options."""
        if self.invalid_option is not None:
            return f'Unknown option {self.invalid_option} for "{self.command}".'
        if self.missing_value is not None:
            return f"Missing value for {self.missing_value}."
        if self.unexpected is not None:
            return f"Unexpected argument {self.unexpected}."
        return self.conflicting


def parse(argv: list[str]) -> Parsed:
    """Read ``argv`` (the command word first) as pi 1.6.0 reads it."""
    word = argv[0]
    command: Command = "remove" if word == "uninstall" else word  # type: ignore[assignment]
    parsed = Parsed(command)
    flags: set[str] = set()
    extension: str | None = None
    rest = argv[1:]
    index = 0
    while index < len(rest):
        arg = rest[index]
        index += 1
        takes = {
            "-l": command in ("install", "remove", "config"),
            "--local": command in ("install", "remove", "config"),
            "--self": command == "update",
            "--extensions": command == "update",
            "--models": command == "update",
            "--all": command == "update",
            "--force": command == "update",
        }
        if arg in ("-h", "--help"):
            parsed.help = True
        elif arg in takes:
            if not takes[arg]:
                parsed.invalid_option = parsed.invalid_option or arg
            elif arg in ("-l", "--local"):
                parsed.local = True
            else:
                flags.add(arg)
        elif arg in ("-a", "--approve"):
            parsed.trust = True
        elif arg in ("-na", "--no-approve"):
            parsed.trust = False
        elif arg == "--extension":
            if command != "update":
                parsed.invalid_option = parsed.invalid_option or arg
                continue
            value = rest[index] if index < len(rest) else ""
            if not value or value.startswith("-"):
                parsed.missing_value = parsed.missing_value or arg
            elif extension is not None:
                parsed.conflicting = parsed.conflicting or "--extension can only be provided once"
                index += 1
            else:
                extension = value
                index += 1
        elif arg.startswith("-"):
            parsed.invalid_option = parsed.invalid_option or arg
        elif parsed.source is None:
            parsed.source = arg
        else:
            parsed.unexpected = parsed.unexpected or arg
    if command == "update":
        _update_target(parsed, flags, extension)
    return parsed


def _update_target(parsed: Parsed, flags: set[str], extension: str | None) -> None:
    """pi's rules for what ``update`` updates, and which combinations it refuses."""

    def conflict(message: str) -> None:
        parsed.conflicting = parsed.conflicting or message

    source = parsed.source
    if "--all" in flags and flags & {"--self", "--extensions", "--models"} | (
        {"x"} if extension else set()
    ):
        conflict("--all cannot be combined with --self, --extensions, --models, or --extension")
    if "--all" in flags and source:
        conflict("--all cannot be combined with a positional source")
    if "--models" in flags:
        if flags & {"--self", "--extensions", "--all"} or extension:
            conflict("--models cannot be combined with --self, --extensions, --all, or --extension")
        if source:
            conflict("--models cannot be combined with a positional source")
        parsed.target = "models"
    elif extension is not None:
        if flags & {"--self", "--extensions", "--all"}:
            conflict("--extension cannot be combined with --self, --extensions, or --all")
        if source:
            conflict("--extension cannot be combined with a positional source")
        parsed.target, parsed.source = "extensions", extension
    elif source in ("self", "pi"):
        parsed.target, parsed.source = ("all" if "--extensions" in flags else "self"), None
    elif source:
        if flags & {"--self", "--extensions", "--all"}:
            conflict(
                "positional update targets cannot be combined with --self, --extensions, or --all"
            )
        parsed.target = "extensions"
    elif "--all" in flags or {"--self", "--extensions"} <= flags:
        parsed.target = "all"
    elif "--extensions" in flags:
        parsed.target = "extensions"
    else:
        parsed.target = "self"
        parsed.skipped_note = "--self" not in flags


def _fail(*lines: str) -> int:
    for line in lines:
        sys.stderr.write(line + "\n")
    return 1


def run_packages_command(argv: list[str]) -> int:
    """Entry point of the package commands (``argv`` starts with the command word)."""
    parsed = parse(argv)
    command = parsed.command
    if parsed.help:
        print(f"Usage:\n  {USAGE[command]}\n\n{HELP[command]}")
        return 0
    if parsed.problem is not None:
        hint = f'Use "pitrio --help" or "{USAGE[command]}".'
        if not parsed.problem.startswith("Unknown option"):
            hint = f"Usage: {USAGE[command]}"
        return _fail(parsed.problem, hint)
    if command == "config":
        return _fail(NO_CONFIG)
    if command in ("install", "remove") and not parsed.source:
        return _fail(f"Missing {command} source.", f"Usage: {USAGE[command]}")
    if command == "update" and parsed.target == "models":
        print("pitrio's model catalogue is built in (pitrio --list-models): nothing to refresh")
        return 0
    try:
        return _run(parsed)
    except PitrioError as exc:
        return _fail(f"Error: {exc}")


def _run(parsed: Parsed) -> int:
    from pitrio.sdk.packages import PackageManager, agent_dir, trusted_without_asking

    cwd = Path(os.getcwd())
    agent = agent_dir()
    command = parsed.command
    if parsed.trust is not None:
        trusted = parsed.trust
    else:
        trusted = trusted_without_asking(str(cwd), agent, Path.home())
    if command in ("install", "remove") and parsed.local and not trusted:
        return _fail("Project is not trusted. Use --approve to modify local package config.")
    manager = PackageManager(cwd=cwd, agent=agent, project_trusted=trusted)
    source = parsed.source or ""
    if command == "install":
        manager.install(source, local=parsed.local)
        print(f"Installed {source}")
        return 0
    if command == "remove":
        if not manager.remove(source, local=parsed.local):
            return _fail(f"No matching package found for {source}")
        print(f"Removed {source}")
        return 0
    if command == "list":
        return _list(manager)
    return _update(manager, parsed)


def _list(manager: object) -> int:
    from pitrio.sdk.packages import PackageManager

    assert isinstance(manager, PackageManager)
    packages = manager.configured()
    if not packages:
        print("No packages installed.")
        return 0
    for scope, title in (("user", "User packages:"), ("project", "Project packages:")):
        chosen = [p for p in packages if p.scope == scope]
        if not chosen:
            continue
        if scope == "project" and len(chosen) != len(packages):
            print()
        print(title)
        for package in chosen:
            print(f"  {package.source}{' (filtered)' if package.filtered else ''}")
            if package.installed_path is not None:
                print(f"    {package.installed_path}")
    return 0


def _update(manager: object, parsed: Parsed) -> int:
    from pitrio.sdk.packages import PackageManager

    assert isinstance(manager, PackageManager)
    if parsed.skipped_note:
        print("Extensions are skipped. Run pitrio update --extensions to update extensions.")
    if parsed.target in ("extensions", "all"):
        updated = manager.update(parsed.source)
        if not updated:
            name = parsed.source
            print(f"{name} is already up to date" if name else "Packages are already up to date")
        else:
            count = len(updated)
            print(f"Updated {count} package{'' if count == 1 else 's'}:")
            for line in updated:
                print(f"  {line}")
    if parsed.target in ("self", "all"):
        return _fail(SELF_UPDATE)
    return 0


def _entry(word: str) -> Callable[[list[str]], int]:
    def main(argv: list[str]) -> int:
        return run_packages_command([word, *argv])

    main.__doc__ = f"``pitrio {word} ...``."
    return main


install_main = _entry("install")
remove_main = _entry("remove")
uninstall_main = _entry("uninstall")
update_main = _entry("update")
list_main = _entry("list")
config_main = _entry("config")
"""The command line's entry points, one per command word (``cli.SUBCOMMAND_ENTRIES``)."""


def build_parser(word: str) -> argparse.ArgumentParser:
    """The options of ``pitrio WORD`` for the shell completion (the commands themselves read
    their arguments as pi does: :func:`parse`)."""
    command = "remove" if word == "uninstall" else word
    parser = argparse.ArgumentParser(prog=f"pitrio {word}", add_help=False)
    if command in ("install", "remove"):
        parser.add_argument("source", help="npm:<spec>, a git URL or a local path")
    if command in ("install", "remove", "config"):
        parser.add_argument("-l", "--local", action="store_true", help="the project's settings")
    if command == "update":
        parser.add_argument("source", nargs="?", help="one package (or self, pi)")
        for flag in ("--self", "--extensions", "--models", "--all", "--force"):
            parser.add_argument(flag, action="store_true")
        parser.add_argument("--extension", metavar="SOURCE", help="update one package")
    parser.add_argument("-a", "--approve", action="store_true", help="trust the project")
    parser.add_argument("-na", "--no-approve", action="store_true", help="do not trust it")
    return parser
