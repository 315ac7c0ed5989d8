"""The offline faux models are offered only when nothing else is usable (issue 21, item 5).

They are pitrio's test doubles, which pi does not have: ``get_available_models`` and
``cycle_model`` must not offer them beside a configured model, and cycling must never write
``"defaultProvider": "faux"`` into the user's ``settings.json``. A session still runs on one
named explicitly.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import orjson
import trio

from pitrio.actors.model_router import FAUX_MODELS, RouterConfig, start_model_router
from pitrio.actors.model_router.registry import offered
from tests.transports.rpc.harness import Dirs, rpc_process

VENDOR = {
    "providers": {
        "vendor": {
            "baseUrl": "http://127.0.0.1:9/v1",
            "api": "openai-completions",
            "models": [{"id": "m1"}, {"id": "m2"}],
        }
    }
}


def test_offered_hides_faux_beside_any_other_model() -> None:
    real = attrs.evolve(FAUX_MODELS[0], provider="vendor", id="m1")
    assert offered((*FAUX_MODELS, real)) == (real,)
    assert offered(FAUX_MODELS) == FAUX_MODELS  # nothing else: the faux models
    assert offered(()) == ()


async def test_the_router_offers_faux_models_only_when_nothing_else_is_configured(
    tmp_path: Path,
) -> None:
    bare, configured = tmp_path / "bare", tmp_path / "configured"
    bare.mkdir()
    configured.mkdir()
    (configured / "models.json").write_bytes(orjson.dumps(VENDOR))
    async with trio.open_nursery() as nursery:
        alone = await start_model_router(nursery, config=RouterConfig(agent_dir=bare))
        assert {m.provider for m in await alone.available_models()} == {"faux"}
        beside = await start_model_router(nursery, config=RouterConfig(agent_dir=configured))
        assert [(m.provider, m.id) for m in await beside.available_models()] == [
            ("vendor", "m1"),
            ("vendor", "m2"),
        ]
        # Still registered: a session can name one explicitly.
        assert (await beside.resolve("faux/faux-1")).id == "faux-1"
        nursery.cancel_scope.cancel()


async def test_over_rpc_a_configured_model_hides_faux_and_cycling_saves_nothing(
    tmp_path: Path,
) -> None:
    dirs = Dirs.make(tmp_path, settings={"defaultProvider": "vendor", "defaultModel": "m1"})
    (dirs.agent / "models.json").write_bytes(orjson.dumps(VENDOR))
    async with rpc_process(dirs, model="") as rpc:
        state = await rpc.data({"type": "get_state"})
        assert (state["model"]["provider"], state["model"]["id"]) == ("vendor", "m1")
        models = (await rpc.data({"type": "get_available_models"}))["models"]
        assert [(m["provider"], m["id"]) for m in models] == [("vendor", "m1"), ("vendor", "m2")]
        seen = []
        for _ in range(3):
            cycled = await rpc.data({"type": "cycle_model"})
            seen.append((cycled["model"]["provider"], cycled["model"]["id"]))
        await rpc.close_stdin()
        assert await rpc.wait_exit() == 0, rpc.stderr.decode()
    assert seen == [("vendor", "m2"), ("vendor", "m1"), ("vendor", "m2")]
    saved = orjson.loads((dirs.agent / "settings.json").read_bytes())
    # pi 1.6.0: a model chosen over RPC is the session's, never written to the settings.
    assert saved == {"defaultProvider": "vendor", "defaultModel": "m1"}


async def test_without_a_saved_model_a_session_starts_on_the_first_configured_one(
    tmp_path: Path,
) -> None:
    """pi 0.73.1 with this models.json and no settings starts on vendor/m1 (checked)."""
    dirs = Dirs.make(tmp_path, settings={})
    (dirs.agent / "models.json").write_bytes(orjson.dumps(VENDOR))
    async with rpc_process(dirs, model="") as rpc:
        state = await rpc.data({"type": "get_state"})
        await rpc.close_stdin()
        assert await rpc.wait_exit() == 0, rpc.stderr.decode()
    assert (state["model"]["provider"], state["model"]["id"]) == ("vendor", "m1")


async def test_without_any_configured_model_the_offline_default_remains(tmp_path: Path) -> None:
    dirs = Dirs.make(tmp_path, settings={})
    async with rpc_process(dirs, model="") as rpc:
        state = await rpc.data({"type": "get_state"})
        await rpc.close_stdin()
        assert await rpc.wait_exit() == 0, rpc.stderr.decode()
    assert (state["model"]["provider"], state["model"]["id"]) == ("faux", "echo")
