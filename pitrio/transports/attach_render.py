"""What ``pitrio attach`` shows for each frame of the daemon, without any I/O.

:class:`Renderer` turns the frames of a session socket into :class:`Chunk` items (text for
stdout or stderr, not always whole lines: replies stream) and keeps the *live area*: the last
lines of the tools still running, which a terminal redraws in place below the transcript and a
pipe never sees (it gets each tool's output once, when the tool ends). :class:`Style` decides
whether ANSI attributes are used; without them thinking is marked by a prefix instead of dim
text. Everything here is plain computation over dicts, tested on its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

TAIL_LINES = 10
"""How many lines of a tool's output are shown (the last ones)."""
THINKING_PREFIX = "thinking> "
"""What starts each line of thinking when there is no dim attribute to show it."""
SUMMARY_CHARS = 80
"""The longest argument summary of a tool call."""


@attrs.frozen
class Style:
    """How text is decorated: ``color`` (ANSI attributes) and the line width to cut at."""

    color: bool = False
    width: int = 100

    def _sgr(self, code: str, text: str, reset: str) -> str:
        return f"\x1b[{code}m{text}\x1b[{reset}m" if self.color and text else text

    def dim(self, text: str) -> str:
        """Faint text (thinking, notices)."""
        return self._sgr("2", text, "22")

    def red(self, text: str) -> str:
        """An error."""
        return self._sgr("31", text, "39")

    def green(self, text: str) -> str:
        """A success."""
        return self._sgr("32", text, "39")

    def bold(self, text: str) -> str:
        """A question or a heading."""
        return self._sgr("1", text, "22")

    def cut(self, line: str, indent: int = 0) -> str:
        """``line`` (plain text) shortened to fit after ``indent`` columns (a terminal line must
        not wrap: the live area counts lines to redraw them)."""
        room = max(20, self.width - indent - 1)
        return line if len(line) <= room else line[: room - 1] + "…"


def choose_style(*, tty: bool, env: Mapping[str, str], width: int = 100) -> Style:
    """Colour on a terminal unless ``NO_COLOR`` is set (to anything non-empty) or ``TERM=dumb``."""
    color = tty and not env.get("NO_COLOR") and env.get("TERM") != "dumb"
    return Style(color=color, width=width)


@attrs.frozen
class Chunk:
    """Text to write: to stdout, or to stderr when ``err`` (connection state, failures). On a
    terminal, where both share the screen, the shell ends a half-written stdout line first."""

    text: str
    err: bool = False


def tool_summary(name: str, args: Any) -> str:
    """A short account of a tool call's arguments: the command, the path, or compact JSON."""
    if not isinstance(args, dict):
        args = {}
    summary: str
    if name == "bash" and isinstance(args.get("command"), str):
        lines = args["command"].strip().splitlines() or [""]
        summary = lines[0] + (f" (+{len(lines) - 1} lines)" if len(lines) > 1 else "")
    elif isinstance(args.get("path"), str):
        summary = args["path"]
        extra = {k: v for k, v in args.items() if k in ("offset", "limit")}
        if extra:
            summary += " " + " ".join(f"{k}={v}" for k, v in extra.items())
        if isinstance(args.get("content"), str):
            summary += f" ({len(args['content'].splitlines())} lines)"
        if isinstance(args.get("edits"), list):
            summary += f" ({len(args['edits'])} edits)"
    else:
        summary = json.dumps(args, ensure_ascii=False, separators=(",", ":")) if args else ""
    return summary if len(summary) <= SUMMARY_CHARS else summary[: SUMMARY_CHARS - 1] + "…"


def result_text(result: Any) -> str:
    """The text of a tool result (``{content: [...]}``); an image shows as ``[image]``."""
    if not isinstance(result, dict):
        return "" if result is None else str(result)
    parts = []
    for block in result.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") == "image":
            parts.append(f"[image {block.get('mimeType', '')}]".replace(" ]", "]"))
    return "\n".join(parts)


def tail(text: str, limit: int = TAIL_LINES) -> list[str]:
    """The last ``limit`` lines of ``text``, after a "… N more lines" line when some are cut."""
    lines = text.rstrip("\n").splitlines()
    if len(lines) <= limit:
        return lines
    hidden = len(lines) - limit
    return [f"… {hidden} more line{'s' if hidden != 1 else ''}", *lines[-limit:]]


