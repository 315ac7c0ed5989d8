"""Overhead of a tool turn through the tool executor: ``read`` and ``bash "echo hi"``.

Measured as pi's figures are: from ``tool_execution_start`` to ``tool_execution_end`` of one
call (pi 0.73.1 on this machine: about 1 ms for ``read``, 4.6 ms for ``bash echo``). Two
levels are measured:

* ``batch``: the executor's batch (preflight, validation, hooks, body, events) run directly,
  timestamps taken in the event sink;
* ``loop``: a whole agent turn on the faux model, the tool events timed as the loop's
  subscriber receives them (includes the loop's event channel).

Run on demand: ``.venv/bin/python bench/bench_tools.py [--iterations N]``; prints figures.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import trio

from pitrio.actors.agent_loop import AgentLoop, AgentLoopHandle
from pitrio.actors.model_router import FAUX_MODELS, FauxProvider, FauxReply, FauxToolCall
from pitrio.actors.tool_executor import ToolBatch, ToolExecutor, ToolExecutorHandle
from pitrio.messages.agent import AssistantMessage, Usage
from pitrio.messages.content import ToolCall
from pitrio.messages.events import AgentEvent, ToolExecutionEnd, ToolExecutionStart

PI_MS = {"read": 1.0, "bash": 4.6}
CASES: dict[str, dict[str, Any]] = {
    "read": {"path": "hello.txt"},
    "bash": {"command": "echo hi"},
}


def response(name: str, args: dict[str, Any]) -> AssistantMessage:
    """One assistant message calling ``name``."""
    return AssistantMessage(
        content=(ToolCall(id="call_1", name=name, arguments=args),),
        api="faux-api",
        provider="faux",
        model="faux-1",
        usage=Usage(),
        stop_reason="toolUse",
        timestamp=1,
    )


def summary(samples: list[float]) -> str:
    """Median, p95 and mean in milliseconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return (
        f"median {statistics.median(ordered) * 1000:7.3f} ms   p95 {p95 * 1000:7.3f} ms   "
        f"mean {statistics.fmean(ordered) * 1000:7.3f} ms   (n={len(ordered)})"
    )


async def bench_batch(executor: ToolExecutorHandle, name: str, iterations: int) -> list[float]:
    """Time start->end of ``iterations`` single-call batches."""
    tools = await executor.active_tools()
    batch = ToolBatch(assistant_message=response(name, CASES[name]), tools=tools)
    samples: list[float] = []
    started = 0.0

    async def emit(event: AgentEvent) -> None:
        nonlocal started
        if isinstance(event, ToolExecutionStart):
            started = time.perf_counter()
        elif isinstance(event, ToolExecutionEnd):
            assert not event.is_error, event.result
            samples.append(time.perf_counter() - started)

    for _ in range(iterations):
        await executor.run_batch(batch, emit=emit)
    return samples


async def bench_loop(executor: ToolExecutorHandle, name: str, iterations: int) -> list[float]:
    """Time start->end of the tool call in ``iterations`` agent turns on the faux model."""
    model = next(model for model in FAUX_MODELS if model.id == "faux-1")
    replies: list[Any] = []
    for _ in range(iterations):
        replies += [FauxReply(tool_calls=[FauxToolCall(name, CASES[name])]), "done"]
    faux = FauxProvider(replies)
    samples: list[float] = []
    async with trio.open_nursery() as nursery:
        loop = AgentLoopHandle(
            await nursery.start(AgentLoop(stream=faux.stream, tools=executor, model=model).run)
        )
        events = await loop.subscribe(capacity=1024)

        async def watch() -> None:
            started = 0.0
            async for event in events:
                if isinstance(event, ToolExecutionStart):
                    started = time.perf_counter()
                elif isinstance(event, ToolExecutionEnd):
                    samples.append(time.perf_counter() - started)

        nursery.start_soon(watch)
        for _ in range(iterations):
            await loop.prompt("go")
        nursery.cancel_scope.cancel()
    return samples


async def main(iterations: int, warmup: int) -> None:
    """Run every case at both levels and print the figures."""
    with tempfile.TemporaryDirectory() as work:
        await trio.Path(work, "hello.txt").write_text("Hello from the benchmark.\n")
        async with trio.open_nursery() as nursery:
            actor = ToolExecutor(builtin=True, cwd=work)
            executor = ToolExecutorHandle(await nursery.start(actor.run))
            print(f"tool turn overhead, tool_execution_start -> tool_execution_end ({work})")
            for name in CASES:
                await bench_batch(executor, name, warmup)
                batch = await bench_batch(executor, name, iterations)
                loop = await bench_loop(executor, name, max(iterations // 2, 1))
                label = f"{name} ({CASES[name]})"
                print(f"{label}\n  batch: {summary(batch)}\n  loop:  {summary(loop)}")
                print(f"  pi 0.73.1: about {PI_MS[name]} ms")
            await executor.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    arguments = parser.parse_args()
    trio.run(main, arguments.iterations, arguments.warmup)
