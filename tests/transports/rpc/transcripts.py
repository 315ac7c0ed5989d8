"""pi's recorded RPC transcripts (shared/fixtures/transcripts): reading, replaying, comparing.

They were recorded with pi 0.73.1; :func:`load` re-anchors them on pi 1.6.0
(:mod:`tests.transports.rpc.transcripts16` says how and on what evidence).

A transcript is ``<name>.in.jsonl`` (the bytes written to pi's stdin), ``<name>.out.jsonl``
(everything pi wrote to stdout) and ``<name>.md`` (pi's command line and, per input line, what
the recorder waited for before writing it). :func:`replay` writes the same input to pitrio after
the same waits; :func:`compare` checks the output line by line after normalising what differs
by nature or by documented design:

* pitrio's seed events (``agent_settled``, ``entry_appended``, ...), ``agent_end.willRetry``
  and ``message_start.queueId`` are removed, and an unknown command's response loses the
  ``id`` pitrio keeps;
* timestamps, usage figures (the faux model's estimates depend on the system prompt),
  ``tokensBefore`` and context-usage figures become placeholders (``null`` stays ``null``);
* session ids, session file paths and entry ids become numbered placeholders, so equal values
  must stay equal and different ones different;
* JSON parser messages (pi's are V8's) are not compared, except pi's empty-line text;
* responses are matched by ``id`` (id-less ones in order): only the order of events is
  deterministic, a response's place among streamed deltas is not. A response must still come
  after the same number of non-delta events as in pi's output. The same holds for a
  ``queue_update`` (a command's echo): it is compared after the deltas that follow it.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson
import trio

from tests.shared_dir import TRANSCRIPTS
from tests.transports.rpc.harness import RpcProcess
from tests.transports.rpc.transcripts16 import re_anchor, without_wording

SEED_TYPES = frozenset(
    {
        "agent_settled",
        "entry_appended",
        "summarization_retry_scheduled",
        "summarization_retry_attempt_start",
        "summarization_retry_finished",
        "bash_execution_update",
    }
)
STREAMING_TYPES = frozenset({"message_update", "tool_execution_update"})
FIXTURE_EXTENSION = Path(__file__).with_name("fixture_extension.py")
"""The fixtures' recording extension, rewritten as a pitrio extension."""

FILE_KEYS = frozenset({"sessionFile", "path", "fullOutputPath", "parentSession", "sessionPath"})
ENTRY_KEYS = frozenset({"firstKeptEntryId", "entryId"})
MAPPED_KEYS = FILE_KEYS | ENTRY_KEYS | {"sessionId"}
EMPTY_LINE_ERROR = "Failed to parse command: Unexpected end of JSON input"
PARSE_ERROR = "Failed to parse command: "


class MissingPiece(AssertionError):
    """The output differs from pi's only where a feature pitrio lacks shows."""


@attrs.frozen
class Step:
    """One input line and what to wait for before writing it."""

    data: bytes
    after_lines: int
    waited_for: str


@attrs.frozen
class Transcript:
    """A recorded exchange with pi."""

    name: str
    args: tuple[str, ...]
    steps: tuple[Step, ...]
    final_wait: str
    output: tuple[dict[str, Any], ...]


def names() -> list[str]:
    """Every transcript in the fixtures."""
    return sorted(p.name[: -len(".in.jsonl")] for p in TRANSCRIPTS.glob("*.in.jsonl"))


_ROW = re.compile(r"^\| (\d+) \| (\d+) \| (.*?) \| ")
_COMMAND = re.compile(r"started as `pi --mode rpc ([^`]*)`")
_FINAL = re.compile(r"After the last input line the recorder waited for: (.*?); then")


