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
} from "./sessions.js";
import { wireComposer } from "./composer.js";

// On a narrow screen the session list slides over the chat; choosing a session hides it.
function wireSidebar() {
  const toggle = (show) => document.body.classList.toggle("sidebar-open", show);
  $("sidebar-toggle").onclick = () => toggle(!document.body.classList.contains("sidebar-open"));
  $("sidebar-close").onclick = () => toggle(false);
  $("sessions").addEventListener("click", () => toggle(false));
}

function wireControls() {
  wireComposer();
  wireSidebar();
  $("new-session").onclick = () => {
    document.body.classList.remove("sidebar-open");
    newSession();
  };
  $("model").onchange = () => changeModel();
  $("thinking").onchange = () => changeThinking();
  $("session-search").oninput = () => onSearchInput();
  $("compact").onclick = () => send({ type: "compact" });
}

function start() {
  state.token = readToken(); // none: the daemon may need none (--no-auth), else it asks
  connectHost(hostHandlers);
}

hostHandlers.onRefused = (message) => askToken(start, message);
wireControls();
start();
