// The pitrio daemon's page: sessions on the left (/v1/host), one session's chat on the right
// (/v1/sessions/{id}, pi's RPC protocol with delta message_updates and per-session seq).
// No build step, no dependencies. Untrusted text only ever goes through textContent.
"use strict";

const $ = (id) => document.getElementById(id);
const wsBase = (location.protocol === "https:" ? "wss://" : "ws://") + location.host;

const state = {
  token: null,
  host: null,
  sessions: [],
  current: null, // {id, ws, lastSeq, stream, streaming, view}
  requestId: 0,
  pending: new Map(),
};

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function protocols() {
  return ["pitrio.v1", "pitrio.token." + state.token];
}

// -- token ----------------------------------------------------------------------------------

function readToken() {
  const match = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem("pitrio-token", decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("pitrio-token");
}

function askToken() {
  $("login").classList.remove("hidden");
  $("login-form").onsubmit = (event) => {
    event.preventDefault();
    const value = $("token-input").value.trim();
    if (!value) return;
    sessionStorage.setItem("pitrio-token", value);
    $("login").classList.add("hidden");
    start();
  };
}

// -- the host socket ------------------------------------------------------------------------

function connectHost() {
  const ws = new WebSocket(wsBase + "/v1/host", protocols());
  state.host = ws;
  ws.onopen = () => {
    $("host-status").classList.add("on");
    hostSend({ type: "list" });
  };
  ws.onclose = (event) => {
    $("host-status").classList.remove("on");
    if (event.code === 1006 && state.sessions.length === 0 && !state.hostOpened) {
      sessionStorage.removeItem("pitrio-token");
      askToken();
      return;
    }
    setTimeout(connectHost, 1000);
  };
  ws.onmessage = (event) => {
    const frame = JSON.parse(event.data);
    if (frame.type === "host_attached") state.hostOpened = true;
    if (frame.type === "response") {
      const done = state.pending.get(frame.id);
      state.pending.delete(frame.id);
      if (frame.command === "list" && frame.success) renderSessions(frame.data.sessions);
      if (done) done(frame);
    } else if (frame.type && frame.type.startsWith("session_")) {
      scheduleList();
      if (state.current && frame.sessionId === state.current.id) {
        if (frame.type === "session_busy") setStreaming(true);
        if (frame.type === "session_idle") setStreaming(false);
      }
    }
  };
}

function hostSend(command) {
  const id = "h" + ++state.requestId;
  return new Promise((resolve) => {
    state.pending.set(id, resolve);
    state.host.send(JSON.stringify({ id, ...command }));
  });
}

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

async function newSession() {
  const model = $("new-model").value;
  const response = await hostSend({ type: "create", ...(model ? { model } : {}) });
  if (!response.success) return showNotice(response.error, true);
  openSession(response.data.sessionId);
}

// -- one session ----------------------------------------------------------------------------

function openSession(id) {
  if (state.current && state.current.ws) {
    state.current.closing = true;
    state.current.ws.close(1000);
  }
  state.current = { id, lastSeq: 0, stream: null, streaming: false, view: null };
  $("messages").replaceChildren();
  $("session-title").textContent = id;
  for (const item of $("sessions").children) {
    item.classList.toggle("active", item.dataset.id === id);
  }
  connectSession(false);
}

function connectSession(resume) {
  const current = state.current;
  let url = wsBase + "/v1/sessions/" + encodeURIComponent(current.id);
  if (resume && current.stream) url += `?since=${current.lastSeq}&stream=${current.stream}`;
  const ws = new WebSocket(url, protocols());
  current.ws = ws;
  ws.onmessage = (event) => onFrame(current, JSON.parse(event.data));
  ws.onclose = (event) => {
    if (current.closing || state.current !== current) return;
    if (event.code === 1000 && event.reason === "session closed") {
      return showNotice("This session was closed.", true);
    }
    showNotice(`Disconnected (${event.code} ${event.reason || ""}); reconnecting…`, false);
    setTimeout(() => state.current === current && connectSession(true), 800);
  };
}

function send(command) {
  const current = state.current;
  if (!current || !current.ws || current.ws.readyState !== 1) return null;
  const id = "s" + ++state.requestId;
  current.ws.send(JSON.stringify({ id, ...command }));
  return id;
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
    case "agent_start":
      return setStreaming(true);
    case "agent_settled":
      setStreaming(false);
      send({ type: "get_session_stats" });
      return;
    case "message_start":
      if (frame.message.role === "assistant") current.view = startAssistant();
      else if (frame.message.role !== "assistant") renderMessage(frame.message);
      return;
    case "message_update":
      return onUpdate(current, frame.assistantMessageEvent);
    case "message_end":
      if (frame.message.role === "assistant") {
        const node = renderMessage(frame.message, current.view && current.view.node);
        current.view = null;
        return node;
      }
      return;
    case "tool_execution_start":
      return toolStart(frame);
    case "tool_execution_update":
      return toolOutput(frame.toolCallId, frame.partialResult, false, true);
    case "tool_execution_end":
      return toolOutput(frame.toolCallId, frame.result, frame.isError, false);
    case "queue_update":
      return renderQueue(frame.steering, frame.followUp);
    case "thinking_level_changed":
      $("thinking").value = frame.level;
      return;
    case "compaction_start":
      return showNotice("Compacting the context…", false);
    case "compaction_end":
      if (frame.errorMessage) showNotice(frame.errorMessage, true);
      else hideNotice();
      return;
    default:
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
  switch (frame.command) {
    case "get_messages":
      $("messages").replaceChildren();
      for (const message of data.messages) renderMessage(message);
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

// -- rendering ------------------------------------------------------------------------------

function scrollDown() {
  const box = $("messages");
  box.scrollTop = box.scrollHeight;
}

function textOf(content) {
  if (typeof content === "string") return content;
  return (content || []).filter((b) => b.type === "text").map((b) => b.text).join("\n");
}

function renderMessage(message, replace) {
  const node = el("div", "msg " + message.role);
  const role = message.role === "toolResult" ? "tool result: " + message.toolName : message.role;
  node.append(el("div", "role", role));
  if (message.role === "assistant") {
    for (const block of message.content) {
      if (block.type === "text") node.append(el("div", "text", block.text));
      else if (block.type === "thinking") node.append(el("div", "thinking", block.thinking));
      else if (block.type === "toolCall") {
        const tool = el("div", "tool");
        tool.dataset.call = block.id;
        tool.append(el("div", "head", block.name));
        tool.append(el("pre", null, JSON.stringify(block.arguments, null, 2)));
        node.append(tool);
      }
    }
    if (message.stopReason === "error" || message.stopReason === "aborted") {
      node.classList.add("error");
      node.append(el("div", "text", message.errorMessage || message.stopReason));
    }
  } else if (message.role === "bashExecution") {
    node.append(el("pre", "text", `$ ${message.command}\n${message.output}`));
  } else if (message.role === "compactionSummary" || message.role === "branchSummary") {
    node.append(el("div", "text", message.summary));
  } else {
    node.append(el("div", "text", textOf(message.content)));
    if (message.isError) node.classList.add("error");
  }
  if (replace && replace.parentNode) replace.replaceWith(node);
  else $("messages").append(node);
  scrollDown();
  return node;
}

function startAssistant() {
  const node = el("div", "msg assistant streaming");
  node.append(el("div", "role", "assistant"));
  $("messages").append(node);
  return { node, blocks: new Map() };
}

function onUpdate(current, update) {
  if (!current.view) current.view = startAssistant();
  const view = current.view;
  const index = update.contentIndex;
  let block = view.blocks.get(index);
  switch (update.type) {
    case "text_start":
      block = el("div", "text", "");
      break;
    case "thinking_start":
      block = el("div", "thinking", "");
      break;
    case "toolcall_start":
      block = el("div", "tool");
      block.dataset.call = update.id || "";
      block.append(el("div", "head", update.name || "tool call"));
      block.append(el("pre", null, ""));
      break;
    case "text_delta":
    case "thinking_delta":
      if (block) block.textContent += update.delta;
      break;
    case "toolcall_delta":
      if (block) block.lastChild.textContent += update.delta;
      break;
    case "toolcall_end":
      if (block) block.lastChild.textContent = JSON.stringify(update.toolCall.arguments, null, 2);
      break;
    default:
      break;
  }
  if (block && !view.blocks.has(index)) {
    view.blocks.set(index, block);
    view.node.append(block);
  }
  scrollDown();
}

function toolStart(frame) {
  const node = el("div", "msg tool running");
  node.dataset.execution = frame.toolCallId;
  node.append(el("div", "head", `${frame.toolName} ${JSON.stringify(frame.args)}`));
  node.append(el("pre", null, ""));
  $("messages").append(node);
  scrollDown();
}

function toolOutput(callId, result, isError, running) {
  const node = document.querySelector(`[data-execution="${CSS.escape(callId)}"]`);
  if (!node) return;
  node.lastChild.textContent = textOf(result && result.content);
  node.classList.toggle("running", running);
  node.classList.toggle("failed", Boolean(isError));
}

function renderQueue(steering, followUp) {
  const box = $("queue");
  box.replaceChildren();
  const items = [
    ...steering.map((t) => "steer: " + t),
    ...followUp.map((t) => "follow-up: " + t),
  ];
  box.classList.toggle("hidden", items.length === 0);
  if (items.length) box.append(el("div", null, "Queued"));
  for (const item of items) box.append(el("div", null, item));
}

function renderUsage(stats) {
  const parts = [`${stats.tokens.total} tokens`, `$${stats.cost.toFixed(4)}`];
  const usage = stats.contextUsage;
  if (usage && usage.percent !== null && usage.percent !== undefined) {
    parts.push(`context ${usage.percent.toFixed(1)}% of ${usage.contextWindow}`);
  }
  $("usage").textContent = parts.join(" · ");
}

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

function setStreaming(streaming) {
  if (!state.current) return;
  state.current.streaming = Boolean(streaming);
  $("status").textContent = streaming ? "streaming" : "idle";
  $("status").classList.toggle("busy", Boolean(streaming));
  $("send").textContent = streaming ? "Steer" : "Send";
  $("abort").disabled = !streaming;
  $("follow-up").disabled = !streaming;
}

function showNotice(text, error) {
  const box = $("notice");
  box.textContent = text;
  box.classList.remove("hidden");
  box.classList.toggle("error", Boolean(error));
}

function hideNotice() {
  $("notice").classList.add("hidden");
}

// -- controls -------------------------------------------------------------------------------

function submit(kind) {
  const input = $("prompt");
  const text = input.value.trim();
  if (!text || !state.current) return;
  const streaming = state.current.streaming;
  if (kind === "followUp") send({ type: "follow_up", message: text });
  else if (streaming) send({ type: "steer", message: text });
  else send({ type: "prompt", message: text });
  input.value = "";
}

function wireControls() {
  $("composer").onsubmit = (event) => {
    event.preventDefault();
    submit("default");
  };
  $("prompt").onkeydown = (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      submit("default");
    }
  };
  $("follow-up").onclick = () => submit("followUp");
  $("abort").onclick = () => send({ type: "abort" });
  $("new-session").onclick = () => newSession();
  $("model").onchange = () => {
    const [provider, ...rest] = $("model").value.split("/");
    send({ type: "set_model", provider, modelId: rest.join("/") });
  };
  $("thinking").onchange = () => send({ type: "set_thinking_level", level: $("thinking").value });
}

async function loadModelsForNew() {
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

function start() {
  state.token = readToken();
  if (!state.token) return askToken();
  connectHost();
}

wireControls();
loadModelsForNew();
start();
