"""The terminal chat's own ``/`` commands, without any I/O: a typed line in, the RPC command
to send and how to show its answer out.

pi's terminal UI has built-in commands (``/model``, ``/new``, ``/quit``, ...); the chat has
those of them an RPC command can carry out. Any other ``/`` line goes to the session as a
prompt, where extension commands, prompt templates and ``/skill:name`` are run as in print
mode (and an unknown one reaches the model as text, as in pi).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from pitrio.sdk.store import SessionInfo

Shown = Callable[[Mapping[str, Any]], str]
"""The text shown for a command's response data."""

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "max")


@attrs.frozen
class LocalCommand:
    """What one typed command does: ``request`` is sent (none: nothing to send), ``show``
    renders its response's data; ``text`` is shown at once; ``quit`` ends the chat; ``runs``:
    the session is busy until the response comes (compaction)."""

    request: dict[str, Any] | None = None
    show: Shown | None = None
    text: str = ""
    quit: bool = False
    runs: bool = False
    resume: bool = False
    """Pick a session of this directory and switch to it (:func:`session_rows`)."""
    session_info: bool = False
    """``/session``: the statistics, then the cache warmer's block (:func:`session_text`)."""
    model_query: str | None = None
    """Choose a model among the available ones matching this text (:func:`match_models`)."""
    fork: bool = False
    """``/fork``: pick an earlier prompt, fork the session there (:func:`fork_rows`)."""


def _model(data: Mapping[str, Any]) -> str:
    model = data.get("model") if "model" in data else data
    if not isinstance(model, Mapping):
        return "(no model)"
    return f"{model.get('provider')}/{model.get('id')}"


def model_ref(data: Mapping[str, Any]) -> str:
    """``provider/id`` of the model in ``get_state``'s (or ``set_model``'s) data."""
    return _model(data)


def _state_model(data: Mapping[str, Any]) -> str:
    level = data.get("thinkingLevel")
    return f"model: {_model(data)}" + (f" (thinking {level})" if level else "")


def _stats(data: Mapping[str, Any]) -> str:
    tokens = data.get("tokens") if isinstance(data.get("tokens"), Mapping) else {}
    assert isinstance(tokens, Mapping)
    lines = [
        f"session: {data.get('sessionId')}",
        f"file: {data.get('sessionFile') or '(not saved: --no-session)'}",
        f"messages: {data.get('userMessages', 0)} user, {data.get('assistantMessages', 0)}"
        f" assistant, {data.get('toolCalls', 0)} tool calls",
        f"tokens: {tokens.get('input', 0)} in, {tokens.get('output', 0)} out,"
        f" {tokens.get('cacheRead', 0)} cache read; cost ${float(data.get('cost') or 0):.4f}",
    ]
    return "\n".join(lines)


def _name(data: Mapping[str, Any]) -> str:
    name = data.get("sessionName")
    return f"name: {name}" if name else "the session has no name (/name NAME sets one)"


HELP = """\
/model [text]         show the model, set it (provider/id) or pick one whose name fits
/thinking [level]     show or set the thinking level
/name [name]          show or set the session's name
/session              the session's file, id, messages and tokens
/new                  start a new session
/resume               pick a session of this folder and continue it
/fork                 a new session from an earlier prompt (its text to edit and send)
/clone                a new session with a copy of this one's conversation
/compact [text]       compact the context (text: what the summary should keep)
/quit, /exit          leave (Ctrl-D too)
Other /commands (extensions, prompt templates, /skill:name) go to the session.
Esc or Ctrl-C stops a reply; Ctrl-C when idle leaves."""


CHAT_COMMANDS = (
    "model",
    "thinking",
    "name",
    "session",
    "new",
    "resume",
    "compact",
    "quit",
    "exit",
    "help",
    "fork",
    "clone",
)
"""The chat's own command names, which Tab completes with the session's."""


def _with_commands(data: Mapping[str, Any]) -> str:
    commands = data.get("commands")
    if not isinstance(commands, list) or not commands:
        return HELP
    rows = []
    for command in commands:
        if isinstance(command, Mapping):
            about = command.get("description") or command.get("source") or ""
            rows.append(f"/{command.get('name')}" + (f"  {about}" if about else ""))
    return HELP + "\nThe session's commands:\n" + "\n".join(f"  {row}" for row in rows)


def parse_command(line: str) -> LocalCommand | None:
    """The chat command ``line`` is (``None``: it is not one of the chat's own)."""
    text = line.strip()
    if not text.startswith("/"):
        return None
    name, _, rest = text[1:].partition(" ")
    arg = rest.strip()
    if name in ("quit", "exit"):
        return LocalCommand(quit=True)
    if name == "help":
        return LocalCommand({"type": "get_commands"}, _with_commands)
    if name == "model":
        if not arg:
            return LocalCommand({"type": "get_state"}, _state_model)
        provider, slash, model_id = arg.partition("/")
        if slash and provider and model_id and " " not in arg:
            chosen = {"type": "set_model", "provider": provider, "modelId": model_id}
            return LocalCommand(chosen, lambda data: f"model: {_model(data)}")
        return LocalCommand(model_query=arg)  # a part of a name: pick among those that fit
    if name == "thinking":
        if not arg:
            return LocalCommand({"type": "get_state"}, _state_model)
        if arg not in THINKING_LEVELS:
            return LocalCommand(text=f"Usage: /thinking {'|'.join(THINKING_LEVELS)}")
        level = {"type": "set_thinking_level", "level": arg}
        return LocalCommand(level, lambda data: f"thinking: {arg}")
    if name == "name":
        if not arg:
            return LocalCommand({"type": "get_state"}, _name)
        return LocalCommand({"type": "set_session_name", "name": arg}, lambda _: f"name: {arg}")
    if name == "session":
        return LocalCommand(session_info=True)
    if name == "new":
        return LocalCommand({"type": "new_session"}, _new)
    if name == "resume":
        return LocalCommand(resume=True)
    if name == "fork":
        return LocalCommand(fork=True)
    if name == "clone":
        return LocalCommand({"type": "clone"}, _cloned)
    if name == "compact":
        request: dict[str, Any] = {"type": "compact"}
        if arg:
            request["customInstructions"] = arg
        # The compaction's own frames tell how it went.
        return LocalCommand(request, lambda _: "", runs=True)
    return None


