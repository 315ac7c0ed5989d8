"""What a ``pitrio --mode rpc`` start leaves unimported until it is used (issue 38: cold
start): the first ``get_state`` is answered without jsonschema (the schemas of the tools
every session registers are trusted, checked by the tests), the HTTP stack or the providers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

START = """
import json, sys
sys.argv = ["pitrio", "--mode", "rpc"]
from pitrio.transports.cli import main
main()
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""

DEFERRED = ("jsonschema", "referencing", "httpx", "h11", "websockets", "html")


def test_the_first_get_state_imports_none_of_the_deferred_modules(tmp_path: Path) -> None:
    agent, work = tmp_path / "agent", tmp_path / "work"
    agent.mkdir()
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PITRIO_")}
    env["PITRIO_AGENT_DIR"] = str(agent)
    done = subprocess.run(
        [sys.executable, "-c", START],
        input='{"type":"get_state","id":"1"}\n',
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=60,
        check=True,
    )
    answer = json.loads(done.stdout.splitlines()[0])
    assert answer["command"] == "get_state" and answer["success"] is True
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
    assert "pitrio.actors.session.runtime" in loaded  # the session did start
    assert not [m for m in loaded if m.split(".")[0] in DEFERRED]
    assert not [m for m in loaded if ".model_router.providers." in m and m.endswith("_stream")]
