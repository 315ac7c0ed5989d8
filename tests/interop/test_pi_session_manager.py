"""pi 1.6.0's own ``SessionManager`` reads the session files pitrio writes, and the other way round.

Each case drives an agent over RPC against the mock LLM (``pi_runner.run_scenario``): tool turns,
a retried 500, an overflow recovered by compaction, a manual compaction, a branch summary with
labels, a fork, an aborted reply. Then ``session_manager_open.mjs`` (node 22 beside pi) opens
every session file it left with pi 1.6.0's ``SessionManager`` (``dist/core/session-manager.js``)
and builds the leaf's context (``buildSessionContext``).

- pitrio writes: pi must open every file, keep every entry, not rewrite it, and build the
  messages pitrio's own ``get_messages`` gave at the end (pitrio's context of the same file).
- pi writes, pitrio continues (``--session`` and one more prompt; the prelude mechanism of the
  harness), and pi opens the result: the same checks. The pi 1.6.0 transcripts of
  ``fixtures/pi16`` are continued the same way.
- pi writes and pi reads: the same comparison for pi itself, which shows that ``get_messages``
  and ``buildSessionContext`` are the same thing in pi (so the comparison is a fair one).

All cases run at once (threads; each agent in its own sandbox), then one node process opens all
the files. ``python -m tests.interop.test_pi_session_manager`` prints each case's differences.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_compare import Diff, deep
from tests.interop.pi_install import find_pi
from tests.interop.pi_runner import Run, run_scenario
from tests.interop.pi_steps import (
    NO_PROVIDER_RETRY,
    PAUSED,
    Cmd,
    Mark,
    Mock,
    Scenario,
    Step,
    WaitEvent,
    cmd,
    error,
    prompt,
    text,
    tool,
)
from tests.shared_dir import FIXTURES

HERE = Path(__file__).parent
SCRIPT = HERE / "session_manager_open.mjs"
NODE, PI_CLI, SKIP_REASON = find_pi()
PI16 = FIXTURES / "pi16"
WORKERS = 6

# A pitrio extension (loaded with -e) reaching what RPC has no command for: labels, and leaving a
# branch with a summary (pi's /tree). `/mark TEXT` labels the leaf; `/back` goes back to the
# first user message, summarising the branch left and labelling the summary.
EXTENSION = """
def setup(api):
    async def mark(args, ctx):
        await api.set_label(await ctx.session_manager.leaf_id(), args or "marked")

    async def back(args, ctx):
        entries = await ctx.session_manager.branch()
        first = next(
            e for e in entries
            if e.type == "message" and getattr(e.message, "role", "") == "user"
        )
        await ctx.navigate_tree(first.id, summarize=True, label="left behind")

    api.register_command("mark", mark, description="label the leaf")
    api.register_command("back", back, description="back to the first prompt, with a summary")
