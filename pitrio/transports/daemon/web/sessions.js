// The session list (host socket: titles, search, rename, delete), opening one session and
// its lifecycle frames (attach, reconnect and resume, resync, restarts), and the model
// selects: the new-session picker (the daemon's models, before any session exists) and the
// current session's model and thinking level (that session only).
import { $, el, hideNotice, scrollDown, showNotice } from "./dom.js";
import { onTrustRequest } from "./dialogs.js";
import {
  answered,
  closeSession,
  connectSession,
  flushOutbox,
  hostSend,
  reconnectSession,
  resendUnanswered,
  send,
  sendSoon,
  state,
} from "./connection.js";
import {
  onEvent,
  renderMessages,
  renderMcpServers,
  renderUsage,
  resetSessionView,
  setStreaming,
} from "./transcript.js";

// -- host frames ----------------------------------------------------------------------------

/** The host socket's handlers (see connectHost); app.js sets onRefused. */
export const hostHandlers = {
  onOpen() {
    loadModelsForNew();
    requestList();
  },
  onResponse() {},
  onEvent(frame) {
    scheduleList();
    const current = state.current;
    if (!current || frame.sessionId !== current.id) return;
    // While its own socket is attached the session says when a run starts and settles, in
    // order with its other frames; the host socket's word may come before them.
    if (frame.type === "session_busy" && !current.attached) setStreaming(true);
    if (frame.type === "session_idle" && !current.attached) setStreaming(false);
    if (frame.type === "session_renamed") $("session-title").textContent = frame.name;
    if (frame.type === "session_deleted") leaveSession("This session was deleted.");
  },
  onTrustRequest(frame, reply) {
    onTrustRequest(frame, reply);
  },
  onRefused() {},
};

let listTimer = null;
let listTicket = 0; // the latest list/search request: an older answer is stale

function scheduleList() {
  if (listTimer) return;
  listTimer = setTimeout(() => {
    listTimer = null;
    requestList();
  }, 250);
}

/** Ask for the session list, or the search results while the search box holds a query. */
function requestList() {
  if (!state.host || state.host.readyState !== 1) return;
  const query = $("session-search").value.trim();
  const command = query ? { type: "search", query } : { type: "list" };
  const ticket = ++listTicket;
  hostSend(command).then((response) => {
    if (ticket === listTicket && response.success) renderSessions(response.data.sessions);
  });
}

/** Called as the search box changes: the list follows the query after a short pause. */
export function onSearchInput() {
  clearTimeout(listTimer);
  listTimer = null;
  scheduleList();
}

function renderSessions(sessions) {
  state.sessions = sessions;
  const list = $("sessions");
  list.replaceChildren();
  // Said beside the list, not in it: the list holds sessions only.
  let empty = $("sessions-empty");
  if (!empty) {
    empty = el("p", "sessions-empty");
    empty.id = "sessions-empty";
    list.before(empty);
  }
  const query = $("session-search").value.trim();
  empty.textContent = query ? `No session matches “${query}”.` : "No sessions yet.";
  empty.classList.toggle("hidden", sessions.length > 0);
  for (const info of sessions) list.append(sessionItem(info));
  const current = state.current && sessions.find((info) => info.id === state.current.id);
  if (current) $("session-title").textContent = current.title;
  // A rename being typed or a delete being asked survives the refresh (host events refresh
  // the list at any time).
  const open = editing && sessions.find((info) => info.id === editing.id);
  const item = open && list.querySelector(`li[data-id="${CSS.escape(open.id)}"]`);
  if (!item) editing = null;
  else if (editing.kind === "rename") startRename(item, open, editing.value);
  else confirmDelete(item, open);
}

let editing = null; // {id, kind: "rename" | "delete", value}: what the user is doing in the list

function stopEditing() {
  editing = null;
  requestList();
}

function sessionItem(info) {
  const item = el("li", "session");
  item.dataset.id = info.id;
  if (state.current && state.current.id === info.id) item.classList.add("active");
  const title = info.title || info.name || info.id;
  const name = el("span", "name", title);
  name.title = title;
  item.append(name);
  const busy = info.isStreaming ? " · streaming" : "";
  const count = info.messageCount === 1 ? "1 message" : `${info.messageCount} messages`;
  item.append(el("span", "meta", `${info.status}${busy} · ${count}`));
  const actions = el("span", "actions");
  const rename = el("button", "rename", "Rename");
  rename.type = "button";
  rename.onclick = (event) => {
    event.stopPropagation();
    startRename(item, info);
  };
  const remove = el("button", "delete", "Delete");
  remove.type = "button";
  remove.onclick = (event) => {
    event.stopPropagation();
    confirmDelete(item, info);
  };
  actions.append(rename, remove);
  item.append(actions);
  item.onclick = () => openSession(info.id);
  return item;
}

