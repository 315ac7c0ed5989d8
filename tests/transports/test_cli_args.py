"""The ``pitrio`` command line validates its arguments (issue 24, item 1): real processes,
exit codes and stderr by content; the suggestion policy (:mod:`pitrio.transports.cli_args`)
also on its own."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from pitrio.transports.cli import SUBCOMMAND_ENTRIES
from pitrio.transports.cli_args import PI_VERSION, edit_distance, nearest, subcommand_hint

TIMEOUT = 60


def run(
    tmp_path: Path, *args: str, stdin: bytes = b"", terminal: int | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``python -m pitrio.transports.cli ARGS`` with HOME and the agent dir in ``tmp_path``;
    stdin is a pipe holding ``stdin``, or the ``terminal`` file descriptor."""
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "cwd").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PITRIO_")}
    env.update(HOME=str(tmp_path / "home"), PITRIO_AGENT_DIR=str(tmp_path / "agent"))
    command = [sys.executable, "-m", "pitrio.transports.cli", *args]
    where = {"cwd": tmp_path / "cwd", "env": env, "capture_output": True, "timeout": TIMEOUT}
    if terminal is not None:
        return subprocess.run(command, stdin=terminal, check=False, **where)  # type: ignore[call-overload, no-any-return]
    return subprocess.run(command, input=stdin, check=False, **where)  # type: ignore[call-overload, no-any-return]


def one_error_line(result: subprocess.CompletedProcess[bytes]) -> str:
    """The process failed with exit 1, nothing on stdout, and one line on stderr: that line."""
    assert (result.returncode, result.stdout) == (1, b""), result.stderr
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    return lines[0]


# -- choices and unknown options -------------------------------------------------------------


def test_an_unknown_mode_is_refused_naming_the_choices(tmp_path: Path) -> None:
    line = one_error_line(run(tmp_path, "--mode", "bogus", "-p", "hi"))
    assert line == "Error: argument --mode: invalid value 'bogus' (choose from text, json, rpc)"
    near = one_error_line(run(tmp_path, "--mode", "jsno", "-p", "hi"))
    assert near.endswith("; did you mean json?")


def test_a_thinking_level_typo_suggests_the_level(tmp_path: Path) -> None:
    line = one_error_line(run(tmp_path, "--thinking", "hgih", "-p", "hi"))
    assert line.startswith("Error: argument --thinking: invalid value 'hgih'")
    assert line.endswith("; did you mean high?")


def test_a_mistyped_option_is_blamed_not_the_prompt(tmp_path: Path) -> None:
    line = one_error_line(run(tmp_path, "--modle", "faux/echo", "-p", "hi"))
    assert line == "Error: unknown option --modle; did you mean --model?"
    assert "hi" not in line
    assert one_error_line(run(tmp_path, "--list-model")) == (
        "Error: unknown option --list-model; did you mean --list-models?"
    )
    assert one_error_line(run(tmp_path, "--sesion=x", "-p", "hi")) == (
        "Error: unknown option --sesion; did you mean --session?"
    )


def test_an_unknown_short_option_is_refused(tmp_path: Path) -> None:
    assert one_error_line(run(tmp_path, "-x", "-p", "hi")) == "Error: unknown option -x"


def test_a_missing_value_names_the_option(tmp_path: Path) -> None:
    line = one_error_line(run(tmp_path, "-p", "hi", "--model"))
    assert line == "Error: argument --model: expected one argument"


def test_prompts_may_come_around_options(tmp_path: Path) -> None:
    # Before, a prompt after an option that followed the first prompt was an "unrecognized
    # argument": argparse took the prompts in one run.
    result = run(tmp_path, "--no-session", "-p", "one", "--model", "faux/echo", "two")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"two\n", b"")


# -- conflicting flags -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("--no-tools", "--tools", "read", "-p", "hi"),
            "Error: argument -t/--tools: not allowed with argument -nt/--no-tools",
        ),
        (
            ("--session", "abc", "--continue", "-p", "hi"),
            "Error: argument -c/--continue: not allowed with argument --session",
        ),
        (("--session", "a", "--fork", "x", "hi"), "Error: argument --fork: not allowed with"),
        (
            ("--no-session", "--session", "a", "hi"),
            "Error: --no-session cannot be used with --session",
        ),
        (("--no-session", "-c", "hi"), "Error: --no-session cannot be used with --continue"),
        (("--no-session", "--fork", "x", "hi"), "Error: --no-session cannot be used with --fork"),
        (("--mode", "rpc", "-p"), "Error: -p/--print cannot be used with --mode rpc"),
        (("--mode", "rpc", "hello"), "Error: --mode rpc takes no prompt argument ('hello')"),
        (("--mode", "rpc", "--faux-chunk-delay", "0.1"), "Error: --faux-chunk-delay is for"),
        (("--provider", "anthropic", "-p", "hi"), "Error: --provider requires --model"),
        (("--trace-payloads", "hi"), "Error: --trace-payloads needs --trace FILE"),
        (("--all", "hi"), "Error: --all goes with --list-models"),
        (("--faux-chunk-delay", "-1", "hi"), "Error: --faux-chunk-delay: -1.0 is not a delay"),
    ],
)
def test_conflicting_or_incomplete_flags_are_refused(
    tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    # pi runs each of these, letting one flag win or ignoring one (README, "The command line").
    line = one_error_line(run(tmp_path, *args))
    assert line.startswith(expected), line
    assert not (tmp_path / "agent").exists()


def test_pis_short_aliases(tmp_path: Path) -> None:
    result = run(tmp_path, "-v")
    assert (result.returncode, result.stdout[:7]) == (0, b"pitrio ")
    quiet = run(tmp_path, "-nt", "-ne", "--no-session", "-p", "hi")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, b"hi\n", b"")


