// One session's transcript: messages, streamed updates, tool executions, the queue, usage
// and the streaming status of the toolbar.
import { $, el, scrollDown, showNotice, hideNotice, textOf } from "./dom.js";
import { send, state } from "./connection.js";

/** Handle a session event of pi's RPC protocol (everything but responses and lifecycle). */
export function onEvent(current, frame) {
  switch (frame.type) {
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

/** Replace the transcript with these messages (a get_messages answer). */
export function renderMessages(messages) {
  $("messages").replaceChildren();
  for (const message of messages) renderMessage(message);
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

/** Show a get_session_stats answer in the toolbar. */
export function renderUsage(stats) {
  const parts = [`${stats.tokens.total} tokens`, `$${stats.cost.toFixed(4)}`];
  const usage = stats.contextUsage;
  if (usage && usage.percent !== null && usage.percent !== undefined) {
    parts.push(`context ${usage.percent.toFixed(1)}% of ${usage.contextWindow}`);
  }
  $("usage").textContent = parts.join(" · ");
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
