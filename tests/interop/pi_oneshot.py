"""One print-mode run (``-p``) of pi 1.6.0 or pitrio against a loopback vendor.

The configuration and command-line tests compare what each agent sends in its first LLM
request for the same agent directory, environment and flags: each run gets a fresh copy of
the agent directory (so neither sees what the other wrote), a scrubbed environment, and its
own vendor (the harness's :class:`~tests.interop.pi_runner.MockLLM`, which keeps every request
body and, for the native kinds, its headers).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest

from tests.interop.pi_install import find_pi, pi_command, pi_env
from tests.interop.pi_runner import MockLLM
from tests.shared_dir import ROOT

ANTHROPIC = "anthropic-messages"
RUN_TIMEOUT = 150.0
"""Generous: pi starts in ~2 s, but the test machine may be shared with other test runs."""


@dataclass
class OneShot:
    """What one agent did in one print-mode run."""

    agent: str
    exit_code: int
    stdout: str
    stderr: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    http: list[dict[str, Any]] = field(default_factory=list)
    root: Path | None = None

    @property
    def headers(self) -> dict[str, str]:
        """The headers of the first request (lower-case names); empty when none was sent."""
        return dict(self.http[0]["headers"]) if self.http else {}


def pi_argv() -> list[str] | None:
    """How to start real pi 1.6.0 (``None`` when it is not installed)."""
    _node, cli, _reason = find_pi()
    if cli is None:
        return None
    return pi_command(cli)


def pitrio_argv() -> list[str]:
    """How to start this checkout's pitrio."""
    return [str(ROOT / ".venv" / "bin" / "pitrio")]


@dataclass(frozen=True)
class Sandbox:
    """A fresh folder for one agent's run of a command sequence: how to start the agent,
    the folder, its agent dir and the working directory the commands run in."""

    argv: list[str]
    root: Path
    agent_dir: Path
    work: Path


def sandbox(agent: str, base: Path) -> Sandbox:
    """A :class:`Sandbox` under ``base`` for ``agent`` (``pi`` or ``pitrio``)."""
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    root = Path(tempfile.mkdtemp(prefix=f"{agent}-", dir=base))
    (root / "agent").mkdir()
    (root / "work").mkdir()
    return Sandbox(argv=argv, root=root, agent_dir=root / "agent", work=root / "work")


def run_in(
    argv: list[str], cwd: Path, env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """One command of a sandbox's sequence, its output captured as text (never raises for
    a non-zero status: the status is compared)."""
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def base_env(root: Path, agent_dir: Path) -> dict[str, str]:
    """The scrubbed environment of a run (no key of the machine leaks in)."""
    home = root / "home"
    tmp = root / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "PI_CODING_AGENT_DIR": str(agent_dir),
        "PITRIO_AGENT_DIR": str(agent_dir),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
        **pi_env(),
    }


def run_print(
    agent: str,
    argv: list[str],
    files: Mapping[str, Any],
    *,
    args: list[str],
    env: Mapping[str, str] | None = None,
    kind: str = ANTHROPIC,
    base: Path | None = None,
    work_files: Mapping[str, str] | None = None,
    mock_config: dict[str, Any] | None = None,
    before: Callable[[Path, Path], None] | None = None,
    agent_dir_name: str = "agent",
) -> OneShot:
    """Run ``argv + args`` once in a fresh sandbox whose agent dir holds ``files``.

    ``files`` maps a name in the agent dir to its content (a dict is written as JSON; the text
    ``{base}`` in it becomes the vendor's base URL and ``{port}`` its port); ``auth.json`` is
    written with mode 0600 as pi writes it. ``before(agent_dir, work)`` may add more.
    ``agent_dir_name``: the agent dir under the sandbox (``.pi/agent``: pi's layout, where
    pitrio reads a project's ``.pi`` dir too).
    """
    mock = MockLLM(kind)
    if mock_config:
        mock.configure(mock_config)
    root = Path(tempfile.mkdtemp(prefix="oneshot-", dir=base))
    agent_dir, work = root / agent_dir_name, root / "work"
    agent_dir.mkdir(parents=True)
    work.mkdir()
    url = f"http://127.0.0.1:{mock.port}"
    try:
        for name, content in files.items():
            text = content if isinstance(content, str) else json.dumps(content, indent=2)
            text = text.replace("{base}", url).replace("{port}", str(mock.port))
            path = agent_dir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            if name == "auth.json":
                path.chmod(0o600)
        for name, text in (work_files or {}).items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(text)
        if before is not None:
            before(agent_dir, work)
        full_env = {**base_env(root, agent_dir), **(env or {})}
        # Output goes to files, not pipes: node writes to a pipe asynchronously, and pi ends
        # its process with writes still queued when the machine is busy (a long
        # --list-models came out 575 of 1,699 lines under load); a file is written at once.
        out_path, err_path = root / "stdout.txt", root / "stderr.txt"
        try:
            with out_path.open("wb") as out, err_path.open("wb") as err:
                done = subprocess.run(
                    [*argv, *args],
                    cwd=work,
                    env=full_env,
                    input=b"",
                    stdout=out,
                    stderr=err,
                    timeout=RUN_TIMEOUT,
                    check=False,
                )
        except subprocess.TimeoutExpired:
            # One stuck run fails its own case (exit -1), not every case of the module.
            return OneShot(agent, -1, "", f"timed out after {RUN_TIMEOUT:g} s", [], [], root)
        return OneShot(
            agent,
            done.returncode,
            out_path.read_text(errors="replace"),
            err_path.read_text(errors="replace"),
            mock.captured(),
            mock.http(),
            root,
        )
    finally:
        mock.close()


def cleanup(shot: OneShot) -> None:
    """Remove the sandbox of ``shot``."""
    if shot.root is not None:
        shutil.rmtree(shot.root, ignore_errors=True)


class _Named(Protocol):
    @property
    def name(self) -> str: ...


C = TypeVar("C", bound=_Named)
R = TypeVar("R")
AGENTS = ("pi", "pitrio")


@contextmanager
def both_agents(
    cases: Sequence[C], run: Callable[[C, str, Path], R], prefix: str
) -> Iterator[dict[tuple[str, str], R]]:
    """Every case run by pi and by pitrio (``run(case, agent, base)``), four runs at a time,
    keyed by ``(case.name, agent)``; the runs' folder is removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    jobs = [(case, agent) for case in cases for agent in AGENTS]
    try:
        with ThreadPoolExecutor(4) as pool:
            done = pool.map(lambda job: run(job[0], job[1], base), jobs)
            yield {(case.name, agent): out for (case, agent), out in zip(jobs, done, strict=True)}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def pi_outcomes(
    cases: Sequence[C], run: Callable[[C, str, Path], R], prefix: str
) -> Iterator[dict[tuple[str, str], R]]:
    """A module fixture's body: :func:`both_agents` over ``cases``, or the module skipped
    (why) when real pi 1.6.0 cannot be installed."""
    _node, cli, why = find_pi()
    if cli is None:
        pytest.skip(why)
    with both_agents(cases, run, prefix) as done:
        yield done


def outcomes_fixture(cases: Sequence[C], run: Callable[[C, str, Path], R], prefix: str) -> Any:
    """A module-scoped fixture of :func:`pi_outcomes` (``outcomes = outcomes_fixture(...)``)."""

    @pytest.fixture(scope="module")
    def outcomes() -> Iterator[dict[tuple[str, str], R]]:
        yield from pi_outcomes(cases, run, prefix)

    return outcomes