function startRename(item, info, typed) {
  const input = el("input", "rename-input");
  const restored = typed !== undefined;
  input.value = restored ? typed : info.name || (info.title !== "New session" ? info.title : "");
  editing = { id: info.id, kind: "rename", value: input.value };
  input.setAttribute("aria-label", "New name");
  input.onclick = (event) => event.stopPropagation();
  input.oninput = () => {
    if (editing && editing.id === info.id) editing.value = input.value;
  };
  input.onkeydown = async (event) => {
    if (event.key === "Escape") return stopEditing();
    if (event.key !== "Enter") return;
    event.preventDefault();
    const response = await hostSend({ type: "rename", sessionId: info.id, name: input.value });
    // Refused: the daemon's reason, and the name stays open for another try.
    if (!response.success) return showNotice(`rename: ${response.error}`, true);
    hideNotice();
    stopEditing();
  };
  item.querySelector(".name").replaceWith(input);
  input.focus();
  if (restored) input.setSelectionRange(input.value.length, input.value.length);
  else input.select();
}

function confirmDelete(item, info) {
  editing = { id: info.id, kind: "delete" };
  const actions = item.querySelector(".actions");
  const question = el("span", "confirm", "Delete this session and its file?");
  const yes = el("button", "confirm-delete", "Delete");
  yes.type = "button";
  const no = el("button", "cancel-delete", "Keep");
  no.type = "button";
  yes.onclick = async (event) => {
    event.stopPropagation();
    const response = await hostSend({ type: "delete", sessionId: info.id });
    if (!response.success) return showNotice(`delete: ${response.error}`, true);
    if (state.current && state.current.id === info.id) leaveSession("The session was deleted.");
    stopEditing();
  };
  no.onclick = (event) => {
    event.stopPropagation();
    stopEditing();
  };
  actions.replaceChildren(question, yes, no);
}

/** Create a session with the model chosen for new sessions, and open it; its id, or null
 * when the daemon refused (the notice says why). */
export async function newSession() {
  const model = $("new-model").value;
  // trustDialog: this page answers the daemon's project-trust question (a dialog).
  const response = await hostSend({
    type: "create",
    trustDialog: true,
    ...(model ? { model } : {}),
  });
  if (!response.success) {
    showNotice(`create: ${response.error}`, true);
    return null;
  }
  openSession(response.data.sessionId);
  return response.data.sessionId;
}

/** Send a prompt (or steer, or follow-up) to the current session; with none, create one
 * first. It waits for the session's socket when that is (re)connecting, and says so. */
export async function submitCommand(command) {
  if (!state.current && !(await newSession())) return false;
  if (!sendSoon(command)) showNotice("Not connected to the session: sending once reconnected…");
  return true;
}

// -- one session ----------------------------------------------------------------------------

const sessionHandlers = {
  onFrame,
  onClosed(current, event) {
    delete document.body.dataset.connected;
    if (event.code === 1000 && event.reason === "session closed") {
      return leaveSession("This session was closed.");
    }
    const delay = reconnectSession(current, sessionHandlers);
    const why = event.reason ? ` (${event.reason})` : "";
    showNotice(`Disconnected from the session${why}; reconnecting in ${delay} s…`, false);
  },
};

/** Show the session `id` (closing the one shown before). */
export function openSession(id) {
  closeSession();
  delete document.body.dataset.connected;
  state.current = {
    id,
    lastSeq: 0,
    stream: null,
    streaming: false,
    view: null,
    attached: false,
    outbox: [],
    unanswered: new Map(),
    attempts: 0,
    reconnecting: false,
    replayUntil: null,
    afterReload: null,
  };
  $("messages").replaceChildren();
  resetSessionView();
  hideNotice();
  const row = state.sessions.find((info) => info.id === id);
  $("session-title").textContent = row ? row.title : "New session";
  for (const item of $("sessions").children) {
    item.classList.toggle("active", item.dataset.id === id);
  }
  connectSession(false, sessionHandlers);
}

function leaveSession(message) {
  closeSession();
  state.current = null;
  delete document.body.dataset.connected;
  $("messages").replaceChildren();
  resetSessionView();
  $("session-title").textContent = "No session";
  showNotice(message, true);
}

/** A line in the transcript about the connection (not a message). */
function connectionLine(text) {
  $("messages").append(el("div", "line reconnected", text));
  scrollDown(); // unless the reader scrolled up
}

function onAttached(current, frame) {
  const resumed = current.reconnecting && frame.stream === current.stream;
  current.attached = true;
  current.attempts = 0;
  // An observable "this session's socket is attached" for tests and styles.
  document.body.dataset.connected = current.id;
  hideNotice();
  if (frame.status === "failed") showNotice("Session failed: " + frame.failure, true);
  setStreaming(frame.isStreaming);
  if (resumed) {
    // The frames after lastSeq follow (or a resync notice when they are gone): the
    // transcript goes on from where it was, no reload.
    const missed = frame.seq - current.lastSeq;
    current.replayFrom = current.lastSeq;
    if (missed > 0) current.replayUntil = frame.seq;
    else connectionLine("reconnected — nothing was missed");
    send({ type: "get_state" });
    send({ type: "get_session_stats" });
  } else {
    // First attach, or another stream of numbers (the daemon restarted): reload.
    if (current.reconnecting) current.afterReload = "reconnected — the session was reloaded";
    current.stream = frame.stream;
    current.lastSeq = frame.seq;
    current.view = null;
    refresh();
  }
  current.reconnecting = false;
  resendUnanswered(current);
  flushOutbox(current);
}

