"""What may differ between pi 1.6.0 and pitrio in the differential harness, and why.

``DOCUMENTED``: differences that stay. Each names the README row (a piece of its text) that
documents it; a test checks the README has that row. ``PENDING_FIX``: differences being fixed
on other branches right now; the merge that brings the fix empties its entry (they are *not*
documented differences, and a scenario showing one is an expected failure until then).

An entry is ``(scenario glob, path glob, reason or README text)``; globs are ``fnmatch``'s.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from tests.interop.pi_compare import Diff

Entry = tuple[str, str, str]

# The text of the README row each documented difference belongs to.
R_QUEUEID = "a queued user message's `message_start` carries its `queueId`"
R_PARSE = "a parse error's text after `Failed to parse command: ` is Python's JSON parser's"
R_FIELD = "a missing or mistyped required field is an error such as"
R_PROMPT = "the system prompt, the summarisation prompts and the tools' descriptions are"
R_COMPAT = "an `openai-completions` server other than OpenAI's gets `max_tokens` and no `store`"
R_EOF = "after stdin EOF, commands already read are still answered"
R_SETTERS = "`set_auto_retry` / `set_auto_compaction` need a boolean `enabled`; `set_steering_mode`"
R_DURABLE = "a new session's file is written with its first entry that is acknowledged"
R_THRESHOLD = "a prompt sent during the threshold compaction after a run is accepted"
R_CODEX = "repeats only retryable failures (429/5xx, connection errors)"
R_BUILTIN_COMMANDS = "pitrio has no built-in extension commands: `get_commands` lists only"
R_RESUME = (
    "a session file written by pi, resumed by pitrio, gets a `system` message on its next run"
)
R_ZSTD = "`openai-codex-responses` request bodies go as plain JSON, without `Content-Encoding`"

DOCUMENTED: list[Entry] = [
    ("*", "out:message_start/*.queueId", R_QUEUEID),
    # A file of the other agent resumed (resume_pi_* and resume_pitrio_*): the resuming agent's
    # patch is one more message in its run, its counts and its file, shifting what follows.
    ("resume_pi*", "out:only-*:message_*/system", R_RESUME),
    ("resume_pi*", "out:agent_end.messages[]*", R_RESUME),
    ("resume_pi*", "out:response:get_session_stats:ok.data.totalMessages", R_RESUME),
    ("resume_pi*", "session:only-*:message/system", R_RESUME),
    ("resume_pi*", "session:message/user.parentId", R_RESUME),
    ("*", "out:response:parse:error.error", R_PARSE),
    ("*", "out:response:*:error.error", R_FIELD),
    ("*", "request.system-prompt", R_PROMPT),
    ("*", "request.tools[].function.description", R_PROMPT),
    # The same words where pi 1.6.0's transcript keeps them: a system message's sections and
    # its tool declarations, in events, responses and the session file.
    ("*", "*.sections.*", R_PROMPT),
    ("*", "*toolsAdded[]*description", R_PROMPT),
    ("*", "*toolsRemoved[]*description", R_PROMPT),
    ("*", "request.tools[].function.parameters.properties.*.description", R_PROMPT),
    # The same texts where the native kinds carry them (a kind's results are "KIND/SCENARIO").
    ("*/*", "request.system-prompt*", R_PROMPT),
    ("*/*", "request.tools[]*description", R_PROMPT),
    ("*/*", "request.toolConfig.tools[]*description", R_PROMPT),
    ("request_defaults", "request.store", R_COMPAT),
    ("request_defaults", "request.max_tokens", R_COMPAT),
    ("request_defaults", "request.max_completion_tokens", R_COMPAT),
    ("*compact*", "request.messages[].content[].text", R_PROMPT),
    ("overflow_*", "request.messages[].content[].text", R_PROMPT),
    ("idle_queries", "request.messages[].content[].text", R_PROMPT),  # its compact command
    # The context left after a compaction counts the system message, whose words are ours.
    ("*", "out:compaction_end.result.estimatedTokensAfter", R_PROMPT),
    ("*", "out:response:compact:ok.data.estimatedTokensAfter", R_PROMPT),
    # After an overflow's context_edit the size before a compaction is estimated from every
    # message (pi 1.6.0), the system message with our words included.
    ("overflow_*", "out:compaction_end.result.tokensBefore", R_PROMPT),
    ("overflow_*", "out:response:get_messages:ok.data.messages[].tokensBefore", R_PROMPT),
    ("overflow_*", "session:compaction.tokensBefore", R_PROMPT),
    # The summarisation prompt in each kind's place for it (compact commands, overflows).
    *[
        (f"*/{scenario}", f"request.{path}.text", R_PROMPT)
        for scenario in ("*compact*", "overflow_*", "idle_queries")
        for path in ("input[].content[]", "contents[].parts[]", "messages[].content[]")
    ],
    # The race of pi's prompt during a threshold compaction, whatever the vendor.
    ("*/prompt_during_threshold_compaction", "*", R_THRESHOLD),
    # pi's Codex client repeats a 400 three times (the context overflow too, whose repeats
    # then take the summary's and the next answers): what it sends then is that row.
    ("openai-codex-responses/error_400", "request:count", R_CODEX),
    ("openai-codex-responses/error_400", "http:statuses", R_CODEX),
    ("openai-codex-responses/overflow_*", "*", R_CODEX),
    # pi zstd-compresses its Codex bodies; the harness compares what either side meant.
    ("openai-codex-responses/*", "http.headers.content-encoding", R_ZSTD),
    ("bash_missing_command", "out:response:bash:ok->response:bash:error", R_FIELD),
    # pi runs the missing command as the word `undefined` and streams bash's complaint; pitrio
    # refuses the command (the row above), so it has no output to stream.
    ("bash_missing_command", "out:only-pi:bash_execution_update", R_FIELD),
    # pi's built-in extensions' /llama and /mcp (test_pi_rpc_client checks they are the two).
    ("idle_queries", "out:response:get_commands:ok.data.commands[]:length", R_BUILTIN_COMMANDS),
    ("set_steering_mode_invalid", "*", R_SETTERS),
    ("set_auto_retry_no_enabled", "*", R_SETTERS),
    (
        "idle_errors",
        "out:response:set_thinking_level:ok->response:set_thinking_level:error",
        R_SETTERS,
    ),
    # The run's first prompt is written when acknowledged: a file pi (no reply yet) never
    # writes, whose session id comes first in pitrio's output, so the normalised ids shift.
    ("models", "files:only-pitrio:<ts>_<uuid>.jsonl", R_DURABLE),
    ("available_thinking_levels*", "files:only-pitrio:<ts>_<uuid>.jsonl", R_DURABLE),
    ("abort_bash_running", "files:only-pitrio:<ts>_<uuid>.jsonl", R_DURABLE),
    ("new_session_while_streaming", "files:only-pitrio:<ts>_<uuid>.jsonl", R_DURABLE),
    ("new_session_while_streaming", "out:response:get_state:ok.data.session*", R_DURABLE),
    # pi's prompt during its threshold compaction starts a second compaction at once, and which
    # of the two fails and whether the prompt's run shows before the capture ends is a race in
    # pi (seen both ways in runs of the same code): the whole scenario is that documented row.
    ("prompt_during_threshold_compaction", "*", R_THRESHOLD),
]


# Not differences: how many deltas of a reply come out before an abort or a stop lands is
# timing, on either side (seen both ways in runs of the same code). Left out before counting.
TIMING: list[Entry] = [
    ("new_session_while_streaming", "out:only-*:message_update/text_delta", "abort timing"),
    ("compact_while_streaming", "out:only-*:message_update/text_delta", "abort timing"),
    ("sigterm_streaming", "out:only-*:message_update/text_delta", "stop timing"),
    ("eof_streaming", "out:only-*:message_update/text_delta", "stop timing"),
    # Both agents cancel the compaction; whether its summary request has left when the abort
    # lands (sent right after compaction_start) is timing: pi sends it at once, pitrio a few
    # actor hops later.
    ("abort_manual_compaction", "request:count", "abort timing"),
    ("abort_manual_compaction", "http:statuses", "abort timing"),
    # The user's command runs while the reply streams: where its output lands among the
    # reply's deltas is how fast each side spawns it.
    ("bash_while_streaming", "out:only-*:bash_execution_update", "spawn timing"),
]

PENDING_FIX: list[Entry] = []


# Differences this harness found that are neither documented nor being fixed yet, each an
# undocumented difference (the counts say so), listed so that the suite stays usable until it
# is fixed or documented. None at present: the last pi 1.6.0 re-anchor entries went with their
# fixes (wave 3, third session).
FOUND_UNFIXED: list[Entry] = []


def _pattern(path: str) -> str:
    """An entry's path as an fnmatch pattern: ``[]`` (an array in a diff's path) is literal,
    not the start of a character class (which left ``...[].content[].text`` matching
    nothing)."""
    return path.replace("[]", "[[]]")


def _matches(entries: list[Entry], scenario: str, diff: Diff) -> Entry | None:
    for entry in entries:
        if fnmatchcase(scenario, entry[0]) and fnmatchcase(diff.path, _pattern(entry[1])):
            return entry
    return None


def _allowance(scenario: str, diff: Diff) -> tuple[int, Entry | None]:
    """Which list takes ``diff`` (0 timing, 1 documented, 2 pending-fix, 3 found-unfixed,
    4 none) and its entry there: the first list that matches, in that order."""
    for rank, entries in enumerate((TIMING, DOCUMENTED, PENDING_FIX, FOUND_UNFIXED)):
        entry = _matches(entries, scenario, diff)
        if entry is not None:
            return rank, entry
    return 4, None


def classify(
    scenario: str, diffs: list[Diff]
) -> tuple[list[Diff], list[Diff], list[Diff], list[Diff]]:
    """``diffs`` split into documented, pending-fix, found-unfixed and unknown ones (timing
    differences are left out)."""
    groups: list[list[Diff]] = [[], [], [], [], []]
    for d in diffs:
        groups[_allowance(scenario, d)[0]].append(d)
    return groups[1], groups[2], groups[3], groups[4]


def unused(results: dict[str, list[Diff]]) -> list[Entry]:
    """The allowances no difference of ``results`` (every job's) falls under: each is a
    difference that no longer exists, so its entry (and, for the last one of a README row, the
    row) should go. Only the first matching entry of a list counts, as in :func:`classify`."""
    used = {id(_allowance(scenario, d)[1]) for scenario, diffs in results.items() for d in diffs}
    return [e for e in (*DOCUMENTED, *PENDING_FIX, *FOUND_UNFIXED) if id(e) not in used]