def load(name: str) -> Transcript:
    """Read a transcript's three files."""
    md = (TRANSCRIPTS / f"{name}.md").read_text()
    data = (TRANSCRIPTS / f"{name}.in.jsonl").read_bytes()
    inputs = data.split(b"\n")
    assert inputs[-1] == b""
    rows = [_ROW.match(line) for line in md.splitlines()]
    steps = tuple(
        Step(
            data=inputs[int(m.group(1)) - 1] + b"\n",
            after_lines=int(m.group(2)),
            waited_for=m.group(3),
        )
        for m in rows
        if m is not None
    )
    assert len(steps) == len(inputs) - 1
    command = _COMMAND.search(md)
    assert command is not None
    # pi's recording extension -> ours (the same commands; the faux provider is built in).
    words = command.group(1).replace("-e <faux extension>", f"-e {FIXTURE_EXTENSION}").split()
    args: list[str] = []
    while words:  # pi's --provider/--model pair becomes one pattern
        word = words.pop(0)
        if word == "--provider":
            provider = words.pop(0)
            assert words.pop(0) == "--model"
            args += ["--model", f"{provider}/{words.pop(0)}"]
        else:
            args.append(word)
    final = _FINAL.search(md)
    assert final is not None
    recorded = [
        orjson.loads(line) for line in (TRANSCRIPTS / f"{name}.out.jsonl").read_bytes().splitlines()
    ]
    # What pi 1.6.0 writes for the same input; the waits count its lines.
    output, positions = re_anchor(recorded, inputs[:-1])
    steps = tuple(attrs.evolve(step, after_lines=positions[step.after_lines]) for step in steps)
    return Transcript(name, tuple(args), steps, final.group(1), tuple(output))


# -- what pi would have written ------------------------------------------------------------


ASSISTANT_16_KEYS = ("durationMs", "thinkingLevel", "rawStopReason")
"""What pi 1.6.0 adds to an assistant message that the 0.73.1 transcripts lack."""


