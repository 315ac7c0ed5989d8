"""The scenarios shipped with pitrio (``pitrio explore --list``): races pi's users reported.

Each scenario's model is the faux provider with a script; its tools run in-process and take
mock time, so a step the seed places "somewhere in the next few seconds" can land before,
inside or after a tool batch, a stream, a retry back-off or a compaction.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

from pitrio.actors.explore.scenario import Op, Scenario, Step
from pitrio.actors.model_router import FauxProvider, FauxReply
from pitrio.actors.model_router.providers.faux import FauxToolCall
from pitrio.actors.model_router.providers.faux_rules import FixtureRules
from pitrio.actors.tool_executor import AgentTool
from pitrio.actors.tool_executor.tool import UpdateFn, text_result
from pitrio.messages.agent import AgentToolResult

SUMMARY = "## Goal\nthe summary"
RETRY = {"retry": {"maxRetries": 2, "baseDelayMs": 2000}}
UNAVAILABLE = "503 Service Unavailable"


async def _slow(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
    """Two seconds of (mock) work with an update in the middle."""
    await trio.sleep(1)
    await on_update(text_result("half way"))
    await trio.sleep(1)
    return text_result(f"slow {args.get('n', 0)} done")


def slow_tools() -> Sequence[AgentTool]:
    """One tool, ``slow``, that takes two seconds."""
    return (AgentTool(name="slow", execute=_slow),)


def _calls(count: int) -> FauxReply:
    return FauxReply(tool_calls=[FauxToolCall("slow", {"n": n}) for n in range(count)])


def _stream(text: str) -> FauxReply:
    """A reply that streams for a few seconds (so steps can land inside it)."""
    return FauxReply(text=text, chunk_delay=0.5, chunk_size=4)


def _model(*replies: FauxReply | str) -> Any:
    return lambda: FauxProvider(list(replies))


def _interrupted(name: str, description: str, step: Step, **fields: Any) -> Scenario:
    """A prompt, ``step`` racing its run, then a prompt once ``step`` was answered."""
    steps = (Step(op="prompt", text="go"), step, Step(op="prompt", text="again", after_step=1))
    return Scenario(name=name, description=description, steps=steps, **fields)


def _dying_server(die: Callable[[], Awaitable[None]]) -> Any:
    """An MCP server with ``work`` (a second of work) and ``die`` (the process crashes a
    moment into the call, its pipe closing under the caller)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("flaky")

    @server.tool()
    async def work(n: int) -> str:
        """A second of work."""
        await trio.sleep(1)
        return f"worked {n}"

    @server.tool()
    async def crash() -> str:
        """Half a second in, the server dies."""
        await trio.sleep(0.5)
        await die()
        await trio.sleep(60)
        return "not reached"

    return server


def _during_second_run(name: str, description: str, op: Op, then_after: int) -> Scenario:
    """Two prompts; ``op`` lands while the second one's reply streams; a third prompt once
    step ``then_after`` was answered."""
    return Scenario(
        name=name,
        description=description,
        model=_model("first", _stream("streaming answer"), "third"),
        steps=(
            Step(op="prompt", text="first"),
            Step(op="prompt", text="second", after_step=0),
            Step(op=op, after="agent_start", nth=2, jitter=20, spread=3),
            Step(op="prompt", text="third", after_step=then_after),
        ),
    )


