"""``--export FILE [OUTPUT]`` against real pi 1.6.0: the same answer for the same files.

Each case runs both agents in a sandbox of its own on a copy of a session file pi 1.6.0 wrote
(the shared fixture), and compares what a script sees: the exit code, the first line of
standard output or error, and that the page was written where that line says. The pages
themselves are each agent's own (README: documented differences).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.interop.pi_install import find_pi
from tests.interop.pi_oneshot import base_env, pi_argv, pitrio_argv
from tests.shared_dir import find_shared_dir

_NODE, _CLI, WHY = find_pi()
SESSION = find_shared_dir() / "fixtures" / "pi16" / "pi160.session.jsonl"
NAME = "s.jsonl"

# (case id, the words after --export, a file to put in the sandbox as in.jsonl, expected
# (exit code, the line each prints, with {work} for the sandbox's folder), the file written)
CASES = [
    ("derived name", [NAME], None, (0, "Exported to: {page}"), "{page}"),
    ("given name", [NAME, "out.html"], None, (0, "Exported to: out.html"), "out.html"),
    (
        "later words are no prompt",
        [NAME, "o.html", "-p", "hi"],
        None,
        (0, "Exported to: o.html"),
        "o.html",
    ),
    ("missing file", ["nope.jsonl"], None, (1, "Error: File not found: {work}/nope.jsonl"), None),
    (
        "not a session",
        ["in.jsonl"],
        b"garbage\n",
        (1, "Error: Session file is not a valid pi session: {work}/in.jsonl"),
        None,
    ),
    ("empty file", ["in.jsonl"], b"", (0, "Exported to: {page_in}"), "{page_in}"),
]


def run(agent: str, root: Path, words: list[str], extra: bytes | None) -> tuple[int, str, Path]:
    """One agent's run in a fresh folder; its exit code, first output line, and the folder."""
    work = root / agent / "work"
    agent_dir = root / agent / "agent"
    work.mkdir(parents=True)
    agent_dir.mkdir()
    shutil.copyfile(SESSION, work / NAME)
    if extra is not None:
        (work / "in.jsonl").write_bytes(extra)
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    done = subprocess.run(
        [*argv, "--export", *words],
        cwd=work,
        env=base_env(root / agent, agent_dir),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return done.returncode, lines[0] if lines else "", work


@pytest.mark.skipif(_CLI is None, reason=WHY)
@pytest.mark.parametrize(
    ("words", "extra", "expect", "written"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_export_answers_as_pi(
    tmp_path: Path,
    words: list[str],
    extra: bytes | None,
    expect: tuple[int, str],
    written: str | None,
) -> None:
    for agent, prefix in (("pi", "pi-session-"), ("pitrio", "pitrio-session-")):
        code, line, work = run(agent, tmp_path, words, extra)
        names = {"work": str(work), "page": f"{prefix}s.html", "page_in": f"{prefix}in.html"}
        assert (code, line) == (expect[0], expect[1].format(**names)), agent
        if written is None:
            assert not list(work.glob("*.html")), agent
        else:
            page = (work / written.format(**names)).read_text()
            assert page.lstrip().lower().startswith("<!doctype html>"), agent
            if extra is None and agent == "pitrio":  # pi's page holds it base64-encoded
                assert "01a24378-e11c-715a-99bb-e2726c35348e" in page
