// Tool calls as collapsible cards: the name and an arguments summary in the head, then the
// arguments, the live output (tool_execution_update), and the result or error. One card per
// tool call id: the execution events and the toolResult message fill the same card, so the
// output is shown once. An edit's result shows its diff.
import { el, textOf } from "./dom.js";

const SUMMARY_KEYS = ["command", "path", "pattern", "query", "url", "file"];

/** A one-line summary of a tool call's arguments (the command, the path, ...). */
export function summarize(name, args) {
  if (!args || typeof args !== "object") return args === undefined ? "" : String(args);
  const key = SUMMARY_KEYS.find((k) => typeof args[k] === "string");
  let text = key ? args[key] : JSON.stringify(args);
  if (key === "path" && Array.isArray(args.edits)) {
    text += ` (${args.edits.length} edit${args.edits.length === 1 ? "" : "s"})`;
  }
  text = text.replace(/\s+/g, " ").trim();
  return text.length > 120 ? text.slice(0, 119) + "…" : text;
}

// Whether the summary already says all the arguments say (e.g. bash's one `command`).
function summaryIsEnough(args) {
  if (!args || typeof args !== "object") return false;
  const keys = Object.keys(args);
  if (keys.length !== 1 || !SUMMARY_KEYS.includes(keys[0])) return false;
  const value = args[keys[0]];
  return typeof value === "string" && value.length <= 120 && !value.includes("\n");
}

/** The card of a tool call, or null. */
export function findCard(callId) {
  if (!callId) return null;
  return document.querySelector(`details.tool[data-call="${CSS.escape(callId)}"]`);
}

/** A new card for a tool call (`id` may be empty while its arguments stream). */
export function makeCard(id, name, args) {
  const card = el("details", "tool pending");
  card.dataset.call = id || "";
  const head = el("summary", "head");
  head.append(el("span", "tool-name", name || "tool call"));
  head.append(el("span", "tool-args", summarize(name, args)));
  head.append(el("span", "tool-state", "pending"));
  card.append(head);
  const argsBox = el("pre", "tool-input", args === undefined ? "" : JSON.stringify(args, null, 2));
  argsBox.classList.toggle("hidden", summaryIsEnough(args));
  card.append(argsBox);
  card.append(el("pre", "tool-output hidden"));
  return card;
}

/** Update the arguments of a card (they stream in as JSON text, then arrive parsed). */
export function setArgs(card, name, args, rawText) {
  if (rawText !== undefined) {
    card.querySelector(".tool-input").textContent = rawText;
    return;
  }
  const input = card.querySelector(".tool-input");
  input.textContent = JSON.stringify(args, null, 2);
  input.classList.toggle("hidden", summaryIsEnough(args));
  card.querySelector(".tool-args").textContent = summarize(name, args);
}

function setState(card, stateName, label) {
  card.classList.remove("pending", "running", "done", "failed");
  card.classList.add(stateName);
  card.querySelector(".tool-state").textContent = label;
}

/** The tool started running: open its card. */
export function toolStarted(card) {
  setState(card, "running", "running");
  card.open = true;
}

/** Show the accumulated output of a running tool. */
export function toolProgress(card, partial) {
  if (card.classList.contains("done") || card.classList.contains("failed")) return;
  if (!card.classList.contains("running")) toolStarted(card);
  const out = card.querySelector(".tool-output");
  out.classList.remove("hidden");
  out.textContent = textOf(partial && partial.content);
  out.scrollTop = out.scrollHeight;
}

/**
 * Show a tool's result (from tool_execution_end or a toolResult message, whichever comes
 * first: the second one changes nothing). `live`: it just finished in front of the user.
 */
export function toolFinished(card, result, isError, live) {
  if (card.dataset.finished) return;
  card.dataset.finished = "1";
  setState(card, isError ? "failed" : "done", isError ? "error" : "done");
  const out = card.querySelector(".tool-output");
  out.classList.remove("hidden");
  const text = textOf(result && result.content);
  const diff = result && result.details && result.details.diff;
  if (typeof diff === "string" && diff && !isError) {
    out.replaceWith(diffView(diff, text));
    card.querySelector(".tool-input").classList.add("hidden"); // the diff says it better
    card.open = true;
    return;
  }
  out.textContent = text || (isError ? "(failed with no output)" : "(no output)");
  // Open when it just ran in front of the user or failed; folded in a reloaded transcript.
  card.open = Boolean(isError) || Boolean(live);
}

/** An edit's diff: one line per row, removed and added lines marked. */
export function diffView(diff, summary) {
  const box = el("div", "tool-output diff");
  if (summary) box.append(el("div", "diff-summary", summary));
  const pre = el("pre");
  for (const line of diff.split("\n")) {
    const kind = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "ctx";
    pre.append(el("span", "diff-" + kind, line + "\n"));
  }
  box.append(pre);
  return box;
}
