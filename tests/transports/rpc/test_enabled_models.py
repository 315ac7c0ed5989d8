"""pi 1.6.0's ``enabledModels`` setting: the models ``cycle_model`` walks when ``--models``
names none; ``--models`` wins over it."""

from __future__ import annotations

from pathlib import Path

from tests.transports.rpc.harness import Dirs, rpc_process
from tests.transports.rpc.test_process import finish

PATTERNS = ["faux/faux-1", "faux/faux-think:low", "nope/x"]


async def test_cycle_model_walks_the_enabled_models(tmp_path: Path) -> None:
    dirs = Dirs.make(tmp_path, settings={"enabledModels": PATTERNS})
    async with rpc_process(dirs) as rpc:
        walked = [await rpc.data({"type": "cycle_model"}) for _ in range(3)]
        await finish(rpc)
    seen = [(step["model"]["id"], step["thinkingLevel"], step["isScoped"]) for step in walked]
    # The patterns' order, round and round; the one that matches nothing is left out.
    think, plain = ("faux-think", "low", True), ("faux-1", "off", True)
    assert seen == [think, plain, think]
    assert b"enabledModels nope/x" in rpc.stderr  # the pattern that matches nothing, named


async def test_models_flag_wins_over_the_setting(tmp_path: Path) -> None:
    dirs = Dirs.make(tmp_path, settings={"enabledModels": PATTERNS})
    async with rpc_process(dirs, "--models", "faux/faux-1,faux/faux-think:high") as rpc:
        first = await rpc.data({"type": "cycle_model"})
        await finish(rpc)
    assert (first["model"]["id"], first["thinkingLevel"]) == ("faux-think", "high")
    assert b"enabledModels" not in rpc.stderr
