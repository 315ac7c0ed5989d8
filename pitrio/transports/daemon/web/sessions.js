// The session list (host socket), opening one session, its lifecycle frames and the model
// selects of the toolbar and of new sessions.
import { $, el, showNotice, hideNotice } from "./dom.js";
import { closeSession, connectSession, hostSend, send, state } from "./connection.js";
import { onEvent, renderMessages, renderUsage, setStreaming } from "./transcript.js";

// -- host frames ----------------------------------------------------------------------------

/** The host socket's handlers (see connectHost). */
export const hostHandlers = {
  onResponse(frame) {
    if (frame.command === "list" && frame.success) renderSessions(frame.data.sessions);
  },
  onEvent(frame) {
    scheduleList();
    if (state.current && frame.sessionId === state.current.id) {
      if (frame.type === "session_busy") setStreaming(true);
      if (frame.type === "session_idle") setStreaming(false);
    }
  },
  onRefused() {},
};

let listTimer = null;
function scheduleList() {
  if (listTimer) return;
  listTimer = setTimeout(() => {
    listTimer = null;
    if (state.host && state.host.readyState === 1) hostSend({ type: "list" });
  }, 250);
}

function renderSessions(sessions) {
  state.sessions = sessions;
  const list = $("sessions");
  list.replaceChildren();
  for (const info of sessions) {
    const item = el("li");
    item.dataset.id = info.id;
    if (state.current && state.current.id === info.id) item.classList.add("active");
    item.append(el("span", "name", info.name || info.firstMessage || info.id));
    const busy = info.isStreaming ? " · streaming" : "";
    item.append(el("span", "meta", `${info.status}${busy} · ${info.messageCount} messages`));
    item.onclick = () => openSession(info.id);
    list.append(item);
  }
}

/** Create a session with the model chosen for new sessions, and open it. */
export async function newSession() {
  const model = $("new-model").value;
  const response = await hostSend({ type: "create", ...(model ? { model } : {}) });
  if (!response.success) return showNotice(response.error, true);
  openSession(response.data.sessionId);
}

// -- one session ----------------------------------------------------------------------------

const sessionHandlers = {
  onFrame,
  onClosed(current, event) {
    delete document.body.dataset.connected;
    if (event.code === 1000 && event.reason === "session closed") {
      return showNotice("This session was closed.", true);
    }
    showNotice(`Disconnected (${event.code} ${event.reason || ""}); reconnecting…`, false);
    setTimeout(() => state.current === current && connectSession(true, sessionHandlers), 800);
  },
};

/** Show the session `id` (closing the one shown before). */
export function openSession(id) {
  closeSession();
  delete document.body.dataset.connected;
  state.current = { id, lastSeq: 0, stream: null, streaming: false, view: null };
  $("messages").replaceChildren();
  $("session-title").textContent = id;
  for (const item of $("sessions").children) {
    item.classList.toggle("active", item.dataset.id === id);
  }
  connectSession(false, sessionHandlers);
}

function onFrame(current, frame) {
  if (state.current !== current) return;
  if (typeof frame.seq === "number" && frame.type !== "attached" && frame.type !== "response") {
    current.lastSeq = Math.max(current.lastSeq, frame.seq);
  }
  switch (frame.type) {
    case "attached":
      current.stream = frame.stream;
      current.lastSeq = Math.max(current.lastSeq, frame.seq);
      // An observable "this session's socket is attached" for tests and styles.
      document.body.dataset.connected = current.id;
      hideNotice();
      if (frame.status === "failed") showNotice("Session failed: " + frame.failure, true);
      setStreaming(frame.isStreaming);
      refresh();
      return;
    case "response":
      return onResponse(frame);
    case "resync":
      return refresh();
    case "session_restarted":
      showNotice(`The session crashed and was restarted (${frame.reason}).`, false);
      return refresh();
    case "session_failed":
      return showNotice("Session failed: " + frame.reason, true);
    case "session_closed":
      return showNotice("This session was closed.", true);
    default:
      return onEvent(current, frame);
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
  switch (frame.command) {
    case "get_messages":
      renderMessages(data.messages);
      break;
    case "get_state":
      $("thinking").value = data.thinkingLevel;
      $("session-title").textContent = data.sessionName || state.current.id;
      setStreaming(data.isStreaming);
      selectModel($("model"), data.model);
      break;
    case "get_available_models":
      fillModels($("model"), data.models);
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

function fillModels(select, models) {
  const keep = select.value;
  select.replaceChildren();
  for (const model of models) {
    const option = el("option", null, `${model.provider}/${model.id}`);
    option.value = `${model.provider}/${model.id}`;
    select.append(option);
  }
  if (keep) select.value = keep;
}

function selectModel(select, model) {
  if (model) select.value = `${model.provider}/${model.id}`;
}

/** Change the current session's model to the toolbar's choice. */
export function changeModel() {
  const [provider, ...rest] = $("model").value.split("/");
  send({ type: "set_model", provider, modelId: rest.join("/") });
}

/** Fill the model select of new sessions. */
export function loadModelsForNew() {
  // The model list of new sessions comes from any session; before one exists, offer the
  // daemon's default (empty value) and the offline echo model.
  const select = $("new-model");
  select.replaceChildren();
  for (const [value, label] of [["", "default model"], ["faux/echo", "faux/echo"]]) {
    const option = el("option", null, label);
    option.value = value;
    select.append(option);
  }
}
