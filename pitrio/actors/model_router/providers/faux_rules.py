"""The reply rules of the model the pi fixtures were recorded with, as a faux script.

:class:`FixtureRules` is a :data:`~pitrio.actors.model_router.providers.faux.FauxScript`: give
it to a :class:`~pitrio.actors.model_router.providers.faux.FauxProvider` (as ``default``) and
the provider answers like the recording model did (see the fixtures README, "The scripted
model's reply rules"), so pi's RPC transcripts can be replayed. Pure: no trio, no I/O; the only
state is what the rules themselves keep (which user messages already failed once).

Let *u* be the text of the last user-role message and *k* the number of assistant messages
after it. The first matching rule answers: summarisation requests, ``ALWAYSFAIL``,
``FAILONCE``, ``OVERFLOW``, ``<<tool {json}>>`` steps (``PARALLEL`` for one message), ``THINK``,
``SLOW``, a summary as *u*, and otherwise ``You said: ...``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from pitrio.actors.model_router.providers.faux import FauxReply, FauxToolCall
from pitrio.messages.agent import AssistantMessage, ToolResultMessage, UserMessage
from pitrio.messages.content import text_of
from pitrio.messages.convert import BRANCH_SUMMARY_PREFIX, COMPACTION_SUMMARY_PREFIX
from pitrio.messages.model import LlmContext

SUMMARIZER_PROMPT_START = "You are a context summarization assistant"
TRANSIENT_ERROR = "503 Service Unavailable (scripted)"
OVERFLOW_ERROR = "prompt is too long: 250000 tokens > 128000 maximum"
RECOVERED_TEXT = "Recovered after a transient error."
OVERFLOW_RECOVERED_TEXT = "Answer after overflow recovery."
THINK_ANSWER = "Here is my considered answer."
AFTER_SUMMARY_TEXT = "Continuing after the summary."
SLOW_WORDS = 150

# ``<<name {json}>>``; the arguments end at the first "}>>", which JSON values rarely contain.
_STEP = re.compile(r"<<([A-Za-z_][\w-]*)\s+(\{.*?\})>>", re.DOTALL)
_LINE_KINDS = ("[User]:", "[Assistant]:", "[Assistant tool calls]:")


@attrs.frozen
class ToolStep:
    """One ``<<tool {json}>>`` step written in a user message."""

    name: str
    arguments: dict[str, Any]


def js_prefix(text: str, length: int) -> str:
    """The first ``length`` characters of ``text`` as JavaScript counts them (UTF-16 units)."""
    if text.isascii() or len(text.encode("utf-16-le", "surrogatepass")) == 2 * len(text):
        return text[:length]
    units = text.encode("utf-16-le", "surrogatepass")[: 2 * length]
    # A cut through a surrogate pair leaves a lone surrogate, as JavaScript's slice does.
    return units.decode("utf-16-le", errors="surrogatepass")


def js_quote(text: str) -> str:
    """``text`` as JavaScript's ``JSON.stringify`` writes a string."""
    return json.dumps(text, ensure_ascii=False)


def parse_steps(text: str) -> list[ToolStep]:
    """Every ``<<tool {json}>>`` step of ``text``, in order (bad JSON gives empty arguments)."""
    steps: list[ToolStep] = []
    for match in _STEP.finditer(text):
        try:
            arguments = json.loads(match.group(2))
        except ValueError:
            arguments = {}
        steps.append(ToolStep(match.group(1), arguments if isinstance(arguments, dict) else {}))
    return steps


def summary_kind(request_text: str) -> str:
    """Which summary a summarisation request asks for, from the instructions after the data."""
    if "<previous-summary>" in request_text:
        return "Updated compaction summary"
    instructions = request_text.rsplit("</conversation>", 1)[-1]
    if "## Original Request" in instructions:
        return "Turn-prefix summary"
    if "## Critical Context" in instructions:
        return "Compaction summary"
    return "Branch summary"