def seconds(ms: Any) -> str:
    """``2000`` → ``2 s``, ``500`` → ``0.5 s``."""
    value = float(ms) / 1000 if isinstance(ms, int | float) else 0.0
    return f"{value:.0f} s" if value == int(value) else f"{value:.1f} s"


@attrs.define
class RunningTool:
    """A tool between its start and its end: what the live area shows of it."""

    name: str
    summary: str
    output: str = ""


@attrs.define
class Renderer:
    """Frames in, chunks out; owns the transcript's position (mid-line or not) and the live area."""

    style: Style = attrs.field(factory=Style)
    at_line_start: bool = True
    in_thinking: bool = False
    running: dict[str, RunningTool] = attrs.field(factory=dict)

    # -- the transcript --------------------------------------------------------------------

    def _text(self, text: str) -> list[Chunk]:
        if not text:
            return []
        self.at_line_start = text.endswith("\n")
        return [Chunk(text)]

    def _line(self, text: str) -> list[Chunk]:
        """``text`` on a line of its own."""
        return [*self.newline(), *self._text(text + "\n")]

    def newline(self) -> list[Chunk]:
        """End the current line when text streamed without one."""
        return [] if self.at_line_start else self._text("\n")

    def note(self, text: str) -> list[Chunk]:
        """A dimmed notice in the transcript."""
        return self._line(self.style.dim(text))

    def _thinking(self, delta: str) -> list[Chunk]:
        if self.style.color:
            chunks = [] if self.in_thinking else self.newline()
            self.in_thinking = True
            if delta:
                chunks.append(Chunk(self.style.dim(delta)))
                self.at_line_start = delta.endswith("\n")
            return chunks
        chunks = [] if self.in_thinking else self.newline()
        self.in_thinking = True
        pieces = delta.split("\n")
        out = []
        for index, piece in enumerate(pieces):
            if index:
                out.append("\n")
                self.at_line_start = True
            if piece:
                if self.at_line_start:
                    out.append(THINKING_PREFIX)
                out.append(piece)
                self.at_line_start = False
        text = "".join(out)
        if text:
            chunks.append(Chunk(text))
            self.at_line_start = text.endswith("\n")
        return chunks

    def _end_thinking(self) -> list[Chunk]:
        if not self.in_thinking:
            return []
        self.in_thinking = False
        return self.newline()

    # -- the live area ---------------------------------------------------------------------

    def live(self) -> list[str]:
        """The lines a terminal keeps redrawn below the transcript: running tools' output."""
        lines: list[str] = []
        label = len(self.running) > 1
        for tool in self.running.values():
            shown = tail(tool.output)
            if not shown:
                continue
            if label:
                lines.append(self.style.cut(f"  {tool.name} {tool.summary}"))
            lines += [self.style.dim(self.style.cut("  " + line)) for line in shown]
        return lines

    # -- frames ----------------------------------------------------------------------------

    def feed(self, frame: Mapping[str, Any]) -> list[Chunk]:
        """What ``frame`` adds to the transcript (dialogs are :mod:`attach_dialogs`' part)."""
        kind = frame.get("type")
        handler = getattr(self, f"_on_{kind}", None)
        if handler is None:
            return []
        chunks: list[Chunk] = handler(frame)
        return chunks

    def _on_attached(self, frame: Mapping[str, Any]) -> list[Chunk]:
        name = frame.get("name")
        label = f"{frame.get('sessionId')}" + (f" “{name}”" if name else "")
        return [Chunk(f"attached to {label} ({frame.get('status', '?')})\n", err=True)]

    def _on_message_update(self, frame: Mapping[str, Any]) -> list[Chunk]:
        update = frame.get("assistantMessageEvent") or {}
        kind = update.get("type")
        if kind == "text_delta":
            return [*self._end_thinking(), *self._text(str(update.get("delta", "")))]
        if kind == "thinking_delta":
            return self._thinking(str(update.get("delta", "")))
        if kind == "thinking_end":
            return self._end_thinking()
        return []

    def _on_message_end(self, frame: Mapping[str, Any]) -> list[Chunk]:
        message = frame.get("message") or {}
        if message.get("role") != "assistant":
            return []
        chunks = [*self._end_thinking(), *self.newline()]
        reason = message.get("stopReason")
        if reason == "error":
            chunks += self._line(self.style.red(f"error: {message.get('errorMessage', '')}"))
        elif reason == "aborted":
            chunks += self.note("(aborted)")
        elif reason == "length":
            chunks += self.note("(the reply stopped at the model's output limit)")
        return chunks

    def _on_tool_execution_start(self, frame: Mapping[str, Any]) -> list[Chunk]:
        name = str(frame.get("toolName", "?"))
        summary = tool_summary(name, frame.get("args"))
        self.running[str(frame.get("toolCallId"))] = RunningTool(name, summary)
        # Cut the plain summary, never a string holding escapes (it could split one).
        summary = self.style.cut(summary, indent=len(name) + 3)
        return self._line(f"⚙ {self.style.bold(name)} {summary}".rstrip())

    def _on_tool_execution_update(self, frame: Mapping[str, Any]) -> list[Chunk]:
        tool = self.running.get(str(frame.get("toolCallId")))
        if tool is not None:
            tool.output = result_text(frame.get("partialResult"))
        return []

    def _on_tool_execution_end(self, frame: Mapping[str, Any]) -> list[Chunk]:
        tool = self.running.pop(str(frame.get("toolCallId")), None)
        name = str(frame.get("toolName", tool.name if tool else "?"))
        summary = tool.summary if tool else ""
        error = bool(frame.get("isError"))
        mark = self.style.red("✗") if error else self.style.green("✓")
        summary = self.style.cut(summary, indent=len(name) + 3 + (8 if error else 0))
        head = f"{mark} {name} {summary}".rstrip()
        body = tail(result_text(frame.get("result")))
        lines = [head + (" " + self.style.red("(error)") if error else "")]
        for line in body or ["(no output)"]:
            text = self.style.cut("  " + line)
            lines.append(self.style.red(text) if error else text)
        return self._line("\n".join(lines))

    def _on_auto_retry_start(self, frame: Mapping[str, Any]) -> list[Chunk]:
        attempt, most = frame.get("attempt"), frame.get("maxAttempts")
        error = frame.get("errorMessage") or "the request failed"
        return self.note(
            f"retrying in {seconds(frame.get('delayMs'))} (attempt {attempt}/{most}): {error}"
        )

    def _on_auto_retry_end(self, frame: Mapping[str, Any]) -> list[Chunk]:
        if frame.get("success"):
            return self.note(f"retry succeeded (attempt {frame.get('attempt')})")
        final = frame.get("finalError") or "the request failed"
        return self._line(self.style.red(f"gave up after {frame.get('attempt')} retries: {final}"))

    def _on_compaction_start(self, frame: Mapping[str, Any]) -> list[Chunk]:
        return self.note(f"compacting the context ({frame.get('reason', 'manual')})…")

    def _on_compaction_end(self, frame: Mapping[str, Any]) -> list[Chunk]:
        if frame.get("aborted"):
            return self.note("compaction aborted")
        if frame.get("errorMessage"):
            return self._line(self.style.red(f"compaction failed: {frame['errorMessage']}"))
        result = frame.get("result") or {}
        before = result.get("tokensBefore") if isinstance(result, dict) else None
        told = f"compacted: {before} tokens summarised" if before else "compacted"
        return self.note(told + ("; retrying" if frame.get("willRetry") else ""))

    def _on_queue_update(self, frame: Mapping[str, Any]) -> list[Chunk]:
        steering, follow = len(frame.get("steering") or []), len(frame.get("followUp") or [])
        if not steering and not follow:
            return []
        return self.note(f"(queued: {steering} steering, {follow} follow-up)")

    def _on_extension_error(self, frame: Mapping[str, Any]) -> list[Chunk]:
        where = frame.get("extensionPath", "?")
        return self._line(self.style.red(f"extension error ({where}): {frame.get('error', '')}"))

    def _on_extension_ui_request(self, frame: Mapping[str, Any]) -> list[Chunk]:
        if frame.get("method") != "notify":
            return []
        level = frame.get("notifyType") or "info"
        text = f"[{level}] {frame.get('message', '')}"
        return self._line(self.style.red(text) if level == "error" else text)

    def _on_response(self, frame: Mapping[str, Any]) -> list[Chunk]:
        if frame.get("success", True):
            return []
        return [Chunk(f"Error: {frame.get('command')}: {frame.get('error')}\n", err=True)]

    def _notice(self, frame: Mapping[str, Any]) -> list[Chunk]:
        reason = frame.get("reason") or frame.get("error") or ""
        told = str(frame.get("type", "")).replace("_", " ")
        return [Chunk(f"({told}{': ' + str(reason) if reason else ''})\n", err=True)]

    _on_session_restarted = _on_session_failed = _on_session_closed = _on_resync = _notice
