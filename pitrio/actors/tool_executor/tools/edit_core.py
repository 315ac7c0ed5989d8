"""The edit tool's text work (spec §5.4): line endings, BOM, exact and fuzzy matching, the diff.

Every edit is matched against the *original* content, never incrementally. Exact substring
matching comes first; if any edit only matches after fuzzy normalisation (NFKC, trailing
whitespace, smart quotes, dashes, special spaces), the whole operation runs on the normalised
content. Pure: the tool shell reads and writes the file.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Sequence

import attrs

from pitrio.actors.tool_executor.jsvalues import js_length
from pitrio.errors import ToolError

BOM = "\ufeff"
DIFF_CONTEXT_LINES = 4

_SINGLE_QUOTES = re.compile("[\u2018\u2019\u201a\u201b]")
_DOUBLE_QUOTES = re.compile("[\u201c\u201d\u201e\u201f]")
_DASHES = re.compile("[\u2010\u2011\u2012\u2013\u2014\u2015\u2212]")
_SPACES = re.compile("[\u00a0\u2002-\u200a\u202f\u205f\u3000]")
_LINE_TOKENS = re.compile(r"[^\n]*\n|[^\n]+")
# What JavaScript's trimEnd() strips, so fuzzy normalisation agrees with pi on every line.
_JS_TRAILING_SPACE = re.compile(
    "[ \t\n\v\f\r\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+$"
)


@attrs.frozen
class Replacement:
    """One requested replacement: ``old_text`` becomes ``new_text``."""

    old_text: str
    new_text: str


@attrs.frozen
class Applied:
    """The content the edits were applied to (original or fuzzy-normalised) and the result."""

    base: str
    new: str


@attrs.frozen
class Diff:
    """pi's edit diff: numbered ``+``/``-``/context lines and the first changed line."""

    text: str
    first_changed_line: int | None


def strip_bom(content: str) -> tuple[str, str]:
    """Split a leading UTF-8 BOM off: ``(bom, rest)``; the BOM is written back unchanged."""
    if content.startswith(BOM):
        return BOM, content[1:]
    return "", content


def detect_line_ending(content: str) -> str:
    """``"\\r\\n"`` when the first CRLF is the first line break, else ``"\\n"``."""
    lf = content.find("\n")
    crlf = content.find("\r\n")
    if lf == -1 or crlf == -1:
        return "\n"
    return "\r\n" if crlf < lf else "\n"


