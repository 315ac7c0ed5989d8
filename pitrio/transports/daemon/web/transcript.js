// One session's transcript: messages (markdown), streamed updates, tool cards, the queue,
// usage, and the streaming status of the toolbar. Events it does not draw itself go to the
// dialogs (extension UI) and the run notices (retry, compaction).
import { $, el, followOutput, scrollDown, textOf } from "./dom.js";
import { send, state } from "./connection.js";
import { cancelRender, flush, renderMarkdown, renderSoon } from "./markdown.js";
import {
  findCard, makeCard, setArgs, toolFinished, toolProgress, toolStarted,
} from "./tools.js";
import { clearDialogs, onUiAnswered, onUiRequest } from "./dialogs.js";
import { clearRunNotices, onRunEvent } from "./notices.js";

/** Handle a session event of pi's RPC protocol (everything but responses and lifecycle). */
export function onEvent(current, frame) {
  switch (frame.type) {
    case "agent_start":
      return setStreaming(true);
    case "agent_settled":
      setStreaming(false);
      send({ type: "get_session_stats" });
      // A server may have gone away during the run: its badge follows.
      if ($("mcp").childElementCount) send({ type: "get_state" });
      return;
    case "message_start":
      if (frame.message.role === "assistant") current.view = startAssistant();
      else renderMessage(frame.message);
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
      return toolStarted(cardFor(frame.toolCallId, frame.toolName, frame.args));
    case "tool_execution_update":
      return toolProgress(cardFor(frame.toolCallId, frame.toolName, frame.args), frame.partialResult);
    case "tool_execution_end":
      toolFinished(cardFor(frame.toolCallId, frame.toolName), frame.result, frame.isError, true);
      return scrollDown();
    case "queue_update":
      return renderQueue(frame.steering, frame.followUp);
    case "thinking_level_changed":
      $("thinking").value = frame.level;
      return;
    case "extension_ui_request":
      return onUiRequest(frame);
    case "extension_ui_answered":
      return onUiAnswered(frame.id);
    default:
      return onRunEvent(frame);
  }
}

/** Forget what belonged to the session shown before (dialogs, notices, queue). */
export function resetSessionView() {
  followOutput();
  clearDialogs();
  clearRunNotices();
  renderQueue([], []);
  $("mcp").replaceChildren();
  $("usage").textContent = "";
  delete $("usage").dataset.tokens;
}

/** Replace the transcript with these messages (a get_messages answer). */
export function renderMessages(messages) {
  $("messages").replaceChildren();
  for (const message of messages) renderMessage(message);
}

// A card for a tool call that is not in the transcript (e.g. the page attached mid-run).
function cardFor(callId, name, args) {
  let card = findCard(callId);
  if (!card) {
    card = makeCard(callId, name, args);
    const node = el("div", "msg tool-only");
    node.append(card);
    $("messages").append(node);
    scrollDown();
  }
  return card;
}

function thinkingBlock(text, open) {
  const box = el("details", "thinking");
  box.append(el("summary", null, "Thinking"));
  box.append(el("div", "thinking-text", text));
  box.open = open;
  return box;
}

function markdownBlock(text) {
  const node = el("div", "text md");
  renderMarkdown(node, text);
  return node;
}

function imageBlock(block) {
  const image = el("img", "attachment");
  image.alt = "image";
  image.src = `data:${block.mimeType};base64,${block.data}`;
  return image;
}

function renderAssistant(node, message) {
  for (const block of message.content) {
    if (block.type === "text") node.append(markdownBlock(block.text));
    else if (block.type === "thinking") node.append(thinkingBlock(block.thinking, false));
    else if (block.type === "toolCall") {
      node.append(findCard(block.id) || makeCard(block.id, block.name, block.arguments));
    }
  }
  if (message.stopReason === "error" || message.stopReason === "aborted") {
    node.classList.add("error");
    node.append(el("div", "text", message.errorMessage || message.stopReason));
  }
}

function renderMessage(message, replace) {
  // pi 1.6.0's system messages declare the prompt and the tools: not part of the conversation.
  if (message.role === "system") return null;
  if (message.role === "toolResult") {
    const card = findCard(message.toolCallId);
    if (card) {
      toolFinished(card, message, message.isError, false);
      return card;
    }
  }
  const node = el("div", "msg " + message.role);
  const role = message.role === "toolResult" ? "tool result: " + message.toolName : message.role;
  node.append(el("div", "role", role));
  if (message.role === "assistant") {
    renderAssistant(node, message);
  } else if (message.role === "bashExecution") {
    node.append(el("pre", "text", `$ ${message.command}\n${message.output}`));
  } else if (message.role === "compactionSummary" || message.role === "branchSummary") {
    node.append(markdownBlock(message.summary));
  } else {
    node.append(el("div", "text", textOf(message.content)));
    if (Array.isArray(message.content)) {
      for (const block of message.content) if (block.type === "image") node.append(imageBlock(block));
    }
    if (message.isError) node.classList.add("error");
  }
  if (replace && replace.parentNode) {
    for (const block of replace.querySelectorAll(".md")) cancelRender(block);
    replace.replaceWith(node);
  } else {
    $("messages").append(node);
  }
  scrollDown();
  return node;
}

