// The page's two kinds of socket: the host socket (/v1/host: session list, models, create,
// rename, delete) and one session socket (/v1/sessions/{id}: pi's RPC protocol with delta
// message_updates and seq). The token travels only in the address's fragment and as a
// websocket subprotocol. Both sockets reconnect on their own after a drop, with a growing
// delay; the host socket's state shows in a banner with a "Retry now" button.
import { $ } from "./dom.js";

const wsBase = (location.protocol === "https:" ? "wss://" : "ws://") + location.host;
const RETRY_DELAYS = [1, 2, 4, 8, 10]; // seconds, the last one repeats
const SESSION_RETRY_DELAYS = [0.5, 1, 2, 3]; // a session socket: a quicker resume

/** What the page knows; the one mutable object the modules share. */
export const state = {
  token: null,
  host: null,
  hostOpened: false,
  sessions: [],
  // {id, ws, lastSeq, stream, streaming, view, closing, attached, outbox, unanswered,
  //  attempts, reconnecting, replayUntil, replayFrom}
  current: null,
  requestId: 0,
  // A session remembers the ids its commands carried (a repeated id is answered, not applied
  // again): ids unique to this page load, so a reloaded page's first prompt is never taken
  // for an earlier page's.
  idPrefix: Math.random().toString(36).slice(2, 10) + "-",
  pending: new Map(),
};

function protocols() {
  // No token yet: try without one (a daemon started with --no-auth needs none).
  return state.token ? ["pitrio.v1", "pitrio.token." + state.token] : ["pitrio.v1"];
}