"""
RETRY = {**NO_PROVIDER_RETRY, "retry": {**NO_PROVIDER_RETRY["retry"], "baseDelayMs": 10}}


def _end() -> list[Step]:
    """The steps every case ends with: the context the agent holds and where its file is."""
    return [cmd("get_state"), cmd("get_messages")]


def _tools() -> list[Step]:
    return [
        Mock({"queue": [tool("bash", {"command": "echo hi"}), text("ran it")]}),
        *prompt("run echo"),
        Mock({"queue": [tool("read", {"path": "hello.txt"}), text("read it")]}),
        *prompt("read hello.txt"),
    ]


def _retry() -> list[Step]:
    return [
        *prompt("first"),
        Mock({"queue": [error("server_error"), text("after the retry")]}),
        Cmd({"type": "prompt", "message": "second"}),
        WaitEvent("auto_retry_end"),
        WaitEvent("agent_end", n=1, where=(("willRetry", False),)),
    ]


def _overflow() -> list[Step]:
    return [
        *prompt("first"),
        Mock({"queue": [error("context_length"), text("SUMMARY"), text("after")]}),
        Cmd({"type": "prompt", "message": "second"}),
        WaitEvent("compaction_end"),
        # Both agents end the overflowed attempt with an agent_end whose willRetry is false (it
        # names an auto-retry, not the compaction's retry): the second one ends the retried run.
        # Waiting for the first let get_messages race the retried reply (seen once in CI).
        WaitEvent("agent_end", n=2, where=(("willRetry", False),)),
    ]


def _compaction() -> list[Step]:
    return [
        *prompt("first"),
        *prompt("second"),
        Mock({"queue": [text("SUMMARY")]}),
        cmd("compact"),
        *prompt("third"),
    ]


def _aborted() -> list[Step]:
    return [
        *prompt("first"),
        Mock({"queue": [PAUSED]}),
        Cmd({"type": "prompt", "message": "slow one"}),
        WaitEvent("message_update"),
        cmd("abort"),
        *prompt("after the abort"),
    ]


def _fork() -> list[Step]:
    return [
        *prompt("first"),
        *prompt("second"),
        Mark("first", "get_fork_messages"),
        Cmd({"type": "fork"}, use_mark="first"),
        *prompt("on the fork"),
    ]


def _branch() -> list[Step]:
    return [
        # pi 1.6.0's RPC mode announces no branch summary or label entry: the wait for the
        # two that /back makes needs every entry announced (pitrio's opt-in).
        cmd("set_event_format", entries="all"),
        *prompt("first"),
        *prompt("second"),
        Cmd({"type": "prompt", "message": "/mark second reply"}),
        Mock({"queue": [text("BRANCH SUMMARY")]}),
        Cmd({"type": "prompt", "message": "/back"}),
        WaitEvent("entry_appended", n=2),
        *prompt("another way"),
    ]


@dataclass(frozen=True)
class Case:
    """One session written by ``writer`` (and continued by ``reader`` when it is another)."""

    name: str
    writer: str
    steps: tuple[Step, ...]
    reader: str = ""
    settings: tuple[tuple[str, Any], ...] = ()
    fixture: str = ""

    def scenario(self) -> Scenario:
        """The scenario the last agent runs (the writer's as a prelude when another reads)."""
        settings = dict(self.settings)
        if self.reader and self.reader != self.writer:
            return Scenario(
                self.name,
                [*prompt("continued"), *_end()],
                settings=settings,
                prelude=list(self.steps),
                prelude_agent=self.writer,
            )
        files = {"marks.py": EXTENSION} if self.writer == "pitrio" else {}
        args = ("-e", "marks.py") if self.writer == "pitrio" else ()
        return Scenario(
            self.name, [*self.steps, *_end()], settings=settings, files=files, args=args
        )


KINDS: dict[str, tuple[Step, ...]] = {
    "tools": tuple(_tools()),
    "retry": tuple(_retry()),
    "overflow": tuple(_overflow()),
    "compaction": tuple(_compaction()),
    "fork": tuple(_fork()),
    "aborted": tuple(_aborted()),
}
# pi 1.6.0 compacts nothing in a session shorter than keepRecentTokens (20,000 by default): an
# overflow there is only omitted (context_edit), so the compaction cases keep little.
KEEP_LITTLE = ("compaction", {"keepRecentTokens": 1})
SETTINGS: dict[str, tuple[tuple[str, Any], ...]] = {
    "retry": tuple(RETRY.items()),
    "overflow": (*RETRY.items(), KEEP_LITTLE),
    "compaction": (KEEP_LITTLE,),
}
# pi starts slowly (a second or more of CPU each, several at once on a small machine): pi's
# sessions are one long mixed one and a fork, pitrio's one per kind.
MIXED = (
    *KINDS["tools"],
    *KINDS["retry"],
    *KINDS["aborted"],
    *KINDS["overflow"],
    *KINDS["compaction"],
)
MIXED_SETTINGS = (*RETRY.items(), KEEP_LITTLE)
CASES: list[Case] = [
    *(
        Case(f"pitrio-writes/{k}", "pitrio", s, settings=SETTINGS.get(k, ()))
        for k, s in KINDS.items()
    ),
    Case("pitrio-writes/branch-summary-labels", "pitrio", tuple(_branch())),
    Case("pi-writes-pitrio-continues/mixed", "pi", MIXED, "pitrio", MIXED_SETTINGS),
    Case("pi-writes-pitrio-continues/fork", "pi", KINDS["fork"], "pitrio"),
    # pi's own reading of its own file: shows the comparison is a fair one.
    Case("pi-writes/mixed", "pi", MIXED, settings=MIXED_SETTINGS),
    Case("fixture-pitrio-continues/pi160", "fixture", (), "pitrio", fixture="pi160.session.jsonl"),
    Case(
        "fixture-pitrio-continues/pi160.retry",
        "fixture",
        (),
        "pitrio",
        fixture="pi160.retry.session.jsonl",
    ),
]


@dataclass
class Outcome:
    """What one case left: the agent's run, its final context, its session files."""

    case: Case
    run: Run
    state: dict[str, Any]
    messages: list[Any]
    files: list[Path]


def _response(run: Run, command: str) -> dict[str, Any]:
    """The data of the last successful response to ``command``."""
    for line in reversed(run.lines):
        obj = line.obj
        if (
            isinstance(obj, dict)
            and obj.get("type") == "response"
            and obj.get("command") == command
            and obj.get("success")
        ):
            return dict(obj.get("data") or {})
    return {}


def _fixture_run(case: Case, base: Path) -> Run:
    """pitrio continues a pi 1.6.0 transcript planted in its sandbox's sessions folder."""
    assert PI_CLI is not None
    scenario = Scenario(case.name, [*prompt("continued"), *_end()], resume=str(PI16 / case.fixture))
    return run_scenario("pitrio", scenario, PI_CLI, base)


def run_case(case: Case, base: Path) -> Outcome:
    """Run one case and collect its final context and its files."""
    assert PI_CLI is not None
    if case.writer == "fixture":
        run = _fixture_run(case, base)
    else:
        agent = case.reader or case.writer
        run = run_scenario(agent, case.scenario(), PI_CLI, base)
    agent_dir = Path(run.root) / "agent"
    files = [agent_dir / rel for rel in run.sessions if rel.endswith(".jsonl")]
    return Outcome(
        case,
        run,
        _response(run, "get_state"),
        _response(run, "get_messages").get("messages", []),
        files,
    )


def open_with_pi(files: list[Path], base: Path) -> dict[str, Any]:
    """What pi 1.6.0's SessionManager makes of each file."""
    assert NODE is not None and PI_CLI is not None
    output = base / "opened.json"
    config = {
        "module": str(PI_CLI.parent / "core" / "session-manager.js"),
        "files": [str(f) for f in files],
        "output": str(output),
    }
    done = subprocess.run(
        [str(NODE), str(SCRIPT), json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0 or not output.is_file():
        raise AssertionError(f"the node script failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(output.read_text())
    return result


def problems(outcome: Outcome, opened: dict[str, Any]) -> list[Diff]:
    """Everything wrong with how pi read ``outcome``'s files (empty: nothing)."""
    out: list[Diff] = [Diff("run", f) for f in outcome.run.failures]
    if not outcome.files:
        out.append(Diff("files", "no session file was written"))
    current = outcome.state.get("sessionFile")
    if not current:
        out.append(Diff("get_state", "no sessionFile in the final get_state"))
    elif current not in {str(f) for f in outcome.files}:
        out.append(Diff("get_state", f"the session file {current} is not among those written"))
    for path in outcome.files:
        got = opened.get(str(path), {})
        name = path.name
        if not got.get("ok"):
            out.append(Diff("open", f"{name}: pi cannot open it: {got.get('error', '')[:600]}"))
            continue
        lines = [x for x in path.read_text().splitlines() if x.strip()]
        if got["entries"] != len(lines) - 1:
            out.append(
                Diff("entries", f"{name}: pi kept {got['entries']} of {len(lines) - 1} entries")
            )
        if got["rewritten"]:
            out.append(Diff("rewritten", f"{name}: opening it changed the file"))
        if str(path) == current:
            deep(got["context"]["messages"], outcome.messages, "context", name, out)
    return out


def check_labels(outcome: Outcome, opened: dict[str, Any]) -> list[str]:
    """The labels pi reads in the branch-summary case (the leaf's and the summary's)."""
    labels: list[str] = []
    for path in outcome.files:
        labels.extend(opened.get(str(path), {}).get("labels", {}).values())
    return sorted(labels)


def run_all(base: Path) -> tuple[dict[str, Outcome], dict[str, Any]]:
    """Every case at once, then pi opens every file."""
    with ThreadPoolExecutor(WORKERS) as pool:
        outcomes = dict(
            zip((c.name for c in CASES), pool.map(lambda c: run_case(c, base), CASES), strict=True)
        )
    files = [f for o in outcomes.values() for f in o.files]
    return outcomes, open_with_pi(files, base)


@pytest.fixture(scope="module")
def results() -> Iterator[tuple[dict[str, Outcome], dict[str, Any]]]:
    if PI_CLI is None:
        pytest.skip(SKIP_REASON)
    base = Path(tempfile.mkdtemp(prefix="pitrio-sessionmanager-"))
    try:
        yield run_all(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_pi_session_manager_reads(
    name: str, results: tuple[dict[str, Outcome], dict[str, Any]]
) -> None:
    outcomes, opened = results
    found = problems(outcomes[name], opened)
    assert not found, "\n".join(f"{d.path}  |  {d.detail}" for d in found)


def test_the_cases_wrote_what_they_say(results: tuple[dict[str, Outcome], dict[str, Any]]) -> None:
    # Each case really produced its kind of file (as pi reads it), so a pass means something.
    outcomes, opened = results

    def types(name: str) -> list[str]:
        return [t for f in outcomes[name].files for t in opened.get(str(f), {}).get("types", [])]

    def roles(name: str) -> list[Any]:
        return [m.get("role") for m in outcomes[name].messages]

    def stops(name: str) -> list[Any]:
        return [m.get("stopReason") for m in outcomes[name].messages]

    for name in ("pitrio-writes/overflow", "pitrio-writes/compaction", "pi-writes/mixed"):
        assert "compaction" in types(name), name
    assert "context_edit" in types("pi-writes/mixed")
    assert "toolResult" in roles("pitrio-writes/tools")
    assert "aborted" in stops("pitrio-writes/aborted")
    assert len(outcomes["pitrio-writes/fork"].files) == 2
    assert "branch_summary" in types("pitrio-writes/branch-summary-labels")
    labels = check_labels(outcomes["pitrio-writes/branch-summary-labels"], opened)
    assert labels == ["left behind", "second reply"]


def main() -> int:
    """Run every case and print what pi made of each."""
    if PI_CLI is None:
        print(SKIP_REASON)
        return 1
    base = Path(tempfile.mkdtemp(prefix="pitrio-sessionmanager-"))
    try:
        outcomes, opened = run_all(base)
        for name, outcome in outcomes.items():
            found = problems(outcome, opened)
            print(f"== {name}: {'ok' if not found else f'{len(found)} problem(s)'}")
            for d in found[:12]:
                print(f"   {d.path}  |  {d.detail[:400]}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
