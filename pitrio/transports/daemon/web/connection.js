// The page's two kinds of socket: the host socket (/v1/host: session list, create) and one
// session socket (/v1/sessions/{id}: pi's RPC protocol with delta message_updates and seq).
// The token travels only in the address's fragment and as a websocket subprotocol.
import { $ } from "./dom.js";

const wsBase = (location.protocol === "https:" ? "wss://" : "ws://") + location.host;

/** What the page knows; the one mutable object the modules share. */
export const state = {
  token: null,
  host: null,
  hostOpened: false,
  sessions: [],
  current: null, // {id, ws, lastSeq, stream, streaming, view, closing}
  requestId: 0,
  pending: new Map(),
};

function protocols() {
  return ["pitrio.v1", "pitrio.token." + state.token];
}

// -- token ----------------------------------------------------------------------------------

/** The token from the fragment (then removed from the address bar) or this tab's storage. */
export function readToken() {
  const match = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem("pitrio-token", decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("pitrio-token");
}

/** Show the login form; `onToken` runs once a token was entered. */
export function askToken(onToken) {
  $("login").classList.remove("hidden");
  $("login-form").onsubmit = (event) => {
    event.preventDefault();
    const value = $("token-input").value.trim();
    if (!value) return;
    sessionStorage.setItem("pitrio-token", value);
    $("login").classList.add("hidden");
    onToken();
  };
}

// -- the host socket ------------------------------------------------------------------------

/**
 * Open the host socket. `handlers`: onResponse(frame) for answers to list requests,
 * onEvent(frame) for session_* events, onRefused() when the token was not accepted.
 */
export function connectHost(handlers) {
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
      handlers.onRefused();
      return;
    }
    setTimeout(() => connectHost(handlers), 1000);
  };
  ws.onmessage = (event) => {
    const frame = JSON.parse(event.data);
    if (frame.type === "host_attached") state.hostOpened = true;
    if (frame.type === "response") {
      const done = state.pending.get(frame.id);
      state.pending.delete(frame.id);
      handlers.onResponse(frame);
      if (done) done(frame);
    } else if (frame.type && frame.type.startsWith("session_")) {
      handlers.onEvent(frame);
    }
  };
}

/** Send a host command; resolves with its response frame. */
export function hostSend(command) {
  const id = "h" + ++state.requestId;
  return new Promise((resolve) => {
    state.pending.set(id, resolve);
    state.host.send(JSON.stringify({ id, ...command }));
  });
}

// -- the session socket ---------------------------------------------------------------------

/**
 * Open (or, with `resume`, reopen from the last seq seen) the current session's socket.
 * `handlers`: onFrame(current, frame), onClosed(current, event) when it closed on its own.
 */
export function connectSession(resume, handlers) {
  const current = state.current;
  let url = wsBase + "/v1/sessions/" + encodeURIComponent(current.id);
  if (resume && current.stream) url += `?since=${current.lastSeq}&stream=${current.stream}`;
  const ws = new WebSocket(url, protocols());
  current.ws = ws;
  ws.onmessage = (event) => handlers.onFrame(current, JSON.parse(event.data));
  ws.onclose = (event) => {
    if (current.closing || state.current !== current) return;
    handlers.onClosed(current, event);
  };
}

/** Close the current session's socket on purpose (switching sessions). */
export function closeSession() {
  if (state.current && state.current.ws) {
    state.current.closing = true;
    state.current.ws.close(1000);
  }
}

/** Send an RPC command on the current session's socket; its id, or null when not open. */
export function send(command) {
  const current = state.current;
  if (!current || !current.ws || current.ws.readyState !== 1) return null;
  const id = "s" + ++state.requestId;
  current.ws.send(JSON.stringify({ id, ...command }));
  return id;
}
