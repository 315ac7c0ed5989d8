"""pi's ``@file`` arguments against real pi 1.6.0: the first request's user message, for the
same files, in print mode (the anthropic-messages mock of the one-shot runs)."""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_oneshot import (
    OneShot,
    cleanup,
    outcomes_fixture,
    pi_argv,
    pitrio_argv,
    run_print,
)

SETTINGS = {"defaultProvider": "mock", "defaultModel": "mock-model"}
MODELS = {
    "providers": {
        "mock": {
            "baseUrl": "{base}",
            "api": "anthropic-messages",
            "apiKey": "mock-key",
            "models": [{"id": "mock-model", "reasoning": False, "input": ["text", "image"]}],
        }
    }
}


def png(width: int, height: int) -> bytes:
    """A valid RGB PNG of one colour (so both agents take it as an image)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\x10\x80\xf0" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@dataclass(frozen=True)
class Case:
    """Words of the command line, files of the work dir, and piped input."""

    name: str
    words: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    exit_code: int = 0


CASES = [
    Case("a text file and a message", ["@a.txt", "what is it"], {"a.txt": b"hello file\n"}),
    Case(
        "two files, one empty, BOM stripped",
        ["@a.md", "@empty.txt", "sum up"],
        {"a.md": "\ufeff# Title\nbody".encode(), "empty.txt": b""},
    ),
    Case("a file alone", ["@sub/b.txt"], {"sub/b.txt": b"only the file"}),
    Case("an image", ["@shot.png", "describe"], {"shot.png": png(4, 3)}),
    Case("after --", ["--", "@a.txt", "@x"], {"a.txt": b"A", "x": b"X"}),
    Case("a missing file", ["@nope.txt", "hi"], exit_code=1),
]


def probe(shot: OneShot) -> Any:
    """The first request's last user message content (sandbox path as ROOT), or the error."""
    assert shot.root is not None
    if shot.exit_code != 0:
        return shot.stderr.strip().replace(str(shot.root), "ROOT")
    content = shot.requests[0]["messages"][-1]["content"] if shot.requests else None
    if isinstance(content, list):
        content = [{k: v for k, v in part.items() if k != "cache_control"} for part in content]
    return json.loads(json.dumps(content).replace(str(shot.root), "ROOT"))


def run_case(case: Case, agent: str, base: Path) -> tuple[OneShot, Any]:
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None

    def add_files(_agent_dir: Path, work: Path) -> None:
        for name, data in case.files.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_bytes(data)

    shot = run_print(
        agent,
        argv,
        {"models.json": MODELS, "settings.json": SETTINGS},
        args=["-p", *case.words],
        base=base,
        before=add_files,
    )
    try:
        return shot, probe(shot)
    finally:
        cleanup(shot)


outcomes = outcomes_fixture(CASES, run_case, "pitrio-file-args-")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_file_arguments_make_pis_first_message(
    case: Case, outcomes: dict[tuple[str, str], tuple[OneShot, Any]]
) -> None:
    (pi, pi_value), (mine, my_value) = outcomes[(case.name, "pi")], outcomes[(case.name, "pitrio")]
    assert (pi.exit_code, mine.exit_code) == (case.exit_code, case.exit_code), (
        pi.stderr[-300:],
        mine.stderr[-300:],
    )
    assert my_value == pi_value
    if case.exit_code == 0:
        assert "<file name=" in json.dumps(pi_value)  # the files did reach the message
