"""``docs/pi-1.6-surface.md`` cannot go stale: every flag and subcommand of pi 1.6.0's ``--help``
output, every key of its published settings schema and every environment variable it names is
in the document with a state; the README rows and the tests it cites exist; its counts add up.

The schema is the copy in the package (``scripts/gen_catalogue.py --check`` keeps it equal to
pi's); the ``--help`` output comes from the installed pi 1.6.0 (the interop tests' install),
and those checks are skipped only where pi cannot be installed.
"""

from __future__ import annotations

import functools
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from pitrio.actors.session.resources.settings import SETTINGS_SCHEMA_PATH
from tests.interop.pi_install import find_pi, pi_command
from tests.interop.pi_oneshot import base_env

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "pi-1.6-surface.md"
README = ROOT / "README.md"
STATES = ("same", "documented", "not yet", "n/a")
SUBCOMMANDS_WITH_HELP = ("install", "remove", "uninstall", "update", "list", "config")
SUBCOMMANDS_WITH_HELP += ("auth", "mcp")
_FLAG = re.compile(r"(?<![\w./-])(--?[a-z][a-z0-9-]*)")


def section(heading: str) -> str:
    """The document's text from the ``## heading`` line to the next ``## `` heading."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def tokens(text: str) -> set[str]:
    """The words inside the text's backtick spans (``--name``, ``-n <name>`` give both)."""
    words: set[str] = set()
    for span in re.findall(r"`([^`]+)`", text):
        words.update(word.strip(",[]") for word in span.split())
        words.add(span)
    return words