def normalize_to_lf(text: str) -> str:
    """CRLF and lone CR become LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def restore_line_endings(text: str, ending: str) -> str:
    """Turn LF back into ``ending``."""
    return text.replace("\n", "\r\n") if ending == "\r\n" else text


def normalize_for_fuzzy_match(text: str) -> str:
    """NFKC, no trailing whitespace per line, ASCII quotes, dashes and spaces."""
    text = unicodedata.normalize("NFKC", text)
    text = "\n".join(_JS_TRAILING_SPACE.sub("", line) for line in text.split("\n"))
    text = _SINGLE_QUOTES.sub("'", text)
    text = _DOUBLE_QUOTES.sub('"', text)
    text = _DASHES.sub("-", text)
    return _SPACES.sub(" ", text)


def _find(content: str, old: str) -> tuple[int, int, bool]:
    """``(index, length, fuzzy)`` of ``old`` in ``content``; index ``-1`` when absent."""
    index = content.find(old)
    if index != -1:
        return index, len(old), False
    fuzzy_content = normalize_for_fuzzy_match(content)
    fuzzy_old = normalize_for_fuzzy_match(old)
    index = fuzzy_content.find(fuzzy_old)
    if index == -1:
        return -1, 0, False
    return index, len(fuzzy_old), True


def _count(haystack: str, needle: str) -> int:
    """Occurrences as pi counts them (``split(needle).length - 1``, also for an empty needle)."""
    if needle:
        return haystack.count(needle)
    return js_length(haystack) - 1  # splitting on "" yields one piece per UTF-16 unit


def apply_edits(content: str, edits: Sequence[Replacement], path: str) -> Applied:
    """Apply ``edits`` to LF-normalised ``content``; raise :class:`ToolError` with pi's texts.

    ``path`` is the path as the model wrote it (it appears in the messages).
    """
    many = len(edits) > 1
    normalized = [
        Replacement(normalize_to_lf(edit.old_text), normalize_to_lf(edit.new_text))
        for edit in edits
    ]
    for index, edit in enumerate(normalized):
        if not edit.old_text:
            if many:
                raise ToolError(f"edits[{index}].oldText must not be empty in {path}.")
            raise ToolError(f"oldText must not be empty in {path}.")
    fuzzy = any(_find(content, edit.old_text)[2] for edit in normalized)
    base = normalize_for_fuzzy_match(content) if fuzzy else content
    fuzzy_base = base if fuzzy else None
    matched: list[tuple[int, int, int, str]] = []  # (position, length, edit index, new text)
    for index, edit in enumerate(normalized):
        position, length, _ = _find(base, edit.old_text)
        if position == -1:
            if many:
                raise ToolError(
                    f"Could not find edits[{index}] in {path}. The oldText must match exactly "
                    "including all whitespace and newlines."
                )
            raise ToolError(
                f"Could not find the exact text in {path}. The old text must match exactly "
                "including all whitespace and newlines."
            )
        # Uniqueness is judged in fuzzy space, so near-duplicates count as duplicates too.
        if fuzzy_base is None:
            fuzzy_base = normalize_for_fuzzy_match(base)
        occurrences = _count(fuzzy_base, normalize_for_fuzzy_match(edit.old_text))
        if occurrences > 1:
            if many:
                raise ToolError(
                    f"Found {occurrences} occurrences of edits[{index}] in {path}. Each oldText "
                    "must be unique. Please provide more context to make it unique."
                )
            raise ToolError(
                f"Found {occurrences} occurrences of the text in {path}. The text must be "
                "unique. Please provide more context to make it unique."
            )
        matched.append((position, length, index, edit.new_text))
    matched.sort(key=lambda item: item[0])
    for previous, current in itertools.pairwise(matched):
        if previous[0] + previous[1] > current[0]:
            raise ToolError(
                f"edits[{previous[2]}] and edits[{current[2]}] overlap in {path}. Merge them "
                "into one edit or target disjoint regions."
            )
    new = base
    for position, length, _, new_text in reversed(matched):
        new = new[:position] + new_text + new[position + length :]
    if new == base:
        if many:
            raise ToolError(
                f"No changes made to {path}. The replacements produced identical content."
            )
        raise ToolError(
            f"No changes made to {path}. The replacement produced identical content. This might "
            "indicate an issue with special characters or the text not existing as expected."
        )
    return Applied(base=base, new=new)


def _myers(old: Sequence[str], new: Sequence[str]) -> list[tuple[str, int]]:
    """Shortest edit script of two token lists as ``(kind, count)`` runs (``=``, ``-``, ``+``).

    Myers' O(ND) search, exploring diagonals in the order, and breaking ties the way, the
    ``diff`` package pi uses does, so our diffs read like pi's when several are equally short.
    """
    n_old, n_new = len(old), len(new)
    # A path is (old position, runs so far as a linked list: (kind, count, previous)).
    Runs = tuple[str, int, object] | None

    def follow(old_pos: int, diagonal: int, runs: Runs) -> tuple[int, int, Runs]:
        new_pos = old_pos - diagonal
        common = 0
        while new_pos + 1 < n_new and old_pos + 1 < n_old and old[old_pos + 1] == new[new_pos + 1]:
            old_pos += 1
            new_pos += 1
            common += 1
        if common:
            runs = ("=", common, runs)
        return old_pos, new_pos, runs

    def extend(runs: Runs, kind: str) -> Runs:
        if runs is not None and runs[0] == kind:
            return (kind, runs[1] + 1, runs[2])
        return (kind, 1, runs)

    def unwind(runs: Runs) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        while runs is not None:
            out.append((runs[0], runs[1]))
            runs = runs[2]  # type: ignore[assignment]
        out.reverse()
        return out

    old_pos, new_pos, runs = follow(-1, 0, None)
    if old_pos + 1 >= n_old and new_pos + 1 >= n_new:
        return unwind(runs)
    best: dict[int, tuple[int, Runs]] = {0: (old_pos, runs)}
    low, high = -(n_old + n_new + 1), n_old + n_new + 1
    for length in range(1, n_old + n_new + 1):
        for diagonal in range(max(low, -length), min(high, length) + 1, 2):
            remove = best.pop(diagonal - 1, None)
            add = best.get(diagonal + 1)
            can_add = add is not None and 0 <= add[0] - diagonal < n_new
            can_remove = remove is not None and remove[0] + 1 < n_old
            if not can_add and not can_remove:
                best.pop(diagonal, None)
                continue
            if not can_remove or (can_add and remove[0] < add[0]):  # type: ignore[index]
                assert add is not None
                start = (add[0], extend(add[1], "+"))
            else:
                assert remove is not None
                start = (remove[0] + 1, extend(remove[1], "-"))
            old_pos, new_pos, runs = follow(start[0], diagonal, start[1])
            if old_pos + 1 >= n_old and new_pos + 1 >= n_new:
                return unwind(runs)
            best[diagonal] = (old_pos, runs)
            if old_pos + 1 >= n_old:
                high = min(high, diagonal - 1)
            if new_pos + 1 >= n_new:
                low = max(low, diagonal + 1)
    raise AssertionError("an edit script always exists")  # pragma: no cover


def _diff_parts(old: str, new: str) -> list[tuple[str, str]]:
    """Line-level diff as ``(kind, text)`` parts, kind ``=``, ``-`` or ``+``."""
    old_lines = _LINE_TOKENS.findall(old)
    new_lines = _LINE_TOKENS.findall(new)
    parts: list[tuple[str, str]] = []
    old_at = new_at = 0
    for kind, count in _myers(old_lines, new_lines):
        if kind == "-":
            parts.append((kind, "".join(old_lines[old_at : old_at + count])))
            old_at += count
        else:
            parts.append((kind, "".join(new_lines[new_at : new_at + count])))
            new_at += count
            if kind == "=":
                old_at += count
    return parts


def generate_diff(old: str, new: str, context: int = DIFF_CONTEXT_LINES) -> Diff:
    """pi's edit diff: ``-N``/``+N`` lines with line numbers, ``context`` lines around changes.

    Line numbers are padded to the width of the longer file's line count; skipped context
    shows as ``...``. ``first_changed_line`` is in the new file.
    """
    parts = _diff_parts(old, new)
    width = len(str(max(len(old.split("\n")), len(new.split("\n")))))
    out: list[str] = []
    old_no = new_no = 1
    first_changed: int | None = None
    last_was_change = False
    gap = f" {'':>{width}} ..."

    def show(lines: Sequence[str]) -> None:
        nonlocal old_no, new_no
        for line in lines:
            out.append(f" {old_no:>{width}} {line}")
            old_no += 1
            new_no += 1

    def skip(count: int) -> None:
        nonlocal old_no, new_no
        out.append(gap)
        old_no += count
        new_no += count

    for index, (kind, value) in enumerate(parts):
        raw = value.split("\n")
        if raw and raw[-1] == "":
            raw.pop()
        if kind != "=":
            if first_changed is None:
                first_changed = new_no
            for line in raw:
                if kind == "+":
                    out.append(f"+{new_no:>{width}} {line}")
                    new_no += 1
                else:
                    out.append(f"-{old_no:>{width}} {line}")
                    old_no += 1
            last_was_change = True
            continue
        next_is_change = index + 1 < len(parts) and parts[index + 1][0] != "="
        if last_was_change and next_is_change:
            if len(raw) <= context * 2:
                show(raw)
            else:
                show(raw[:context])
                skip(len(raw) - 2 * context)
                show(raw[-context:])
        elif last_was_change:
            show(raw[:context])
            if len(raw) > context:
                skip(len(raw) - context)
        elif next_is_change:
            skipped = max(0, len(raw) - context)
            if skipped:
                skip(skipped)
            show(raw[skipped:])
        else:
            old_no += len(raw)
            new_no += len(raw)
        last_was_change = False
    return Diff(text="\n".join(out), first_changed_line=first_changed)


def _split_lines(text: str) -> list[str]:
    """``text``'s lines, each with its ``\\n`` (the last one without, if the text has none)."""
    lines = [line + "\n" for line in text.split("\n")]
    if text.endswith("\n"):
        lines.pop()
    else:
        lines[-1] = lines[-1][:-1]
    return lines


