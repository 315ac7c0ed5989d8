"""pi 0.73.1 reads the OAuth entries pitrio writes back: a shared agent dir stays shared.

(pi lists a provider with any OAuth entry, expired or not; what this shows is that the file
pitrio rewrote after a refresh is one pi parses, with the entry where pi looks for it.)
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from pitrio.actors.model_router import oauth
from pitrio.actors.model_router.credentials import Credentials
from tests.interop.pi_install import find_pi_cli, pi_command, pi_env
from tests.oauth_server import oauth_vendor

PI_CLI, SKIP_REASON = find_pi_cli()


def pi_list_models(cli: Path, agent: Path, home: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_", "PITRIO_"))}
    env.update(
        HOME=str(home),
        PI_CODING_AGENT_DIR=str(agent),
        PI_OFFLINE="1",
        PI_SKIP_VERSION_CHECK="1",
        PI_TELEMETRY="0",
        **pi_env(),
    )
    done = subprocess.run(
        [*pi_command(cli), "--list-models"],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr  # pi prints the listing on stderr


@pytest.mark.skipif(PI_CLI is None, reason=SKIP_REASON)
async def test_pi_uses_the_copilot_token_pitrio_refreshed(tmp_path: Path) -> None:
    assert PI_CLI is not None
    agent, home = tmp_path / "agent", tmp_path / "home"
    agent.mkdir()
    home.mkdir()
    path = agent / "auth.json"
    # Without a Copilot entry pi lists no Copilot model: the listing below is the file's doing.
    assert "github-copilot" not in pi_list_models(PI_CLI, agent, home)
    stale = {"type": "oauth", "refresh": "gho_x", "access": "old", "expires": 1000}
    path.write_bytes(orjson.dumps({"github-copilot": stale}))
    path.chmod(0o600)
    async with oauth_vendor() as (vendor, base):
        vendor.script(
            "/copilot_internal/v2/token",
            200,
            {"token": "tid=1;proxy-ep=proxy.individual.githubcopilot.com",
             "expires_at": int(time.time()) + 3600},
        )  # fmt: skip
        credentials = Credentials(auth_path=path, env={oauth.TEST_BASE_ENV: base})
        await credentials.api_key("github-copilot")
    listed = pi_list_models(PI_CLI, agent, home)
    assert "github-copilot  claude-haiku-4.5" in listed, (listed, path.read_text())
