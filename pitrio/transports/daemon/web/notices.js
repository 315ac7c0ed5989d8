// Run notices above the transcript: an automatic retry ("Retrying in 2 s (attempt 1/3)" with a
// countdown, then its outcome) and compaction (running, then its outcome). Separate from the
// error notice bar, which belongs to the connection.
import { $, el } from "./dom.js";
import { send } from "./connection.js";

let ticker = 0;
let fader = 0;

function stopTimers() {
  clearInterval(ticker);
  clearTimeout(fader);
  ticker = 0;
  fader = 0;
}

function show(kind, parts) {
  stopTimers();
  const box = $("run-notice");
  box.className = "run-notice " + kind;
  box.replaceChildren(...parts);
  return box;
}

// An outcome stays a few seconds, then the bar goes away (an error outcome stays).
function fadeLater() {
  fader = setTimeout(clearRunNotices, 6000);
}

/** Hide the run notice (another session is shown). */
export function clearRunNotices() {
  stopTimers();
  const box = $("run-notice");
  box.className = "run-notice hidden";
  box.replaceChildren();
}

function seconds(ms) {
  return Math.max(0, Math.ceil(ms / 1000));
}

function retryStart(frame) {
  const ends = Date.now() + frame.delayMs;
  const text = el("span", "run-text");
  const cancel = el("button", "link", "Cancel retry");
  cancel.type = "button";
  cancel.onclick = () => send({ type: "abort_retry" });
  const reason = el("div", "run-reason", frame.errorMessage || "");
  const attempt = `attempt ${frame.attempt}/${frame.maxAttempts}`;
  const tick = () => {
    const left = seconds(ends - Date.now());
    text.textContent = left > 0 ? `Retrying in ${left} s (${attempt})` : `Retrying now (${attempt})…`;
    if (left <= 0) clearInterval(ticker);
  };
  show("retry", [text, cancel, reason]);
  tick();
  ticker = setInterval(tick, 250);
}

function retryEnd(frame) {
  if (frame.success) {
    show("retry ok", [el("span", "run-text", `Retry succeeded (attempt ${frame.attempt})`)]);
    fadeLater();
  } else {
    const text = `Retry failed after ${frame.attempt} attempt${frame.attempt === 1 ? "" : "s"}`;
    show("retry failed", [
      el("span", "run-text", text),
      el("div", "run-reason", frame.finalError || ""),
    ]);
  }
}

const REASONS = { manual: "on request", threshold: "the context is nearly full", overflow: "the context overflowed" };

function compactionStart(frame) {
  show("compaction", [
    el("span", "run-text", `Compacting the context (${REASONS[frame.reason] || frame.reason})…`),
  ]);
}

function compactionEnd(frame) {
  if (frame.errorMessage) {
    show("compaction failed", [el("span", "run-text", frame.errorMessage)]);
    return;
  }
  if (frame.aborted) {
    show("compaction", [el("span", "run-text", "Compaction cancelled")]);
  } else {
    const before = frame.result && frame.result.tokensBefore;
    let text = "Context compacted";
    if (typeof before === "number") text += ` (${before} tokens before)`;
    if (frame.willRetry) text += "; retrying the request";
    show("compaction ok", [el("span", "run-text", text)]);
  }
  fadeLater();
}

/** Handle a retry or compaction event; other events are ignored. */
export function onRunEvent(frame) {
  switch (frame.type) {
    case "auto_retry_start":
      return retryStart(frame);
    case "auto_retry_end":
      return retryEnd(frame);
    case "compaction_start":
      return compactionStart(frame);
    case "compaction_end":
      return compactionEnd(frame);
    default:
      return undefined;
  }
}