def _new(data: Mapping[str, Any]) -> str:
    if data.get("cancelled"):
        return "(an extension kept the current session)"
    return "(a new session)"


def _cloned(data: Mapping[str, Any]) -> str:
    if data.get("cancelled"):
        return "(an extension kept the current session)"
    return "(cloned: a new session with this conversation)"


PICK_MOST = 20
"""Sessions the picker lists (the newest)."""
TITLE_CHARS = 60


def session_rows(sessions: Sequence[SessionInfo]) -> str:
    """The picker's numbered list: when, how many messages, the name or first prompt."""
    rows = []
    for number, info in enumerate(sessions[:PICK_MOST], 1):
        title = info.name or info.first_message.replace("\n", " ") or "(no messages)"
        if len(title) > TITLE_CHARS:
            title = title[: TITLE_CHARS - 1] + "…"
        stamp = info.modified.astimezone().strftime("%Y-%m-%d %H:%M")
        rows.append(f"  {number}. {stamp}  {info.message_count:3d} msgs  {title}\n")
    return "".join(rows)


def fork_rows(messages: Sequence[Mapping[str, Any]]) -> str:
    """``/fork``'s numbered list of the earlier prompts (``get_fork_messages``), on one line
    each, oldest first, as many as the picker shows (the newest)."""
    rows = []
    for number, message in enumerate(messages[-PICK_MOST:], 1):
        text = str(message.get("text") or "").replace("\n", " ")
        if len(text) > TITLE_CHARS:
            text = text[: TITLE_CHARS - 1] + "…"
        rows.append(f"  {number}. {text}\n")
    return "".join(rows)


def picked(line: str | None, count: int) -> int | str | None:
    """A line typed at the picker: the 0-based index chosen, ``None`` to cancel (an empty
    line, end of input), or the hint to show when it is no choice."""
    text = (line or "").strip().rstrip("\x1b")
    if line is None or line.endswith("\x1b") or not text:
        return None
    if text.isdigit() and 1 <= int(text) <= count:
        return int(text) - 1
    return f"Enter a number from 1 to {count} (Enter: cancel): "


def _subsequence(needle: str, haystack: str) -> bool:
    letters = iter(haystack)
    return all(char in letters for char in needle)


def match_models(models: Sequence[Mapping[str, Any]], query: str) -> list[Mapping[str, Any]]:
    """The models whose ``provider/id`` fits ``query``, best first: the exact reference
    alone; else each word of the query found in the reference or in the model's name, its
    letters in order but not necessarily side by side (``son45`` fits
    ``claude-sonnet-4-5``); those holding the words as typed come first, then the shorter
    references."""
    words = query.lower().split()
    refs = [(f"{m.get('provider')}/{m.get('id')}", m) for m in models]
    exact = [m for ref, m in refs if ref.lower() == query.strip().lower()]
    if exact:
        return exact
    fits = [
        (ref, m)
        for ref, m in refs
        if all(
            _subsequence(word, ref.lower()) or _subsequence(word, str(m.get("name") or "").lower())
            for word in words
        )
    ]
    fits.sort(key=lambda pair: (not all(w in pair[0].lower() for w in words), len(pair[0])))
    return [m for _, m in fits]


def model_rows(models: Sequence[Mapping[str, Any]], current: str | None) -> str:
    """The model picker's numbered list (the current model marked)."""
    rows = []
    for number, model in enumerate(models[:PICK_MOST], 1):
        ref = f"{model.get('provider')}/{model.get('id')}"
        mark = " (current)" if ref == current else ""
        rows.append(f"  {number}. {ref}{mark}\n")
    more = len(models) - PICK_MOST
    if more > 0:
        rows.append(f"  ... and {more} more (type more of the name: /model TEXT)\n")
    return "".join(rows)


def session_text(stats: Mapping[str, Any], warming: Mapping[str, Any] | None) -> str:
    """``/session``: the statistics and, as pi's "Cache Warming" block, the warmer's mode,
    status and (when known) the cost of losing the cache against that of a refresh."""
    text = _stats(stats)
    if not warming:
        return text
    lines = [
        "",
        "Cache Warming",
        f"Mode: {warming.get('mode')}",
        f"Status: {warming.get('status')}",
    ]
    if "missCost" in warming and "warmCost" in warming:
        lines.append(f"Cache miss penalty: ${float(warming['missCost']):.3f}")
        lines.append(f"Refresh cost: ${float(warming['warmCost']):.3f}")
    return text + "\n".join(lines)