function startAssistant() {
  const node = el("div", "msg assistant streaming");
  node.append(el("div", "role", "assistant"));
  $("messages").append(node);
  scrollDown();
  return { node, blocks: new Map(), texts: new Map() };
}

function onUpdate(current, update) {
  if (!current.view) current.view = startAssistant();
  const view = current.view;
  const index = update.contentIndex;
  let block = view.blocks.get(index);
  switch (update.type) {
    case "text_start":
      block = el("div", "text md");
      view.texts.set(index, "");
      break;
    case "thinking_start":
      block = thinkingBlock("", true);
      break;
    case "toolcall_start":
      block = makeCard(update.id, update.name);
      view.texts.set(index, "");
      break;
    case "text_delta":
      if (block) {
        view.texts.set(index, (view.texts.get(index) || "") + update.delta);
        renderSoon(block, view.texts.get(index));
      }
      break;
    case "thinking_delta":
      if (block) block.lastChild.textContent += update.delta;
      break;
    case "toolcall_delta":
      if (block) {
        view.texts.set(index, (view.texts.get(index) || "") + update.delta);
        setArgs(block, null, null, view.texts.get(index));
      }
      break;
    case "toolcall_end":
      if (block) {
        block.dataset.call = update.toolCall.id;
        setArgs(block, update.toolCall.name, update.toolCall.arguments);
      }
      break;
    case "text_end":
      if (block) flush();
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

function renderQueue(steering, followUp) {
  const box = $("queue");
  box.replaceChildren();
  const items = [
    ...steering.map((text) => ["steer", "Steering", text]),
    ...followUp.map((text) => ["follow-up", "Follow-up", text]),
  ];
  box.classList.toggle("hidden", items.length === 0);
  if (items.length) box.append(el("div", "queue-title", `Queued (${items.length})`));
  for (const [kind, label, text] of items) {
    const row = el("div", "queue-item " + kind);
    row.append(el("span", "queue-kind", label));
    row.append(el("span", "queue-text", text));
    box.append(row);
  }
}

/** Show a get_session_stats answer in the toolbar (nothing while no token was counted). */
export function renderUsage(stats) {
  // The count shown (or 0) as an attribute: tests and styles can tell "no usage yet" apart.
  $("usage").dataset.tokens = String((stats.tokens && stats.tokens.total) || 0);
  if (!stats.tokens || !stats.tokens.total) {
    $("usage").textContent = "";
    return;
  }
  const parts = [`${stats.tokens.total} tokens`, `$${stats.cost.toFixed(4)}`];
  const usage = stats.contextUsage;
  if (usage && usage.percent !== null && usage.percent !== undefined) {
    parts.push(`context ${usage.percent.toFixed(1)}% of ${usage.contextWindow}`);
  }
  $("usage").textContent = parts.join(" · ");
}

/** The session's MCP servers from get_state's mcpServers (pitrio's field; absent: none). */
export function renderMcpServers(servers) {
  const box = $("mcp");
  box.replaceChildren();
  for (const server of servers || []) {
    const badge = el("span", `mcp-server ${server.status}`, `${server.name}`);
    badge.dataset.status = server.status;
    const tools = server.tools.length === 1 ? "1 tool" : `${server.tools.length} tools`;
    badge.title = `MCP server ${server.name}: ${server.status}, ${tools}` +
      (server.error ? ` (${server.error})` : "");
    box.append(badge);
  }
  // A server still coming up: ask again shortly, so its badge settles on running or failed.
  const pending = (servers || []).some((s) => s.status === "starting");
  if (pending && state.current) setTimeout(() => send({ type: "get_state" }), 1000);
}

/** Whether the current session is running: status text and which buttons apply. */
export function setStreaming(streaming) {
  if (!state.current) return;
  state.current.streaming = Boolean(streaming);
  $("status").textContent = streaming ? "streaming" : "idle";
  $("status").classList.toggle("busy", Boolean(streaming));
  $("send").textContent = streaming ? "Steer" : "Send";
  $("abort").disabled = !streaming;
  $("follow-up").disabled = !streaming;
}