def test_rpc_mode_with_a_prompt_argument_writes_no_protocol_line(tmp_path: Path) -> None:
    result = run(tmp_path, "--mode", "rpc", "hello", stdin=b'{"type":"get_state"}\n')
    assert one_error_line(result).startswith("Error: --mode rpc takes no prompt argument")


# -- version, help, no prompt ----------------------------------------------------------------


def test_version(tmp_path: Path) -> None:
    result = run(tmp_path, "--version")
    assert (result.returncode, result.stderr) == (0, b"")
    text = result.stdout.decode()
    assert text.startswith("pitrio ") and text.endswith(f"(compatible with pi {PI_VERSION})\n")
    from importlib import metadata

    assert metadata.version("pitrio") in text


def test_help_lists_every_subcommand_with_one_line(tmp_path: Path) -> None:
    result = run(tmp_path, "--help")
    assert (result.returncode, result.stderr) == (0, b"")
    lines = result.stdout.decode().splitlines()
    for name in SUBCOMMAND_ENTRIES:
        [line] = [line for line in lines if line.startswith(f"  {name} ")]
        assert len(line.split()) > 2, line  # a name and its summary


def test_no_arguments_in_a_terminal_shows_the_help(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    try:
        result = run(tmp_path, terminal=terminal)
    finally:
        os.close(terminal)
        os.close(controller)
    assert (result.returncode, result.stderr) == (0, b"")
    assert result.stdout.startswith(b"usage: pitrio")
    assert b"serve" in result.stdout
    assert not (tmp_path / "agent").exists()


def test_print_mode_without_any_prompt_is_an_error(tmp_path: Path) -> None:
    for args in (("-p",), ()):
        line = one_error_line(run(tmp_path, *args))  # stdin: an empty pipe
        assert line.startswith("Error: no prompt: give one as an argument or pipe it on stdin")
    assert not (tmp_path / "agent").exists()


def test_piped_whitespace_only_is_no_prompt_either(tmp_path: Path) -> None:
    line = one_error_line(run(tmp_path, "-p", stdin=b"  \n\n"))
    assert line.startswith("Error: no prompt")


def test_json_mode_without_a_prompt_keeps_pis_header_only_answer(tmp_path: Path) -> None:
    result = run(tmp_path, "--mode", "json", "--no-session")
    assert (result.returncode, result.stderr) == (0, b"")
    assert result.stdout.startswith(b'{"type":"session"')


# -- a first word that looks like a command --------------------------------------------------


def test_version_as_a_word_is_a_prompt_but_not_silently(tmp_path: Path) -> None:
    result = run(tmp_path, "--no-session", "version")
    assert (result.returncode, result.stdout) == (0, b"version\n")  # pi sends it: so do we
    assert result.stderr == (
        b"Warning: 'version' is sent to the model as a prompt (as pi does); --version is the flag\n"
    )


def test_a_near_subcommand_is_a_prompt_with_a_hint(tmp_path: Path) -> None:
    result = run(tmp_path, "--no-session", "sesions")
    assert (result.returncode, result.stdout) == (0, b"sesions\n")
    assert result.stderr == (
        b"Warning: 'sesions' is sent to the model as a prompt; did you mean pitrio sessions?\n"
    )
    plain = run(tmp_path, "--no-session", "hello")
    assert (plain.returncode, plain.stdout, plain.stderr) == (0, b"hello\n", b"")


# -- the policy on its own -------------------------------------------------------------------


def test_edit_distance_counts_a_swap_as_one_edit() -> None:
    assert edit_distance("--modle", "--model") == 1
    assert edit_distance("--modle", "--mode") == 1
    assert edit_distance("abc", "abc") == 0
    assert edit_distance("", "abc") == 3
    assert edit_distance("kitten", "sitting") == 3


def test_nearest_prefers_the_same_length_on_a_tie() -> None:
    assert nearest("--modle", ["--mode", "--model", "--models"]) == "--model"
    assert nearest("bogus", ["text", "json", "rpc"]) is None
    assert nearest("srve", ["serve", "trace"], max_edits=1) == "serve"


def test_subcommand_hint_leaves_ordinary_prompts_alone() -> None:
    assert subcommand_hint(["explain this code"]) is None
    assert subcommand_hint(["hello"]) is None
    assert subcommand_hint([]) is None
    assert subcommand_hint(["attahc"]) is not None
    assert subcommand_hint(["help"]) is not None