_SCRIPTED: tuple[Scenario, ...] = (
    _interrupted(
        "abort-tool-batch",
        "abort while a batch of three tool calls runs, then prompt again",
        Step(op="abort", after="tool_execution_start", jitter=30, spread=3),
        model=_model(_calls(3), "after the tools", "second answer"),
        tools=slow_tools,
    ),
    Scenario(
        name="abort-right-after-prompt",
        description="a prompt and an abort sent together (Esc right after Enter)",
        model=_model(_stream("a streamed answer"), "next"),
        steps=(
            Step(op="prompt", text="go", jitter=10),
            Step(op="abort", jitter=10),
            Step(op="prompt", text="again", after_step=1),
        ),
    ),
    _interrupted(
        "abort-retry-backoff",
        "abort during the back-off before a retry",
        Step(op="abort", after="auto_retry_start", jitter=20, spread=3),
        model=_model(FauxReply(error=UNAVAILABLE), "recovered", "next"),
        settings=RETRY,
    ),
    Scenario(
        name="abort-compaction",
        description="abort a manual compaction while its summary streams",
        model=_model("first answer", _stream(SUMMARY), "after"),
        steps=(
            Step(op="prompt", text="hello"),
            Step(op="compact", after_step=0),
            Step(op="abort", after="compaction_start", jitter=20, spread=4),
            Step(op="prompt", text="after", after_step=1),
        ),
    ),
    Scenario(
        name="abort-branch-summary",
        description="abort while a branch summary (navigate with summarize) streams",
        model=_model("one", "two", _stream(SUMMARY), "after"),
        steps=(
            Step(op="prompt", text="first"),
            Step(op="prompt", text="second", after_step=0),
            Step(op="navigate", after_step=1),
            Step(op="abort", after_step=1, jitter=40, spread=4),
        ),
    ),
    Scenario(
        name="steer-follow-up-during-retry",
        description="a steer and a follow-up sent while a failed request waits to be retried",
        model=_model(FauxReply(error=UNAVAILABLE), "recovered", "steered", "followed", "more"),
        settings=RETRY,
        steps=(
            Step(op="prompt", text="fails once"),
            Step(op="steer", text="steer", after="auto_retry_start", jitter=20, spread=3),
            Step(op="follow_up", text="follow", after="auto_retry_start", jitter=20, spread=3),
        ),
    ),
    Scenario(
        name="prompt-at-settle",
        description="a prompt sent the moment the run ends (agent_end / agent_settled)",
        model=_model(_calls(1), "first", "second", "third"),
        tools=slow_tools,
        steps=(
            Step(op="prompt", text="first"),
            Step(op="prompt", text="at the end", after="agent_end", jitter=15),
            Step(op="prompt", text="at settle", after="agent_settled", jitter=5),
        ),
    ),
    Scenario(
        name="prompt-during-threshold-compaction",
        description="a prompt sent while the compaction after a long turn runs",
        model=_model("hi", "big answer", _stream(SUMMARY), "answer", "more"),
        model_id="faux/faux-small",
        settings={"compaction": {"keepRecentTokens": 60, "reserveTokens": 18_500}},
        steps=(
            Step(op="prompt", text="hello"),
            Step(op="prompt", text="x " * 4_000, after_step=0),
            Step(op="prompt", text="during", after="compaction_start", jitter=20, spread=3),
        ),
    ),
    _interrupted(
        "mcp-server-dies-mid-call",
        "an MCP server dies during one of two parallel calls; an abort races it",
        Step(op="abort", after="tool_execution_start", jitter=30, spread=1.5),
        model=_model(
            FauxReply(
                tool_calls=[
                    FauxToolCall("mcp__flaky__work", {"n": 1}),
                    FauxToolCall("mcp__flaky__crash", {}),
                ]
            ),
            "after the crash",
            FauxReply(tool_calls=[FauxToolCall("mcp__flaky__work", {"n": 2})]),
            "after the restart",
        ),
        mcp_servers={"flaky": _dying_server},
    ),
    _interrupted(
        "new-session-during-run",
        "new_session while tools run, then a prompt in the new session",
        Step(op="new_session", after="tool_execution_start", jitter=20, spread=2),
        model=_model(_calls(2), "done", "fresh"),
        tools=slow_tools,
    ),
    Scenario(
        name="switch-session-during-run",
        description="switch_session back to the first file while a later run streams",
        model=_model("first", _stream("a long streamed answer"), "back"),
        steps=(
            Step(op="prompt", text="first"),
            Step(op="new_session", after_step=0),
            Step(op="prompt", text="streams", after_step=1),
            Step(op="switch_session", after="agent_start", nth=2, jitter=20, spread=3),
            Step(op="prompt", text="back", after_step=3),
        ),
    ),
    _during_second_run(
        "fork-during-run", "fork from the last user message while a reply streams", "fork", 2
    ),
    Scenario(
        name="two-clients",
        description="two clients of one session: prompts, a steer and an abort at once",
        model=_model(_calls(2), "one", "two", "three", "four", "five"),
        tools=slow_tools,
        steps=(
            Step(op="prompt", text="client A", jitter=5),
            Step(op="prompt", text="client B", jitter=5, behavior="followUp"),
            Step(op="steer", text="B steers", after="agent_start", jitter=30, spread=2),
            Step(op="abort", after="tool_execution_end", jitter=30, spread=2),
            Step(op="prompt", text="A again", after_step=3),
        ),
    ),
    _during_second_run(
        "foreign-append-during-run",
        "another writer appends to the session file while a run streams",
        "foreign_append",
        1,
    ),
)