def _without_16_fields(value: Any) -> Any:
    """``value`` without the fields pi 1.6.0 adds to messages and tool events (the transcripts
    are pi 0.73.1's; the 1.6.0 shapes are tested against pi 1.6.0's own fixtures)."""
    if isinstance(value, list):
        return [_without_16_fields(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {k: _without_16_fields(v) for k, v in value.items()}
    role = out.get("role")
    if role == "assistant":
        for key in ASSISTANT_16_KEYS:
            out.pop(key, None)
    elif role == "toolResult":
        out.pop("durationMs", None)
    if out.get("type") == "tool_execution_end":
        out.pop("durationMs", None)
        result = out.get("result")
        if isinstance(result, dict):
            result.pop("structuredContent", None)
            result.pop("isError", None)
    return out


def pi_view(lines: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """pitrio's output without its documented additions (and pi 1.6.0's fields the 0.73.1
    transcripts lack)."""
    out: list[dict[str, Any]] = []
    for line in lines:
        kind = line.get("type")
        if kind in SEED_TYPES:
            continue
        copy = _without_16_fields(dict(line))
        if kind == "agent_end":
            copy.pop("willRetry", None)
        if kind == "message_start":
            copy.pop("queueId", None)
        if kind == "response" and str(copy.get("error", "")).startswith("Unknown command: "):
            copy.pop("id", None)
        out.append(copy)
    return out


# -- waits and input mapping ---------------------------------------------------------------


def _condition(
    step_wait: str, count: int, recorded: Sequence[Mapping[str, Any]]
) -> Callable[[list[dict[str, Any]]], bool]:
    """The recorder's wait as a predicate over pitrio's (pi-view) output."""
    match = re.match(r"response id=(\S+)", step_wait)
    wanted_id = match.group(1) if match else None
    event = re.match(r"event (\S+)", step_wait)
    wanted_events = 0
    if event:
        wanted_events = sum(1 for line in recorded[:count] if line.get("type") == event.group(1))

    def holds(lines: list[dict[str, Any]]) -> bool:
        view = pi_view(lines)
        if len(view) < count:
            return False
        if wanted_id is not None and not any(
            line.get("type") == "response" and line.get("id") == wanted_id for line in view
        ):
            return False
        if event is not None:
            seen = sum(1 for line in view if line.get("type") == event.group(1))
            return seen >= wanted_events
        return True

    return holds


def _pair_values(recorded: Any, ours: Any, key: str | None, into: dict[str, str]) -> None:
    if isinstance(recorded, dict) and isinstance(ours, dict):
        for k, v in recorded.items():
            if k in ours:
                _pair_values(v, ours[k], k, into)
    elif isinstance(recorded, list) and isinstance(ours, list):
        for a, b in zip(recorded, ours, strict=False):
            _pair_values(a, b, key, into)
    elif key in MAPPED_KEYS and isinstance(recorded, str) and isinstance(ours, str):
        into[recorded] = ours


def value_map(
    recorded: Sequence[Mapping[str, Any]], ours: Sequence[Mapping[str, Any]]
) -> dict[str, str]:
    """pi's ids and paths -> pitrio's, from the responses both wrote for the same ids."""
    by_id = {line["id"]: line for line in ours if line.get("type") == "response" and "id" in line}
    mapping: dict[str, str] = {}
    for line in recorded:
        if line.get("type") == "response" and line.get("id") in by_id:
            _pair_values(line, by_id[line["id"]], None, mapping)
    return mapping


def rewrite(data: bytes, mapping: Mapping[str, str]) -> bytes:
    """An input line with pi's ids and paths replaced by pitrio's."""
    text = data.decode("utf-8")
    for old, new in sorted(mapping.items(), key=lambda item: -len(item[0])):
        text = text.replace(old, new)
    return text.encode("utf-8")


async def replay(
    rpc: RpcProcess,
    transcript: Transcript,
    unwritten_from: Callable[[Mapping[str, Any]], bool] | None = None,
) -> list[dict[str, Any]]:
    """Write the transcript's input with its waits; returns pitrio's pi-view output.

    ``unwritten_from`` takes the first line of a tail of the transcript that pi 1.6.0 never
    writes: no wait counts a line of that tail (such a wait could only end at its timeout,
    15 s, with the rest of the input written after it)."""
    recorded = transcript.output
    shown = next(
        (i for i, line in enumerate(recorded) if unwritten_from and unwritten_from(line)),
        len(recorded),
    )
    recorded = recorded[:shown]
    for step in transcript.steps:
        count = min(step.after_lines, shown)
        await rpc.wait_until(_condition(step.waited_for, count, recorded))
        if step.waited_for == "0.3s of quiet":
            await trio.sleep(0.3)
        mapping = value_map(recorded, pi_view(rpc.lines))
        await rpc.send_raw(rewrite(step.data, mapping))
    await rpc.wait_until(_condition(transcript.final_wait, len(recorded), recorded))
    await rpc.close_stdin()
    code = await rpc.wait_exit()
    assert code == 0, f"exit code {code}; stderr: {rpc.stderr.decode()[-3000:]}"
    return pi_view(rpc.lines)


# -- comparison ----------------------------------------------------------------------------


class Normaliser:
    """Replaces run-dependent values with placeholders (numbered per kind, in order of first
    appearance, so equal values stay equal)."""

    def __init__(self) -> None:
        self._tables: dict[str, dict[Any, str]] = defaultdict(dict)

    def _placeholder(self, kind: str, value: Any) -> str:
        table = self._tables[kind]
        return table.setdefault(value, f"<{kind} {len(table) + 1}>")

    def __call__(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            if value.get("role") == "system":
                value = without_wording(value)  # each agent's own prose (documented)
            return {k: self._field(k, v) for k, v in value.items()}
        if isinstance(value, list):
            return [self(item, key) for item in value]
        return value

    def _field(self, key: str, value: Any) -> Any:
        if key == "timestamp":
            return "<timestamp>"
        if key in ("usage", "tokensBefore") or (key == "tokens" and isinstance(value, dict)):
            return f"<{key}>"
        if key == "estimatedTokensAfter" and isinstance(value, int):
            return f"<{key}>"  # an estimate of the context, whose system prompt is each agent's
        if key == "contextUsage" and isinstance(value, dict):
            return {
                k: (v if v is None or k == "contextWindow" else f"<{k}>") for k, v in value.items()
            }
        if key == "sessionId" and isinstance(value, str):
            return self._placeholder("session", value)
        if key in FILE_KEYS and isinstance(value, str):
            return self._placeholder("file", value)
        if key in ENTRY_KEYS and isinstance(value, str):
            return self._placeholder("entry", value)
        if key == "error" and isinstance(value, str) and value.startswith(PARSE_ERROR):
            return value if value == EMPTY_LINE_ERROR else PARSE_ERROR + "<parser message>"
        return self(value, key)


def _is_response(line: Mapping[str, Any] | None) -> bool:
    return line is not None and line.get("type") == "response"


def align(
    recorded: Sequence[Mapping[str, Any]], ours: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any] | None]:
    """pitrio's lines in pi's layout: events in order, responses by id (id-less in order)."""
    events = deque(line for line in ours if not _is_response(line))
    by_id = {line["id"]: line for line in ours if _is_response(line) and "id" in line}
    idless = deque(line for line in ours if _is_response(line) and "id" not in line)
    aligned: list[Mapping[str, Any] | None] = []
    for line in recorded:
        if _is_response(line):
            if "id" in line:
                aligned.append(by_id.pop(line["id"], None))
            else:
                aligned.append(idless.popleft() if idless else None)
        else:
            aligned.append(events.popleft() if events else None)
    aligned.extend(events)
    aligned.extend(by_id.values())
    aligned.extend(idless)
    return aligned


def _events_before(lines: Sequence[Mapping[str, Any] | None], index: int) -> int:
    return sum(
        1
        for line in lines[:index]
        if line is not None and not _is_response(line) and line.get("type") not in STREAMING_TYPES
    )


def _show(line: Any) -> str:
    text = orjson.dumps(line).decode() if line is not None else "<nothing>"
    return text if len(text) < 1500 else text[:1500] + "..."


def settle_queue_updates(lines: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``lines`` with each ``queue_update`` moved past the stream deltas right after it. A
    queue update answers a command (steer, follow-up, queued prompt), so which delta of a
    streaming reply it lands between is timing, as for a response; which non-delta events it
    comes between, and what it says, still count."""
    out: list[Mapping[str, Any]] = []
    waiting: list[Mapping[str, Any]] = []
    for line in lines:
        kind = line.get("type")
        if kind == "queue_update":
            waiting.append(line)
        elif kind in STREAMING_TYPES or _is_response(line):
            out.append(line)
        else:
            out.extend(waiting)
            waiting.clear()
            out.append(line)
    out.extend(waiting)
    return out


def compare(
    recorded: Sequence[Mapping[str, Any]],
    ours: Sequence[Mapping[str, Any]],
    missing: Callable[[Mapping[str, Any]], str | None] = lambda line: None,
    underivable: Callable[[int, Mapping[str, Any]], bool] = lambda index, line: False,
) -> None:
    """Assert that pitrio's (pi-view) output matches pi's.

    Differences only on lines ``missing`` attributes to a feature pitrio lacks raise
    :class:`MissingPiece` (what an ``xfail(raises=MissingPiece)`` expects); any other
    difference is an ``AssertionError``. Lines ``underivable`` names are not compared.
    """
    recorded, ours = settle_queue_updates(recorded), settle_queue_updates(ours)
    aligned = align(recorded, ours)
    left, right = Normaliser(), Normaliser()
    problems: list[str] = []
    known: list[str] = []
    for index, pi_line in enumerate(recorded):
        if underivable(index, pi_line):
            continue  # pi 1.6.0's line cannot be derived from the 0.73.1 transcript
        a, b = left(pi_line), right(aligned[index])
        if a != b:
            report = f"line {index + 1}:\n  pi:     {_show(a)}\n  pitrio: {_show(b)}"
            reason = missing(pi_line)
            (known if reason else problems).append(report if not reason else f"{reason}: {report}")
    for extra in aligned[len(recorded) :]:
        problems.append(f"extra line from pitrio: {_show(right(extra))}")
    ours_list = list(ours)
    for index, pi_line in enumerate(recorded):
        if not _is_response(pi_line) or aligned[index] is None or underivable(index, pi_line):
            continue
        position = next(i for i, line in enumerate(ours_list) if line is aligned[index])
        expected, actual = _events_before(recorded, index), _events_before(ours_list, position)
        if expected != actual and not missing(pi_line):
            problems.append(
                f"response on line {index + 1} ({pi_line.get('id')}) follows {actual} "
                f"non-delta events in pitrio's output, {expected} in pi's"
            )
    if problems:
        raise AssertionError("\n".join(problems[:8]) + f"\n({len(problems)} differences)")
    if known:
        raise MissingPiece("\n".join(known[:4]))