def count_lines(request_text: str) -> tuple[int, int, int]:
    """``[User]:``, ``[Assistant]:`` and ``[Assistant tool calls]:`` lines of the conversation."""
    start = request_text.find("<conversation>")
    end = request_text.rfind("</conversation>")
    conversation = request_text[start:end] if start != -1 and end != -1 else request_text
    counts = [0, 0, 0]
    for line in conversation.splitlines():
        for index, prefix in enumerate(_LINE_KINDS):
            if line.startswith(prefix):
                counts[index] += 1
    return counts[0], counts[1], counts[2]


def scripted_summary(request_text: str) -> str:
    """The summary text the recording model wrote for a summarisation request."""
    users, assistants, calls = count_lines(request_text)
    return (
        f"## Goal\n{summary_kind(request_text)} (scripted): {users} user, {assistants} assistant, "
        f"{calls} tool-call lines.\n\n## Progress\n### Done\n- [x] scripted work"
    )


def slow_text() -> str:
    """The long answer of the ``SLOW`` rule."""
    return "Slow answer: " + " ".join(f"word{i}" for i in range(1, SLOW_WORDS + 1)) + "."


class FixtureRules:
    """The recording model's reply rules; call it with a request context to get the reply.

    Keeps, per user message (its text and timestamp), how many requests it has seen, which is
    what makes ``FAILONCE`` and ``OVERFLOW`` fail only on the first attempt.
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[str, int], int] = {}

    def __call__(self, context: LlmContext) -> FauxReply:
        """The reply to one request."""
        last_user: UserMessage | None = None
        after = 0
        for message in reversed(context.messages):
            if isinstance(message, UserMessage):
                last_user = message
                break
            if isinstance(message, AssistantMessage):
                after += 1
        u = text_of(last_user.content) if last_user is not None else ""
        key = (u, last_user.timestamp if last_user is not None else 0)
        attempt = self._seen.get(key, 0)
        self._seen[key] = attempt + 1

        if context.system_prompt.startswith(SUMMARIZER_PROMPT_START):
            return FauxReply(text=scripted_summary(u))
        if "ALWAYSFAIL" in u:
            return FauxReply(error=TRANSIENT_ERROR)
        if "FAILONCE" in u:
            return (
                FauxReply(error=TRANSIENT_ERROR) if attempt == 0 else FauxReply(text=RECOVERED_TEXT)
            )
        if "OVERFLOW" in u:
            if attempt == 0:
                return FauxReply(error=OVERFLOW_ERROR)
            return FauxReply(text=OVERFLOW_RECOVERED_TEXT)
        steps = parse_steps(u)
        if steps:
            return self._step_reply(steps, after, "PARALLEL" in u, context)
        if "THINK" in u:
            thought = f"The user asked: {js_prefix(u, 60)}. Consider it step by step."
            return FauxReply(thinking=thought, text=THINK_ANSWER)
        if "SLOW" in u:
            return FauxReply(text=slow_text())
        if u.startswith((COMPACTION_SUMMARY_PREFIX, BRANCH_SUMMARY_PREFIX)):
            return FauxReply(text=AFTER_SUMMARY_TEXT)
        return FauxReply(text=f"You said: {js_prefix(u, 80)}")

    @staticmethod
    def _step_reply(
        steps: list[ToolStep], done: int, parallel: bool, context: LlmContext
    ) -> FauxReply:
        count = len(steps)
        if parallel and done == 0:
            return FauxReply(
                text=f"Running {count} tools in parallel.",
                tool_calls=tuple(FauxToolCall(step.name, step.arguments) for step in steps),
            )
        if not parallel and done < count:
            step = steps[done]
            return FauxReply(
                text=f"Step {done + 1}/{count}: {step.name}.",
                tool_calls=(FauxToolCall(step.name, step.arguments),),
            )
        last_result = ""
        for message in reversed(context.messages):
            if isinstance(message, ToolResultMessage):
                last_result = text_of(message.content)
                break
        return FauxReply(
            text=f"Finished {count} tool step(s). Last result starts: "
            f"{js_quote(js_prefix(last_result, 60))}"
        )
