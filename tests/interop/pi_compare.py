"""Normalise two runs of one scenario and list every difference between them.

Normalising replaces what differs by nature between two runs: the sandbox path (also in pi's
``--path--`` session folder form), the mock's port, ISO timestamps, epoch ``timestamp`` fields,
durations (``durationMs``, the bash tool's ``wall_time_seconds``: their value only; that there is
one, and its type, is still compared, except on a reply that failed before its request
left), a ``message_update``'s ``usage`` (timing in pi 1.6.0),
session uuids, entry ids and response ids. An entry id is named after the entry it identifies
in the session files (``<message/user#2>``: the second user message entry), so a reference to
an id still has to point at the same kind of entry, and an entry only one agent wrote (pi
1.6.0's ``system`` message entry, say) does not shift the names of every entry after it; other
ids and uuids get a placeholder numbered in order of first appearance.

A difference is a :class:`Diff`: a ``path`` that names where it is without positions (so the
allow-list can name it: ``out:message_end.message.errorMessage``, ``request.messages[].content``,
``session:compaction.fromHook``, ``settings.retry``) and a ``detail`` with the position and both
values. Output lines are aligned by their signature (event type, response command and outcome);
what cannot be aligned is reported as lines only one agent wrote.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.interop.pi_runner import Run

ISO_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d[:-]\d\d[:-]\d\d(?:[.-]\d{3})?Z")
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
HEX8_RE = re.compile(r"^[0-9a-f]{8}$")
RESP_RE = re.compile(r"chatcmpl-[0-9a-f]{24}")
EPOCH_KEYS = {"timestamp", "acquiredAt", "started", "pid"}
# Measured times: they differ between any two runs of the same agent.
DURATION_KEYS = {"durationMs", "wall_time_seconds"}


@dataclass(frozen=True)
class Diff:
    """One difference: where (without positions) and what (with them)."""

    path: str
    detail: str


class Normaliser:
    """Rewrites one run's values; ids keep a stable numbering across all of the run's artifacts."""

    def __init__(self, run: Run) -> None:
        root = run.root
        self.replacements = [
            (root, "$SANDBOX"),
            (root.lstrip("/").replace("/", "-"), "$SANDBOX"),
            (f"127.0.0.1:{run.port}", "127.0.0.1:$PORT"),
        ]
        self.ids: dict[str, str] = {}

    def name_entries(self, sessions: dict[str, list[Any]]) -> None:
        """Name each entry id of the session files after its entry: its signature and how many
        entries of that signature came before it (files in name order)."""
        seen: dict[str, int] = {}
        for _, entries in sorted(sessions.items()):
            for entry in entries:
                entry_id = entry.get("id") if isinstance(entry, dict) else None
                if (
                    isinstance(entry_id, str)
                    and HEX8_RE.match(entry_id)
                    and entry_id not in self.ids
                ):
                    sig = _entry_sig(entry)
                    seen[sig] = seen.get(sig, 0) + 1
                    self.ids[entry_id] = f"<{sig}#{seen[sig]}>"

    def _id(self, kind: str, value: str) -> str:
        if value not in self.ids:
            self.ids[value] = (
                f"<{kind}{sum(1 for v in self.ids.values() if v.startswith('<' + kind)) + 1}>"
            )
        return self.ids[value]

    def text(self, s: str) -> str:
        """A string with paths, ports, times and ids replaced."""
        for old, new in self.replacements:
            if old in s:
                s = s.replace(old, new)
        s = ISO_RE.sub("<ts>", s)
        s = UUID_RE.sub(lambda m: self._id("uuid", m.group(0)), s)
        s = RESP_RE.sub(lambda m: self._id("resp", m.group(0)), s)
        if HEX8_RE.match(s):
            s = self._id("id", s)
        return s

    def value(self, v: Any, key: str = "") -> Any:
        """``v`` normalised (dicts keep their key order)."""
        if isinstance(v, dict):
            out = {k: self.value(x, k) for k, x in v.items()}
            if out.get("type") == "message_update" and isinstance(out.get("usage"), dict):
                # pi writes an update's usage from the message as it is when the event is
                # written, which later chunks of the same read may already have changed (the
                # numbers, and even the fields: `reasoning` comes with the parsed usage): two
                # runs of pi differ there (seen in `--self-check`). That there is a usage is
                # still compared; the final usage is compared on message_end and after.
                out["usage"] = "<usage>"
            if _failed_before_request(out):
                # A reply that failed before its request left (no content; pi 1.6.0's lazy
                # stream answers an abort or a setup failure itself) has pi's durationMs only
                # when its clock did not pass a millisecond between two reads of it (the
                # message's time is taken just before the stream's own start time): seen
                # both ways in runs of pi. Whether there is one is left out for such replies.
                out.pop("durationMs", None)
            return out
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, int | float) and not isinstance(v, bool):
            if key in EPOCH_KEYS:
                return "<epoch>"
            if key in DURATION_KEYS:
                return "<duration>"
        return v


def _failed_before_request(message: dict[str, Any]) -> bool:
    """Whether ``message`` is an assistant reply with no content that stopped with an error
    or an abort: what an agent records for a request that never got an answer."""
    return (
        message.get("role") == "assistant"
        and message.get("content") == []
        and message.get("stopReason") in ("error", "aborted")
    )


def signature(obj: Any) -> str:
    """What an output line is, for aligning the two streams."""
    if not isinstance(obj, dict):
        return "<non-object>"
    kind = obj.get("type")
    if kind == "response":
        return f"response:{obj.get('command')}:{'ok' if obj.get('success') else 'error'}"
    if kind == "message_update":
        return f"message_update/{(obj.get('assistantMessageEvent') or {}).get('type')}"
    if kind in ("message_start", "message_end"):
        return f"{kind}/{(obj.get('message') or {}).get('role')}"
    return str(kind)


def _short(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 160 else text[:157] + "..."


def deep(a: Any, b: Any, path: str, where: str, out: list[Diff]) -> None:
    """Append the differences between pi's ``a`` and pitrio's ``b`` (values and key order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            if k not in b:
                out.append(Diff(f"{path}.{k}", f"{where}: only pi has {k!r} = {_short(a[k])}"))
        for k in b:
            if k not in a:
                out.append(Diff(f"{path}.{k}", f"{where}: only pitrio has {k!r} = {_short(b[k])}"))
        common_a = [k for k in a if k in b]
        common_b = [k for k in b if k in a]
        if common_a != common_b:
            first = next(
                i for i, (x, y) in enumerate(zip(common_a, common_b, strict=True)) if x != y
            )
            tag = f"{common_a[first]}/{common_b[first]}"
            out.append(
                Diff(f"{path}:key-order({tag})", f"{where}: pi {common_a} vs pitrio {common_b}")
            )
        for k in common_a:
            deep(a[k], b[k], f"{path}.{k}", where, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(
                Diff(
                    f"{path}[]:length",
                    f"{where}: pi {len(a)} items {_short(a)} vs pitrio {len(b)} {_short(b)}",
                )
            )
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            deep(x, y, f"{path}[]", f"{where}[{i}]", out)
    elif type(a) is not type(b):
        kinds = f"{type(a).__name__}/{type(b).__name__}"
        out.append(Diff(f"{path}:type({kinds})", f"{where}: pi {_short(a)} vs pitrio {_short(b)}"))
    elif a != b:
        out.append(Diff(path, f"{where}: pi {_short(a)} vs pitrio {_short(b)}"))


def align(a: list[Any], b: list[Any], prefix: str, sig: Any, out: list[Diff]) -> None:
    """Align two sequences by signature; compare matched items deeply, report the rest."""
    sa, sb = [sig(x) for x in a], [sig(x) for x in b]
    matcher = difflib.SequenceMatcher(a=sa, b=sb, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                deep(a[i], b[j], f"{prefix}{sa[i]}", f"{prefix}pi#{i}/pitrio#{j}", out)
        elif (
            op == "replace"
            and i2 - i1 == j2 - j1
            and all(
                sa[i].split(":")[:2] == sb[j].split(":")[:2]
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
            )
        ):
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                out.append(
                    Diff(
                        f"{prefix}{sa[i]}->{sb[j]}",
                        f"{prefix}pi#{i}/pitrio#{j}: pi {_short(a[i])} vs pitrio {_short(b[j])}",
                    )
                )
        else:
            for i in range(i1, i2):
                out.append(Diff(f"{prefix}only-pi:{sa[i]}", f"{prefix}pi#{i}: {_short(a[i])}"))
            for j in range(j1, j2):
                out.append(
                    Diff(f"{prefix}only-pitrio:{sb[j]}", f"{prefix}pitrio#{j}: {_short(b[j])}")
                )


# Events pi 1.6.0 has no counterpart of (its summarisation retries are other events), taken out
# before aligning. pi 1.6.0 sends agent_settled, entry_appended and bash_execution_update itself:
# those are aligned and compared like any other event.
PITRIO_ONLY_EVENTS = {"summarization_retry_start", "summarization_retry_end"}
# Entries only pitrio writes (numbered after the others); pi 1.6.0 writes context_edit itself.
PITRIO_ONLY_ENTRIES: set[str] = set()
MILESTONES = ("agent_start", "agent_end", "compaction_end", "auto_retry_start", "auto_retry_end")


def _is_response(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("type") == "response"


def _floating(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("type") == "queue_update"


def _positions(lines: list[Any]) -> list[dict[str, int]]:
    """For each response, how many of each milestone event came before it."""
    seen = dict.fromkeys(MILESTONES, 0)
    out = []
    for obj in lines:
        if _is_response(obj):
            out.append(dict(seen))
        elif isinstance(obj, dict) and obj.get("type") in seen:
            seen[obj["type"]] += 1
    return out


def _output(lines_a: list[Any], lines_b: list[Any], out: list[Diff]) -> None:
    """Events in order; responses in order; each response's place among the run's milestones.

    Responses and events are aligned apart: a command's answer may come between any two stream
    events in either agent (timing), but not on the other side of a milestone.
    """
    ev_a = [x for x in lines_a if not _is_response(x)]
    ev_b = []
    for x in lines_b:
        if isinstance(x, dict) and x.get("type") in PITRIO_ONLY_EVENTS:
            # Taken out before aligning (they would only break the runs of equal signatures).
            out.append(Diff(f"out:only-pitrio:{x['type']}", f"pitrio wrote {_short(x)}"))
        elif not _is_response(x):
            ev_b.append(x)
    # A queue_update's place among the stream's deltas is when its command arrived: compared
    # apart, like the responses.
    fl_a = [x for x in ev_a if _floating(x)]
    fl_b = [x for x in ev_b if _floating(x)]
    ev_a = [x for x in ev_a if not _floating(x)]
    ev_b = [x for x in ev_b if not _floating(x)]
    align(fl_a, fl_b, "out:", signature, out)
    align(ev_a, ev_b, "out:", signature, out)
    res_a = [x for x in lines_a if _is_response(x)]
    res_b = [x for x in lines_b if _is_response(x)]
    align(res_a, res_b, "out:", signature, out)
    pos_a, pos_b = _positions(lines_a), _positions(lines_b)
    if [signature(x) for x in res_a] == [signature(x) for x in res_b]:
        for i, (x, pa, pb) in enumerate(zip(res_a, pos_a, pos_b, strict=True)):
            for m in MILESTONES:
                if pa[m] != pb[m]:
                    out.append(
                        Diff(
                            f"order:{signature(x)}:after-{m}",
                            f"response #{i} ({x.get('id')}) came after {pa[m]} {m} in pi, "
                            f"{pb[m]} in pitrio",
                        )
                    )


def _entry_sig(obj: Any) -> str:
    if not isinstance(obj, dict):
        return "<non-object>"
    if obj.get("type") == "message":
        return f"message/{(obj.get('message') or {}).get('role')}"
    return str(obj.get("type"))


def compare(pi: Run, pitrio: Run) -> list[Diff]:
    """Every difference between what pi and pitrio did in one scenario."""
    na, nb = Normaliser(pi), Normaliser(pitrio)
    na.name_entries(pi.sessions)
    nb.name_entries(pitrio.sessions)
    out: list[Diff] = []
    for f in pi.failures:
        out.append(Diff("harness:pi-failure", f"pi: {f}"))
    for f in pitrio.failures:
        out.append(Diff("harness:pitrio-failure", f"pitrio: {f}"))
    # Session files first: their order numbers the ids (the events may mention them earlier).
    files_a = {
        na.text(k): _entries_last(na, v, PITRIO_ONLY_ENTRIES)
        for k, v in sorted(pi.sessions.items())
    }
    files_b = {
        nb.text(k): _entries_last(nb, v, PITRIO_ONLY_ENTRIES)
        for k, v in sorted(pitrio.sessions.items())
    }
    lines_a = [na.value(ln.obj) for ln in pi.lines]
    # pitrio's own extra events last, so that they do not number ids before pi could see them.
    extra = [
        isinstance(ln.obj, dict) and ln.obj.get("type") in PITRIO_ONLY_EVENTS for ln in pitrio.lines
    ]
    lines_b: list[Any] = [
        None if x else nb.value(ln.obj) for ln, x in zip(pitrio.lines, extra, strict=True)
    ]
    for i, (ln, x) in enumerate(zip(pitrio.lines, extra, strict=True)):
        if x:
            lines_b[i] = nb.value(ln.obj)
    _output(lines_a, lines_b, out)
    _files(files_a, files_b, out)
    requests(na, nb, pi, pitrio, _system_prompt, out)
    if pi.statuses != pitrio.statuses:
        out.append(Diff("http:statuses", f"pi {pi.statuses} vs pitrio {pitrio.statuses}"))
    deep(na.value(pi.settings), nb.value(pitrio.settings), "settings", "settings.json", out)
    if pi.exit_code != pitrio.exit_code:
        out.append(Diff("exit-code", f"pi exited {pi.exit_code}, pitrio {pitrio.exit_code}"))
    return out


def requests(
    na: Normaliser,
    nb: Normaliser,
    pi: Run,
    pitrio: Run,
    system_prompt: Callable[[Any], Any],
    out: list[Diff],
) -> None:
    """Append the differences of the two runs' request bodies (their count, then each pair,
    the system prompt ``system_prompt`` takes out of a body compared on its own path)."""
    req_a = [na.value(r) for r in pi.requests]
    req_b = [nb.value(r) for r in pitrio.requests]
    if len(req_a) != len(req_b):
        out.append(Diff("request:count", f"pi made {len(req_a)} LLM requests, pitrio {len(req_b)}"))
    for i, (x, y) in enumerate(zip(req_a, req_b, strict=False)):
        deep(system_prompt(x), system_prompt(y), "request.system-prompt", f"request#{i}", out)
        deep(x, y, "request", f"request#{i}", out)


def _entries_last(norm: Normaliser, entries: list[Any], kinds: set[str]) -> list[Any]:
    """``entries`` normalised, those of ``kinds`` after the others (they number no ids first).

    An entry whose parent is one of ``kinds`` gets that entry's parent instead, so the chain
    reads as pi's would without it (the extra entry itself is still reported).
    """
    late = [isinstance(e, dict) and e.get("type") in kinds for e in entries]
    parents = {e.get("id"): e.get("parentId") for e, x in zip(entries, late, strict=True) if x}
    if parents:
        entries = [
            dict(e, parentId=_skip(parents, e.get("parentId")))
            if isinstance(e, dict) and "parentId" in e
            else e
            for e in entries
        ]
    out: list[Any] = [None if x else norm.value(e) for e, x in zip(entries, late, strict=True)]
    for i, (e, x) in enumerate(zip(entries, late, strict=True)):
        if x:
            out[i] = norm.value(e)
    return out


def _skip(parents: dict[Any, Any], parent: Any) -> Any:
    while parent in parents:
        parent = parents[parent]
    return parent


def _system_prompt(request: Any) -> Any:
    """Take the system prompt's text out of ``request`` (compared on its own path)."""
    msgs = request.get("messages") if isinstance(request, dict) else None
    if msgs and isinstance(msgs[0], dict) and msgs[0].get("role") in ("system", "developer"):
        text = msgs[0].get("content")
        msgs[0] = {**msgs[0], "content": "<system prompt>"}
        return text
    return None


def _file_kind(name: str) -> str:
    """A session file's name without its folder, time and id (what is compared between agents)."""
    base = name.rsplit("/", 1)[-1]
    return re.sub(r"^<ts>_<uuid\d+>", "<ts>_<uuid>", base)


def _files(files_a: dict[str, list[Any]], files_b: dict[str, list[Any]], out: list[Diff]) -> None:
    names_a, names_b = sorted(files_a), sorted(files_b)
    kinds_a = [_file_kind(n) for n in names_a]
    kinds_b = [_file_kind(n) for n in names_b]
    if names_a != names_b:
        matcher = difflib.SequenceMatcher(a=kinds_a, b=kinds_b, autojunk=False)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal":
                continue
            for i in range(i1, i2):
                out.append(Diff(f"files:only-pi:{kinds_a[i]}", f"pi wrote {names_a[i]}"))
            for j in range(j1, j2):
                out.append(Diff(f"files:only-pitrio:{kinds_b[j]}", f"pitrio wrote {names_b[j]}"))
    matcher = difflib.SequenceMatcher(a=kinds_a, b=kinds_b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "equal":
            continue
        for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
            if names_a[i] != names_b[j]:
                out.append(Diff("files:name", f"pi {names_a[i]} vs pitrio {names_b[j]}"))
            prefix = (
                "session:" if names_a[i].endswith(".jsonl") else f"file:{_file_kind(names_a[i])}:"
            )
            align(files_a[names_a[i]], files_b[names_b[j]], prefix, _entry_sig, out)
