// An editor's side of ACP, written with the official TypeScript SDK (@agentclientprotocol/sdk):
// starts `pitrio acp`, plays one phase of the tests' conversation, and prints what it saw as
// JSON (every update, permission request and answer, in the order they came). Every raw line
// pitrio wrote is appended to the file RAW_LOG names, and every line sent to SENT_LOG, for the
// schema check in Python.
//
// usage: node client.mjs SDK_DIR PHASE JSON_ARGS -- COMMAND...
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [sdkDir, phase, argsJson, dashes, ...command] = process.argv.slice(2);
if (dashes !== "--") throw new Error("usage: client.mjs SDK_DIR PHASE JSON -- COMMAND...");
const args = JSON.parse(argsJson);
const acp = await import(pathToFileURL(`${sdkDir}/dist/v1/stable/acp.js`).href);

const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const [forSdk, forLog] = Readable.toWeb(child.stdout).tee();
const logging = (async () => {
  const decoder = new TextDecoder();
  let rest = "";
  for await (const chunk of forLog) {
    rest += decoder.decode(chunk, { stream: true });
    const lines = rest.split("\n");
    rest = lines.pop();
    for (const line of lines) if (line.trim()) appendFileSync(process.env.RAW_LOG, line + "\n");
  }
})();

const seen = [];
let onUpdate = () => {};
const app = acp
  .client({ name: "pitrio-acp-test" })
  .onNotification(acp.methods.client.session.update, (ctx) => {
    seen.push({ kind: "update", params: ctx.params });
    onUpdate(ctx.params);
  })
  .onRequest(acp.methods.client.session.requestPermission, (ctx) => {
    seen.push({ kind: "permission", params: ctx.params });
    const yes = ctx.params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: yes.optionId } };
  });

async function step(name, call) {
  try {
    const value = await call();
    seen.push({ kind: "result", step: name, value });
    return value;
  } catch (error) {
    seen.push({ kind: "error", step: name, code: error.code, message: error.message });
    return undefined;
  }
}

const text = (t) => [{ type: "text", text: t }];
const toChild = Writable.toWeb(child.stdin).getWriter();
const sent = new WritableStream({
  async write(chunk) {
    appendFileSync(process.env.SENT_LOG, chunk);
    await toChild.write(chunk);
  },
  async close() {
    await toChild.close();
  },
});
const stream = acp.ndJsonStream(sent, forSdk);

await app.connectWith(stream, async (agent) => {
  const init = await step("initialize", () =>
    agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} }),
  );
  if (phase === "conversation") {
    const created = await step("new", () =>
      agent.request("session/new", { cwd: args.cwd, mcpServers: [] }),
    );
    const sessionId = created.sessionId;
    await step("prompt-tools", () =>
      agent.request("session/prompt", { sessionId, prompt: text(args.toolPrompt) }),
    );
    await step("prompt-ask", () =>
      agent.request("session/prompt", { sessionId, prompt: text("/ask") }),
    );
    // Cancel once the slow reply has begun to stream.
    let cancelled = false;
    onUpdate = (params) => {
      if (!cancelled && params.update.sessionUpdate === "agent_message_chunk") {
        cancelled = true;
        agent.notify("session/cancel", { sessionId });
      }
    };
    await step("prompt-cancel", () =>
      agent.request("session/prompt", { sessionId, prompt: text("SLOW please") }),
    );
    onUpdate = () => {};
    await step("set-model", () =>
      agent.request("session/set_config_option", { sessionId, configId: "model", value: "faux/faux-think" }),
    );
    await step("set-thinking", () =>
      agent.request("session/set_config_option", { sessionId, configId: "thinking", value: "high" }),
    );
    await step("set-mode", () => agent.request("session/set_mode", { sessionId, modeId: "low" }));
    await step("list", () => agent.request("session/list", {}));
    await step("close", () => agent.request("session/close", { sessionId }));
    await step("prompt-after-close", () =>
      agent.request("session/prompt", { sessionId, prompt: text("still there?") }),
    );
  } else if (phase === "mcp") {
    // The editor's MCP servers: started for the session, their tools called by the model.
    const created = await step("new", () =>
      agent.request("session/new", { cwd: args.cwd, mcpServers: args.mcpServers }),
    );
    await step("prompt-mcp", () =>
      agent.request("session/prompt", { sessionId: created.sessionId, prompt: text(args.prompt) }),
    );
  } else if (phase === "reload") {
    await step("load", () =>
      agent.request("session/load", { sessionId: args.sessionId, cwd: args.cwd, mcpServers: [] }),
    );
    await step("prompt-more", () =>
      agent.request("session/prompt", { sessionId: args.sessionId, prompt: text("hello again") }),
    );
  }
  return init;
});
child.stdin.end();
await new Promise((resolve) => child.on("exit", resolve));
await logging;
process.stdout.write(JSON.stringify(seen) + "\n");
