"""pi 1.6.0's ``compaction.modelOverrides``: per-model ``reserveTokens``/``keepRecentTokens``
keyed by the exact ``provider/modelId``, each resolving on its own (override, ordinary
setting, default), the two settings files merged before the lookup."""

from __future__ import annotations

from pathlib import Path

import attrs
import orjson
import pytest

import pitrio
from pitrio.actors.model_router import FauxProvider, FauxReply
from pitrio.actors.model_router.usage import make_usage
from pitrio.actors.session.resources.settings import load_settings
from pitrio.actors.supervisor.compaction import (
    CompactionCheck,
    CompactionSettings,
    CompactNow,
    NoCompaction,
    auto_compaction_decision,
)
from pitrio.actors.supervisor.compaction_measure import ModelOverride
from pitrio.actors.supervisor.decisions import RunEnded, SupervisorState, decide_after_run
from pitrio.messages.agent import CompactionSummaryMessage
from tests.actors.test_supervisor_support import assistant, usage

OVERRIDES = {
    "reserveTokens": 1000,
    "keepRecentTokens": 500,
    "modelOverrides": {
        "big/model-1m": {"reserveTokens": 400_000},
        "small/model": {"keepRecentTokens": 0},
        "org/family/model.v2": {"reserveTokens": 7, "keepRecentTokens": 8},
    },
}


def test_each_value_resolves_on_its_own() -> None:
    settings = CompactionSettings.from_json(OVERRIDES)
    big = settings.for_model("big/model-1m")
    assert (big.reserve_tokens, big.keep_recent_tokens) == (400_000, 500)
    small = settings.for_model("small/model")
    assert (small.reserve_tokens, small.keep_recent_tokens) == (1000, 0)  # 0 is a value
    slashes = settings.for_model("org/family/model.v2")  # slashes in the model id
    assert (slashes.reserve_tokens, slashes.keep_recent_tokens) == (7, 8)
    # Exact and case-sensitive; no entry: the ordinary values, the very same object.
    assert settings.for_model("Big/model-1m") is settings
    assert settings.for_model("big/model") is settings
    assert settings.for_model("") is settings
    # No ordinary value: the override, else the built-in default.
    defaults = CompactionSettings.from_json({"modelOverrides": OVERRIDES["modelOverrides"]})
    big = defaults.for_model("big/model-1m")
    assert (big.reserve_tokens, big.keep_recent_tokens) == (400_000, 20_000)
    assert defaults.for_model("other/x") == CompactionSettings(
        model_overrides=defaults.model_overrides
    )


def test_unusable_entries_are_ignored_by_the_reader() -> None:
    # The settings layer reports and drops these; the reader never trusts them either.
    settings = CompactionSettings.from_json(
        {"modelOverrides": {"a/b": 5, "c/d": {"reserveTokens": -1, "keepRecentTokens": 1.5}}}
    )
    assert settings.model_overrides == (ModelOverride("c/d", None, None),)
    assert settings.for_model("c/d") is settings
    assert CompactionSettings.from_json({"modelOverrides": []}).model_overrides == ()


def test_the_threshold_uses_the_current_models_override() -> None:
    # pi's example: a 1M window with a 400000 reserve compacts above 600K tokens.
    settings = CompactionSettings.from_json(OVERRIDES)
    message = assistant("x", use=usage(total=600_001))

    def check(ref: str, tokens: int) -> CompactionCheck:
        reply = assistant("x", use=usage(total=tokens))
        return CompactionCheck(
            message=reply, context_window=1_000_000, same_model=True, settings=settings,
            model_ref=ref,
        )  # fmt: skip

    assert auto_compaction_decision(check("big/model-1m", 600_000)) == NoCompaction()
    assert auto_compaction_decision(check("big/model-1m", 600_001)) == CompactNow(
        reason="threshold", will_retry=False, tokens=600_001
    )
    # Other models keep the ordinary reserve: compaction above 999000.
    assert auto_compaction_decision(check("other/x", 999_000)) == NoCompaction()
    assert isinstance(auto_compaction_decision(check("other/x", 999_001)), CompactNow)
    # After a run, the same through the post-run decision.
    run = RunEnded(
        last_assistant=message, abort_requested=False, has_queued_messages=False,
        context_window=1_000_000, same_model=True, compaction_settings=settings,
        model_ref="big/model-1m",
    )  # fmt: skip
    decision = decide_after_run(SupervisorState(), run)
    assert decision.action.__class__.__name__ == "Compact"
    unmatched = decide_after_run(SupervisorState(), attrs.evolve(run, model_ref="x/y"))
    assert unmatched.action.__class__.__name__ != "Compact"


def test_user_and_project_entries_merge_before_the_lookup(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "settings.json").write_bytes(
        orjson.dumps(
            {
                "compaction": {
                    "reserveTokens": 100,
                    "modelOverrides": {
                        "a/b": {"reserveTokens": 1, "keepRecentTokens": 2},
                        "c/d": {"reserveTokens": 3},
                    },
                }
            }
        )
    )
    project = tmp_path / "proj"
    (project / ".pitrio").mkdir(parents=True)
    (project / ".pitrio" / "settings.json").write_bytes(
        orjson.dumps({"compaction": {"modelOverrides": {"a/b": {"keepRecentTokens": 9}}}})
    )
    settings = load_settings(agent, str(project)).compaction
    ab = settings.for_model("a/b")
    assert (ab.reserve_tokens, ab.keep_recent_tokens) == (1, 9)  # field by field
    cd = settings.for_model("c/d")
    assert (cd.reserve_tokens, cd.keep_recent_tokens) == (3, 20_000)
    assert settings.for_model("e/f").reserve_tokens == 100


@pytest.mark.parametrize("ref, compacts", [("faux/faux-small", True), ("faux/FAUX-small", False)])
async def test_a_session_compacts_at_its_models_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ref: str, compacts: bool
) -> None:
    """faux-small's window is 20000: the default 16384 reserve compacts above 3616 tokens,
    the override's 17500 above 2500; its keepRecentTokens 10 lets the first turn be cut."""
    agent = tmp_path / "agent"
    agent.mkdir()
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    override = {"reserveTokens": 17_500, "keepRecentTokens": 10}
    (agent / "settings.json").write_bytes(
        orjson.dumps({"compaction": {"modelOverrides": {ref: override}}})
    )
    faux = FauxProvider(
        [
            FauxReply(text="first answer", usage=make_usage(input=500, output=10)),
            FauxReply(text="second answer", usage=make_usage(input=3000, output=10)),
            "## Goal\nAnswer twice.",  # the compaction's summary request
        ]
    )
    async with pitrio.create_session(
        cwd=str(tmp_path), model="faux/faux-small", faux=faux, session_dir=str(tmp_path / "s")
    ) as session:
        await session.prompt("first question")
        await session.wait_for_idle()
        await session.prompt("second question")
        await session.wait_for_idle()
        messages = await session.messages()
    summarized = any(isinstance(m, CompactionSummaryMessage) for m in messages)
    assert summarized is compacts
    assert len(faux.requests) == (3 if compacts else 2)