TRIGGERS = (
    "agent_start",
    "message_update",
    "tool_execution_start",
    "tool_execution_end",
    "agent_end",
    "agent_settled",
    "auto_retry_start",
    "compaction_start",
)
PROMPTS = (
    "hello",
    "FAILONCE try this",
    "<<slow {}>> work",
    'PARALLEL <<slow {"n": 1}>> <<slow {"n": 2}>> both',
    "SLOW tell me a lot",
)
OPS: tuple[Op, ...] = (
    "prompt",
    "prompt",
    "steer",
    "follow_up",
    "abort",
    "abort",
    "compact",
    "navigate",
    "abort_retry",
    "new_session",
    "fork",
)


WIDE_OPS: tuple[Op, ...] = (*OPS, "foreign_append", "switch_session", "compact", "abort")
"""``random-clients-wide`` adds a second writer and switching back to the first file."""


def random_client(rng: random.Random, count: int = 6, ops: Sequence[Op] = OPS) -> list[Step]:
    """A prompt, then ``count`` commands the seed picks among ``ops``, each placed after an
    event or an earlier step's answer the seed picks."""
    steps = [Step(op="prompt", text=rng.choice(PROMPTS))]
    for index in range(count):
        op = rng.choice(ops)
        behavior = rng.choice((None, "steer", "followUp")) if op == "prompt" else None
        waits_for_step = rng.random() < 0.3
        steps.append(
            Step(
                op=op,
                text=rng.choice(PROMPTS) if op in ("prompt", "steer", "follow_up") else "",
                behavior=behavior,
                after=None if waits_for_step else rng.choice(TRIGGERS),
                nth=rng.randint(1, 2),
                after_step=rng.randrange(index + 1) if waits_for_step else None,
                jitter=rng.randint(0, 30),
                spread=rng.choice((0.0, 0.5, 2.0)),
            )
        )
    return steps


RANDOM_CLIENTS = Scenario(
    name="random-clients",
    description="the seed picks seven commands and where each lands (the fixtures' model rules)",
    model=lambda: FauxProvider(default=FixtureRules(), chunk_delay=0.1),
    tools=slow_tools,
    settings={"retry": {"maxRetries": 2, "baseDelayMs": 500}},
    steps=(),
    generate=random_client,
)


RANDOM_CLIENTS_WIDE = attrs.evolve(
    RANDOM_CLIENTS,
    name="random-clients-wide",
    description="nine commands the seed picks, a foreign writer and switch_session among them",
    generate=lambda rng: random_client(rng, 8, WIDE_OPS),
)

CORPUS: tuple[Scenario, ...] = (*_SCRIPTED, RANDOM_CLIENTS, RANDOM_CLIENTS_WIDE)
"""Every shipped scenario (``pitrio explore all``)."""


def scenario_named(name: str) -> Scenario | None:
    """The corpus scenario called ``name``."""
    return next((s for s in CORPUS if s.name == name), None)