def unified_patch(path: str, old: str, new: str, context: int = DIFF_CONTEXT_LINES) -> str:
    """pi 1.6.0's edit ``patch``: a standard unified diff of ``old`` to ``new`` (jsdiff's
    ``createTwoFilesPatch`` with file headers only: ``--- path``/``+++ path``, hunks with both
    counts always written, ``context`` lines around changes, changes closer than twice that
    in one hunk, ``\\ No newline at end of file`` after a last line without one)."""
    parts = [(kind, _split_lines(value)) for kind, value in _diff_parts(old, new)]
    parts.append(("=", []))  # closes the last hunk
    hunks: list[tuple[int, int, int, int, list[str]]] = []
    old_start = new_start = 0
    current: list[str] = []
    old_line = new_line = 1
    for index, (kind, lines) in enumerate(parts):
        if kind != "=":
            if not old_start:
                old_start, new_start = old_line, new_line
                if index > 0:
                    current = (
                        [" " + line for line in parts[index - 1][1][-context:]] if context else []
                    )
                    old_start -= len(current)
                    new_start -= len(current)
            current.extend(kind + line for line in lines)
            if kind == "+":
                new_line += len(lines)
            else:
                old_line += len(lines)
            continue
        if old_start:
            if len(lines) <= context * 2 and index < len(parts) - 2:
                current.extend(" " + line for line in lines)  # joins the next change's hunk
            else:
                size = min(len(lines), context)
                current.extend(" " + line for line in lines[:size])
                hunks.append(
                    (
                        old_start,
                        old_line - old_start + size,
                        new_start,
                        new_line - new_start + size,
                        current,
                    )
                )
                old_start = new_start = 0
                current = []
        old_line += len(lines)
        new_line += len(lines)
    out = [f"--- {path}", f"+++ {path}"]
    for o_start, o_count, n_start, n_count, lines in hunks:
        # The format's quirk: an empty side names the line before it.
        o_at = o_start - 1 if o_count == 0 else o_start
        n_at = n_start - 1 if n_count == 0 else n_start
        out.append(f"@@ -{o_at},{o_count} +{n_at},{n_count} @@")
        for line in lines:
            if line.endswith("\n"):
                out.append(line[:-1])
            else:
                out.extend((line, "\\ No newline at end of file"))
    return "\n".join(out) + "\n"
