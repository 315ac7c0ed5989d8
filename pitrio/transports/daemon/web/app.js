// The pitrio daemon's page: sessions on the left (/v1/host), one session's chat on the right
// (/v1/sessions/{id}). Plain ES modules, no build step; this one starts and wires the rest.
import { $ } from "./dom.js";
import { askToken, connectHost, readToken, send, state } from "./connection.js";
import { changeModel, hostHandlers, loadModelsForNew, newSession } from "./sessions.js";

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
  $("model").onchange = () => changeModel();
  $("thinking").onchange = () => send({ type: "set_thinking_level", level: $("thinking").value });
}

function start() {
  state.token = readToken();
  if (!state.token) return askToken(start);
  connectHost(hostHandlers);
}

hostHandlers.onRefused = () => askToken(start);
wireControls();
loadModelsForNew();
start();