function onFrame(current, frame) {
  if (state.current !== current) return;
  if (typeof frame.seq === "number" && frame.type !== "attached" && frame.type !== "response") {
    current.lastSeq = Math.max(current.lastSeq, frame.seq);
  }
  switch (frame.type) {
    case "attached":
      return onAttached(current, frame);
    case "response":
      answered(current, frame.id);
      return onResponse(frame);
    case "resync": {
      // The frames missed are gone (or numbered by another daemon): reload, once.
      const reloading = current.afterReload !== null;
      current.replayUntil = null;
      current.afterReload =
        "reconnected — the events missed were no longer held; the session was reloaded";
      if (!reloading) refresh();
      return;
    }
    case "session_restarted":
      showNotice(`The session crashed and was restarted (${frame.reason}).`, false);
      return refresh();
    case "session_failed":
      return showNotice("Session failed: " + frame.reason, true);
    case "session_closed":
      return leaveSession("This session was closed.");
    case "session_info_changed":
      if (frame.name) $("session-title").textContent = frame.name;
      return;
    default:
      onEvent(current, frame);
      if (current.replayUntil !== null && frame.seq >= current.replayUntil) {
        const count = current.replayUntil - current.replayFrom;
        current.replayUntil = null;
        connectionLine(`reconnected — ${count} ${count === 1 ? "event" : "events"} replayed`);
      }
      return;
  }
}

function refresh() {
  send({ type: "get_messages" });
  send({ type: "get_state" });
  send({ type: "get_available_models" });
  send({ type: "get_session_stats" });
}

function onResponse(frame) {
  if (!frame.success) {
    if (frame.command !== "abort") showNotice(`${frame.command}: ${frame.error}`, true);
    return;
  }
  const data = frame.data;
  const current = state.current;
  switch (frame.command) {
    case "get_messages":
      renderMessages(data.messages);
      if (current && current.afterReload) {
        connectionLine(current.afterReload);
        current.afterReload = null;
      }
      break;
    case "get_state": {
      $("thinking").value = data.thinkingLevel;
      const row = state.sessions.find((info) => current && info.id === current.id);
      $("session-title").textContent = data.sessionName || (row && row.title) || "New session";
      setStreaming(data.isStreaming);
      selectModel($("model"), data.model);
      renderMcpServers(data.mcpServers);
      break;
    }
    case "get_available_models":
      fillModels($("model"), data.models, null);
      send({ type: "get_state" });
      break;
    case "get_session_stats":
      renderUsage(data);
      break;
    case "resume":
      if (data.resync) refresh();
      break;
    case "set_model":
      selectModel($("model"), data);
      break;
    default:
      break;
  }
}

// -- models ---------------------------------------------------------------------------------

function refOf(model) {
  return `${model.provider}/${model.id}`;
}

/** Fill a select with `models`, one <optgroup> per provider (in the daemon's order); the
 * option of `defaultRef` is marked and chosen. */
function fillModels(select, models, defaultRef) {
  const keep = select.value;
  select.replaceChildren();
  const groups = new Map();
  for (const model of models) {
    let group = groups.get(model.provider);
    if (!group) {
      group = el("optgroup");
      group.label = model.provider;
      groups.set(model.provider, group);
      select.append(group);
    }
    const traits = [];
    if (model.reasoning) traits.push("thinking");
    if ((model.input || []).includes("image")) traits.push("images");
    let label = model.name && model.name !== model.id ? `${model.name} (${model.id})` : model.id;
    if (traits.length) label += ` · ${traits.join(", ")}`;
    if (refOf(model) === defaultRef) label += " · default";
    const option = el("option", null, label);
    option.value = refOf(model);
    group.append(option);
  }
  const wanted = keep || defaultRef;
  if (wanted && [...select.options].some((option) => option.value === wanted)) {
    select.value = wanted;
  }
}

function selectModel(select, model) {
  if (!model) return;
  const ref = refOf(model);
  if (![...select.options].some((option) => option.value === ref)) {
    const option = el("option", null, ref); // a model the list did not offer: still shown
    option.value = ref;
    select.append(option);
  }
  select.value = ref;
}

/** Change the current session's model to the toolbar's choice (that session only). */
export function changeModel() {
  const [provider, ...rest] = $("model").value.split("/");
  send({ type: "set_model", provider, modelId: rest.join("/") });
}

/** Change the current session's thinking level to the toolbar's choice. */
export function changeThinking() {
  send({ type: "set_thinking_level", level: $("thinking").value });
}

/** Fill the model select of new sessions from the daemon (before any session exists). */
export async function loadModelsForNew() {
  const response = await hostSend({ type: "models" });
  if (!response.success) return showNotice(`models: ${response.error}`, true);
  const select = $("new-model");
  fillModels(select, response.data.models, response.data.default);
  select.dataset.loaded = "true";
}
