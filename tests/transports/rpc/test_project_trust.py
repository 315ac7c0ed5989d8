"""RPC mode and project trust, as the pi 1.6.0 fixture ``trust_probe.json`` shows: a project's
``settings.json`` is ignored unless the project is trusted (``--approve``, a saved decision,
``defaultProjectTrust: always``), and ``--no-approve`` ignores it whatever else says."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from pitrio.actors.session.resources.trust import save_decisions
from tests.transports.rpc.harness import FIXTURE_SETTINGS, Dirs, rpc_process


def _project(tmp_path: Path, **settings: object) -> Dirs:
    dirs = Dirs.make(tmp_path, settings={**FIXTURE_SETTINGS, **settings})
    (dirs.cwd / ".pitrio").mkdir()
    modes = {"steeringMode": "all", "followUpMode": "all"}
    (dirs.cwd / ".pitrio" / "settings.json").write_text(json.dumps(modes))
    return dirs


async def _modes(dirs: Dirs, *args: str) -> tuple[str, str, str]:
    async with rpc_process(dirs, *args) as rpc:
        state = await rpc.request({"type": "get_state"})
        data = state["data"]
        stderr = rpc.stderr.decode()
    return data["steeringMode"], data["followUpMode"], stderr


@pytest.mark.parametrize(
    ("args", "settings", "saved", "trusted"),
    [
        ((), {}, None, False),
        (("--approve",), {}, None, True),
        (("--no-approve",), {"defaultProjectTrust": "always"}, True, False),
        ((), {"defaultProjectTrust": "always"}, None, True),
        ((), {}, True, True),
        ((), {"defaultProjectTrust": "always"}, False, False),
    ],
)
async def test_rpc_mode_loads_project_settings_only_when_trusted(
    tmp_path: Path,
    args: tuple[str, ...],
    settings: dict[str, object],
    saved: bool | None,
    trusted: bool,
) -> None:
    dirs = _project(tmp_path, **settings)
    if saved is not None:
        save_decisions(dirs.agent, [(str(dirs.cwd), saved)])
    before = (dirs.agent / "trust.json").read_bytes() if saved is not None else None
    steering, follow_up, stderr = await _modes(dirs, *args)
    expected = "all" if trusted else "one-at-a-time"
    assert (steering, follow_up) == (expected, expected), stderr
    # nobody asked, so nothing was saved
    after = (dirs.agent / "trust.json").read_bytes() if saved is not None else None
    assert after == before and (saved is not None or not (dirs.agent / "trust.json").exists())
    # why the files were ignored is said once on stderr, unless --no-approve asked for it
    told = f"Project {dirs.cwd} is not trusted" in stderr
    assert told == (not trusted and "--no-approve" not in args), stderr
    assert orjson.loads((dirs.cwd / ".pitrio" / "settings.json").read_bytes())  # untouched