function retryDelay(attempts, delays = RETRY_DELAYS) {
  return delays[Math.min(attempts, delays.length - 1)];
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

/** Show the login form (with `message` as its error, if any); `onToken` runs once a token
 * was entered. */
export function askToken(onToken, message) {
  $("login").classList.remove("hidden");
  const error = $("login-error");
  error.textContent = message || "";
  error.classList.toggle("hidden", !message);
  if (message) $("token-input").focus();
  $("login-form").onsubmit = (event) => {
    event.preventDefault();
    const value = $("token-input").value.trim();
    if (!value) return;
    sessionStorage.setItem("pitrio-token", value);
    $("login").classList.add("hidden");
    onToken();
  };
}

/**
 * Why a socket could not open: "refused" (the daemon answered 401: the token is wrong),
 * "unreachable" (nothing answered) or "other". A browser does not tell a websocket the HTTP
 * status of a refused upgrade, so the page asks /metrics, which needs the same token.
 */
async function whyRefused() {
  try {
    const headers = state.token ? { Authorization: "Bearer " + state.token } : {};
    const reply = await fetch("/metrics", { headers, cache: "no-store" });
    return reply.status === 401 ? "refused" : "other";
  } catch (error) {
    return "unreachable";
  }
}

// -- the banner -----------------------------------------------------------------------------

let bannerTimer = null;

/** Show the connection banner: `text`, a countdown to `at` (ms) and a Retry button. */
function showBanner(text, at, retry) {
  clearInterval(bannerTimer);
  const banner = $("banner");
  const render = () => {
    const seconds = Math.max(0, Math.ceil((at - Date.now()) / 1000));
    $("banner-text").textContent = `${text} Retrying in ${seconds} s.`;
  };
  render();
  bannerTimer = setInterval(render, 250);
  $("banner-retry").onclick = retry;
  banner.classList.remove("hidden");
}

function hideBanner() {
  clearInterval(bannerTimer);
  $("banner").classList.add("hidden");
}

// -- the host socket ------------------------------------------------------------------------

let hostAttempts = 0;
let hostTimer = null;

/**
 * Open the host socket. `handlers`: onOpen() once it is up (again), onResponse(frame) for
 * every response, onEvent(frame) for session_* events, onTrustRequest(frame, reply) for the
 * project-trust question of a session this page creates, onRefused(message) when the daemon
 * refused the token.
 */
export function connectHost(handlers) {
  clearTimeout(hostTimer);
  const ws = new WebSocket(wsBase + "/v1/host", protocols());
  state.host = ws;
  let opened = false;
  ws.onopen = () => {
    opened = true;
    hostAttempts = 0;
    $("host-status").classList.add("on");
    hideBanner();
    handlers.onOpen();
  };
  ws.onclose = async () => {
    if (state.host !== ws) return;
    $("host-status").classList.remove("on");
    for (const [id, done] of state.pending) {
      state.pending.delete(id);
      done({ type: "response", id, success: false, error: "the connection to the daemon was lost" });
    }
    const why = opened ? "lost" : await whyRefused();
    if (why === "refused") {
      // Without a token, the form is all the daemon asks for; with one, it was wrong.
      const message = state.token
        ? "The token was refused. Paste the token from ~/.pitrio/agent/daemon-token, " +
          "or open the address pitrio serve printed."
        : "";
      sessionStorage.removeItem("pitrio-token");
      handlers.onRefused(message);
      return;
    }
    const delay = retryDelay(hostAttempts++);
    const retry = () => connectHost(handlers);
    hostTimer = setTimeout(retry, delay * 1000);
    const text =
      why === "lost" ? "Lost the connection to the daemon." : "Cannot reach the daemon.";
    showBanner(text, Date.now() + delay * 1000, retry);
  };
  ws.onmessage = (event) => {
    const frame = JSON.parse(event.data);
    if (frame.type === "host_attached") state.hostOpened = true;
    if (frame.type === "response") {
      const done = state.pending.get(frame.id);
      state.pending.delete(frame.id);
      handlers.onResponse(frame);
      if (done) done(frame);
    } else if (frame.type === "project_trust_request") {
      handlers.onTrustRequest?.(frame, (value) =>
        ws.send(JSON.stringify({ type: "project_trust_response", id: frame.id, value })),
      );
    } else if (frame.type && frame.type.startsWith("session_")) {
      handlers.onEvent(frame);
    }
  };
}

/** Send a host command; resolves with its response frame (a failed one when the host
 * socket is not open or closes first). */
export function hostSend(command) {
  const id = "h" + state.idPrefix + ++state.requestId;
  if (!state.host || state.host.readyState !== 1) {
    const error = "not connected to the daemon";
    return Promise.resolve({ type: "response", id, command: command.type, success: false, error });
  }
  return new Promise((resolve) => {
    state.pending.set(id, resolve);
    state.host.send(JSON.stringify({ id, ...command }));
  });
}

// -- the session socket ---------------------------------------------------------------------

/**
 * Open the current session's socket; with `resume`, from the last seq seen (the URL form of
 * resume: the attached frame comes first, then every frame missed, or a resync notice).
 * `handlers`: onFrame(current, frame), onClosed(current, event) when it closed on its own.
 */
export function connectSession(resume, handlers) {
  const current = state.current;
  let url = wsBase + "/v1/sessions/" + encodeURIComponent(current.id);
  if (resume && current.stream) url += `?since=${current.lastSeq}&stream=${current.stream}`;
  current.reconnecting = Boolean(resume);
  const ws = new WebSocket(url, protocols());
  current.ws = ws;
  ws.onmessage = (event) => handlers.onFrame(current, JSON.parse(event.data));
  ws.onclose = (event) => {
    if (current.ws !== ws) return;
    current.attached = false;
    if (current.closing || state.current !== current) return;
    handlers.onClosed(current, event);
  };
}

/** Reconnect the current session after a drop, after the next delay; returns the delay. */
export function reconnectSession(current, handlers) {
  const delay = retryDelay(current.attempts++, SESSION_RETRY_DELAYS);
  current.timer = setTimeout(() => {
    if (state.current === current && !current.closing) connectSession(true, handlers);
  }, delay * 1000);
  return delay;
}

/** Close the current session's socket on purpose (switching sessions, deleted). */
export function closeSession() {
  const current = state.current;
  if (current) {
    current.closing = true;
    clearTimeout(current.timer);
    if (current.ws) current.ws.close(1000);
  }
}

// Commands kept until answered, to be sent again, with the same id, after a reconnect: the
// daemon applies an id once, so one that never arrived runs and one that did is only answered.
const RESENT = new Set(["prompt", "steer", "follow_up", "bash"]);

/** Send an RPC command on the current session's socket; its id, or null when not open. */
export function send(command) {
  const current = state.current;
  if (!current || !current.ws || current.ws.readyState !== 1) return null;
  const id = command.id || "s" + state.idPrefix + ++state.requestId;
  const sent = { ...command, id };
  if (RESENT.has(command.type)) current.unanswered.set(id, sent);
  current.ws.send(JSON.stringify(sent));
  return id;
}

/** A response arrived: its command needs no resending. */
export function answered(current, id) {
  current.unanswered.delete(id);
}

/** Send again what was sent on a lost socket and not answered (before the outbox). */
export function resendUnanswered(current) {
  for (const command of [...current.unanswered.values()]) {
    if (send(command) === null) return;
  }
}

/** Send now when the session is attached, else once it is (see flushOutbox); whether it
 * went now. */
export function sendSoon(command) {
  const current = state.current;
  if (current && current.attached && send(command) !== null) return true;
  if (current) current.outbox.push(command);
  return false;
}

/** Send what waited for the session to attach. */
export function flushOutbox(current) {
  while (current.outbox.length && current.attached) {
    if (send(current.outbox[0]) === null) return;
    current.outbox.shift();
  }
}
