"""The core agent loop actor (pi-agent-core's ``Agent``)."""

from pitrio.actors.agent_loop.actor import AgentLoop, AgentLoopHandle, AgentState
from pitrio.actors.agent_loop.hooks import (
    AfterToolCallContext,
    AfterToolCallResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    LoopHooks,
    LoopOptions,
    TurnContext,
)

__all__ = [
    "AfterToolCallContext",
    "AfterToolCallResult",
    "AgentLoop",
    "AgentLoopHandle",
    "AgentState",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "LoopHooks",
    "LoopOptions",
    "TurnContext",
]
