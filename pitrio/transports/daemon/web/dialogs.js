// Extension UI (pi-rpc.md §9): dialogs (select, confirm, input, editor) answered with
// extension_ui_response, each with its countdown when the extension gave a timeout (the dialog
// closes when it runs out: the session has then taken the default); notify as a toast; status,
// widgets, title and editor text. A dialog answered by another client closes here too (the
// daemon's extension_ui_answered notice).
import { $, el } from "./dom.js";
import { send } from "./connection.js";

const open = new Map(); // dialog id -> {node, timer}
// Dialogs answered elsewhere than the session (the daemon's project-trust question on the host
// socket): id -> function taking the chosen option, or null.
const responders = new Map();
// Dialogs this page saw end (answered, cancelled, timed out): a replay after a reconnect
// (resume) sends their requests again, and they must not come back.
const ended = new Set();

function answer(id, fields) {
  const responder = responders.get(id);
  if (responder) {
    responders.delete(id);
    responder(fields.cancelled ? null : fields.value);
  } else {
    send({ type: "extension_ui_response", id, ...fields });
  }
  close(id);
}

function close(id) {
  ended.add(id);
  const entry = open.get(id);
  if (!entry) return;
  clearInterval(entry.timer);
  entry.node.remove();
  open.delete(id);
  $("dialogs").classList.toggle("hidden", open.size === 0);
  const next = $("dialogs").querySelector(".dialog");
  if (next) focusFirst(next);
  else $("prompt").focus();
}

function focusFirst(node) {
  const target = node.querySelector("input, textarea, button.primary, button");
  if (target) target.focus();
}

function button(label, cls, onclick) {
  const node = el("button", cls, label);
  node.type = "button";
  node.onclick = onclick;
  return node;
}

function body(frame) {
  const { id } = frame;
  const cancel = button("Cancel", "cancel", () => answer(id, { cancelled: true }));
  switch (frame.method) {
    case "confirm":
      return [
        frame.message ? el("p", "dialog-message", frame.message) : null,
        el("div", "dialog-buttons"),
        [
          button("Allow", "primary confirm-yes", () => answer(id, { confirmed: true })),
          button("Deny", "confirm-no", () => answer(id, { confirmed: false })),
        ],
      ];
    case "select": {
      const list = el("div", "dialog-options");
      for (const option of frame.options || []) {
        list.append(button(option, "option", () => answer(id, { value: option })));
      }
      return [list, el("div", "dialog-buttons"), [cancel]];
    }
    case "input":
    case "editor": {
      const field = frame.method === "input" ? el("input", "dialog-field") : el("textarea", "dialog-field");
      if (frame.method === "input") field.type = "text";
      else field.rows = 8;
      if (frame.placeholder) field.placeholder = frame.placeholder;
      if (frame.prefill) field.value = frame.prefill;
      const ok = button("OK", "primary", () => answer(id, { value: field.value }));
      field.onkeydown = (event) => {
        if (event.key === "Enter" && (frame.method === "input" || event.ctrlKey || event.metaKey)) {
          event.preventDefault();
          ok.click();
        }
      };
      return [field, el("div", "dialog-buttons"), [ok, cancel]];
    }
    default:
      return null;
  }
}

function openDialog(frame) {
  const parts = body(frame);
  if (!parts) return;
  const [content, buttons, buttonList] = parts;
  const node = el("div", "dialog " + frame.method);
  node.setAttribute("role", "dialog");
  node.dataset.id = frame.id;
  node.append(el("h2", "dialog-title", frame.title || "The extension asks"));
  if (content) node.append(content);
  let timer = 0;
  if (typeof frame.timeout === "number" && frame.timeout > 0) {
    const ends = Date.now() + frame.timeout;
    const countdown = el("div", "dialog-countdown");
    const tick = () => {
      const left = Math.ceil((ends - Date.now()) / 1000);
      if (left <= 0) return close(frame.id);
      countdown.textContent = `Closes in ${left} s`;
    };
    node.append(countdown);
    tick();
    timer = setInterval(tick, 250);
  }
  buttons.append(...buttonList);
  node.append(buttons);
  open.set(frame.id, { node, timer });
  $("dialogs").append(node);
  $("dialogs").classList.remove("hidden");
  if (open.size === 1) focusFirst(node);
}

function toast(message, kind) {
  const node = el("div", "toast " + (kind || "info"), message);
  $("toasts").append(node);
  const remove = () => node.remove();
  node.onclick = remove;
  setTimeout(remove, kind === "error" ? 15000 : 6000);
}

function setStatus(key, text) {
  const box = $("ext-status");
  let chip = [...box.children].find((child) => child.dataset.key === key);
  if (text === undefined || text === null) {
    if (chip) chip.remove();
    return;
  }
  if (!chip) {
    chip = el("span", "chip");
    chip.dataset.key = key;
    box.append(chip);
  }
  chip.textContent = text;
}

function setWidget(key, lines, placement) {
  for (const box of document.querySelectorAll(".widgets")) {
    for (const child of [...box.children]) if (child.dataset.key === key) child.remove();
  }
  if (!lines) return;
  const box = $(placement === "belowEditor" ? "widgets-below" : "widgets-above");
  const node = el("pre", "widget", lines.join("\n"));
  node.dataset.key = key;
  box.append(node);
}

/** Handle an extension_ui_request frame. */
export function onUiRequest(frame) {
  switch (frame.method) {
    case "select":
    case "confirm":
    case "input":
    case "editor":
      if (!open.has(frame.id) && !ended.has(frame.id)) openDialog(frame);
      return;
    case "notify":
      return toast(frame.message || "", frame.notifyType);
    case "setStatus":
      return setStatus(frame.statusKey, frame.statusText);
    case "setWidget":
      return setWidget(frame.widgetKey, frame.widgetLines, frame.widgetPlacement);
    case "setTitle":
      document.title = frame.title ? `${frame.title} · pitrio` : "pitrio";
      return;
    case "set_editor_text":
      $("prompt").value = frame.text || "";
      return;
    default:
      return;
  }
}

/** The daemon asks whether to trust the project of a session this page creates
 * (project_trust_request on the host socket): its options as a choice; `reply` gets the
 * label chosen, or null when cancelled. */
export function onTrustRequest(frame, reply) {
  if (open.has(frame.id)) return;
  responders.set(frame.id, reply);
  openDialog({ ...frame, method: "select" });
  const node = open.get(frame.id)?.node;
  if (node) node.classList.add("project-trust");
}

/** A client answered the dialog `id` (this page or another): close it here. */
export function onUiAnswered(id) {
  close(id);
}

/** Whether a dialog is open. */
export function dialogOpen() {
  return open.size > 0;
}

/** Cancel the dialog shown first (Esc). */
export function cancelTopDialog() {
  const first = $("dialogs").querySelector(".dialog");
  if (first) answer(first.dataset.id, { cancelled: true });
}

/** Close every dialog and widget (another session is shown); nothing is answered. */
export function clearDialogs() {
  for (const id of [...open.keys()]) close(id);
  $("ext-status").replaceChildren();
  for (const box of document.querySelectorAll(".widgets")) box.replaceChildren();
}
