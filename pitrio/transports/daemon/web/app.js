// The pitrio daemon's page: sessions on the left (/v1/host), one session's chat on the right
// (/v1/sessions/{id}). Plain ES modules, no build step; this one starts and wires the rest.
import { $ } from "./dom.js";
import { askToken, connectHost, readToken, send, state } from "./connection.js";
import {
  changeModel,
  changeThinking,
  hostHandlers,
  newSession,
  onSearchInput,
  submitCommand,
} from "./sessions.js";

function submit(kind) {
  const input = $("prompt");
  const text = input.value.trim();
  if (!text) return;
  const streaming = state.current && state.current.streaming;
  let command = { type: "prompt", message: text };
  if (kind === "followUp") command = { type: "follow_up", message: text };
  else if (streaming) command = { type: "steer", message: text };
  input.value = "";
  submitCommand(command); // with no session yet, it creates one first
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
  $("thinking").onchange = () => changeThinking();
  $("session-search").oninput = () => onSearchInput();
}

function start() {
  state.token = readToken();
  if (!state.token) return askToken(start);
  connectHost(hostHandlers);
}

hostHandlers.onRefused = (message) => askToken(start, message);
wireControls();
start();