def schema_keys(node: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Every key of the settings schema, dotted, objects' keys included."""
    for key, value in node.get("properties", {}).items():
        dotted = f"{prefix}.{key}" if prefix else key
        yield dotted
        if value.get("type") == "object" and "properties" in value:
            yield from schema_keys(value, dotted)


# --- what does not need pi ------------------------------------------------------------------


def test_every_settings_key_of_pis_schema_is_listed() -> None:
    schema = orjson.loads(SETTINGS_SCHEMA_PATH.read_bytes())
    listed = tokens(section("settings.json"))
    missing = [key for key in schema_keys(schema) if key not in listed]
    assert not missing, f"settings keys missing from {DOC.name}: {missing}"


def table_rows() -> list[tuple[str, str]]:
    """``(first cell, state)`` of every row of the document's tables that has a state."""
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| ") or line.startswith("|---"):
            continue
        states = re.findall(r"\| \*\*([a-z/ ]+)\*\* \|", line)
        if states:
            rows.append((line.split(" | ")[0], states[0]))
        elif not line.startswith(("| flag ", "| command ", "| key ", "| variable ", "| event ")):
            rows.append((line.split(" | ")[0], ""))
    return rows


def test_every_row_has_a_state_and_the_counts_add_up() -> None:
    rows = table_rows()
    assert len(rows) > 200
    unknown = [first for first, state in rows if state not in STATES]
    assert not unknown, f"rows without a known state: {unknown}"
    counts = {state: sum(1 for _, s in rows if s == state) for state in STATES}
    wanted = (
        f"Counts: same {counts['same']}, documented {counts['documented']}, "
        f"not yet {counts['not yet']}, n/a {counts['n/a']}."
    )
    assert wanted in DOC.read_text(encoding="utf-8")


def test_quoted_readme_rows_and_cited_tests_exist() -> None:
    text = DOC.read_text(encoding="utf-8")
    readme = README.read_text(encoding="utf-8")
    table = readme[readme.index("Documented differences from pi 1.6.0:") :]
    quotes = re.findall(r'README "([^"]+)"', text)
    assert len(quotes) > 10
    missing = [quote for quote in quotes if quote not in table]
    assert not missing, f"README rows {DOC.name} quotes but README does not have: {missing}"
    for cited in set(re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", text)):
        path, name = ROOT / cited[0], cited[1]
        assert path.is_file(), f"{DOC.name} cites {cited[0]}, which does not exist"
        if name:
            source = path.read_text(encoding="utf-8")
            assert re.search(rf"def {name}\(", source), f"{cited[0]} has no {name}"
    for scenario in re.findall(r"`(threshold_\w+)`", text):
        scenarios = (ROOT / "tests/interop/pi_scenarios_runs.py").read_text(encoding="utf-8")
        assert f'"{scenario}"' in scenarios, f"no harness scenario {scenario}"


def test_the_checks_catch_a_missing_entry() -> None:
    # The token reading the checks rest on: a flag inside a longer span still counts, a flag
    # only in prose does not.
    assert {"--name", "-n", "--tools"} <= tokens("| `--name`, `-n <name>` | `--tools`")
    assert "--offline" not in tokens("pitrio has --offline in prose only")


# --- pi's --help ----------------------------------------------------------------------------


@functools.cache
def pi_help(*words: str) -> str:
    """``pi WORDS --help``, run with an empty agent dir (skips when pi cannot run)."""
    _node, cli, why = find_pi()
    if cli is None:
        pytest.skip(why)
    with tempfile.TemporaryDirectory() as root:
        env = base_env(Path(root), Path(root))  # the interop runs' scrubbed environment
        command = [*pi_command(cli), *words, "--help"]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def between(text: str, start: str, end: str) -> str:
    """The part of ``text`` after the line ``start`` and before the line ``end``."""
    return text.split(f"\n{start}\n", 1)[1].split(f"\n{end}\n", 1)[0]


def test_every_flag_of_pi_is_listed() -> None:
    options = between(pi_help(), "Options:", "Examples:")
    flags = {flag for line in options.splitlines() for flag in _FLAG.findall(line[:34])}
    flags.add("--")
    assert {"--export", "--tui-mode", "-nbt", "--offline"} <= flags
    listed = tokens(section("Command line"))
    missing = sorted(flag for flag in flags if flag not in listed)
    assert not missing, f"pi's flags missing from {DOC.name}: {missing}"


def test_every_subcommand_and_its_flags_are_listed() -> None:
    commands = between(pi_help(), "Commands:", "Options:")
    names = re.findall(r"^  pi ([a-z]+) ", commands, re.M)
    assert set(SUBCOMMANDS_WITH_HELP) <= set(names)
    text = section("Subcommands")
    listed = tokens(text)
    missing = [f"pi {name}" for name in names if f"`pi {name}" not in text]
    for name in SUBCOMMANDS_WITH_HELP:
        help_text = pi_help(name)
        if "\nCommands:\n" in help_text:
            inner = between(help_text, "Commands:", "")
            for sub in re.findall(r"^  ([a-z-]+)\b", inner, re.M):
                if f"`pi {name} {sub}" not in text:
                    missing.append(f"pi {name} {sub}")
        missing += [f"pi {name} {flag}" for flag in _FLAG.findall(help_text) if flag not in listed]
    assert not missing, f"pi's subcommands or their flags missing from {DOC.name}: {missing}"


def test_every_environment_variable_pi_names_is_listed() -> None:
    block = between(pi_help(), "Environment Variables:", "Built-in Tool Names:")
    names = set(re.findall(r"^  ([A-Z][A-Z0-9_]+) ", block, re.M))
    _node, cli, _why = find_pi()
    assert cli is not None
    docs = cli.parent.parent / "docs" / "environment-variables.md"
    names |= set(re.findall(r"`([A-Z][A-Z0-9_]+)(?:=[a-z]+)?`", docs.read_text(encoding="utf-8")))
    assert {"PI_CODING_AGENT_DIR", "ANTHROPIC_API_KEY", "PI_SESSION_FILE", "AI_AGENT"} <= names
    listed = tokens(section("Environment variables"))
    missing = sorted(name for name in names if name not in listed)
    assert not missing, f"environment variables missing from {DOC.name}: {missing}"
