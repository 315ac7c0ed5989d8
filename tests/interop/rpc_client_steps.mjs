// Drives one agent through every method of pi 1.6.0's own RpcClient and prints what each returned.
//
// Run by tests/interop/test_pi_rpc_client.py with the node 22 installed beside pi:
//   node rpc_client_steps.mjs CONFIG_JSON
// CONFIG_JSON: {"client": path of dist/modes/rpc/rpc-client.js, "cli": the script RpcClient runs
// with node (pi's cli.js, or pitrio_shim.mjs), "cwd", "env", "exportPath", "output"}.
// Every step is recorded as {name, ok, value} or {name, ok: false, error}; a failed step does not
// stop the run (the next steps still say what they can). The whole record is written to "output" as JSON; the agent's stderr goes to ours. The mock LLM's script (set by the Python side) answers
// by the prompt's words: "TOOLCALL" a bash tool call, "SLOWREPLY" a reply streamed in slow deltas,
// "SLOWABORT" one whose second delta comes long after the first (aborted in between),
// a compaction request a summary, anything else "ok".

import { writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const config = JSON.parse(process.argv[2]);
const { RpcClient } = await import(pathToFileURL(config.client).href);
const client = new RpcClient({ cliPath: config.cli, cwd: config.cwd, env: config.env });
const steps = [];
const STEP_MS = 90000;

function withTimeout(promise, what) {
	let timer;
	const limit = new Promise((_, reject) => {
		timer = setTimeout(() => reject(new Error(`step timed out: ${what}`)), STEP_MS);
	});
	return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

async function step(name, fn) {
	try {
		const value = await withTimeout(Promise.resolve().then(fn), name);
		steps.push({ name, ok: true, value: value === undefined ? null : value });
		return value;
	} catch (error) {
		steps.push({ name, ok: false, error: String(error?.message ?? error).split("\n")[0] });
		return undefined;
	}
}

// The first event of `type` (optionally matching `where`) from now on.
function nextEvent(type, where = () => true) {
	return new Promise((resolve) => {
		const off = client.onEvent((event) => {
			if (event.type === type && where(event)) {
				off();
				resolve(event);
			}
		});
	});
}

// A compact picture of a run's events: type, and what a client looks at in each.
function summarize(events) {
	return (events ?? []).map((e) => {
		const out = { type: e.type };
		const m = e.message;
		if (m && (e.type === "message_start" || e.type === "message_end")) {
			out.role = m.role;
			if (m.stopReason !== undefined) out.stopReason = m.stopReason;
		}
		if (e.toolName !== undefined) out.toolName = e.toolName;
		if (e.type === "agent_settled" || e.type === "agent_end") {
			for (const key of ["aborted", "willRetry"]) if (e[key] !== undefined) out[key] = e[key];
		}
		return out;
	});
}

function collectUntilSettled() {
	const events = [];
	const off = client.onEvent((event) => events.push(event));
	return nextEvent("agent_settled").then(() => {
		off();
		return events;
	});
}

const all = [];
client.onEvent((event) => all.push(event.type));

await step("start", () => client.start());
// Wait until the agent answers at all: RpcClient gives a request 30 s, and on a busy machine
// pi 1.6.0's start took longer (a request that timed out leaves nothing behind to compare).
for (let attempt = 0; attempt < 5; attempt++) {
	try {
		await client.getState();
		break;
	} catch (error) {
		if (!String(error?.message).startsWith("Timeout waiting for response")) break;
	}
}
const state0 = await step("getState (fresh)", () => client.getState());
await step("getAvailableModels", () => client.getAvailableModels());
await step("getAvailableThinkingLevels (non-reasoning model)", () => client.getAvailableThinkingLevels());
await step("getCommands", () => client.getCommands());
await step("prompt('hello') -> disposition", () => client.prompt("hello"));
await step("waitForIdle (after prompt)", () => client.waitForIdle(60000));
await step("promptAndWait('hello again') events", async () =>
	summarize(await client.promptAndWait("hello again", undefined, 60000)),
);
await step("getLastAssistantText", () => client.getLastAssistantText());
await step("promptAndWait(tool call) events", async () =>
	summarize(await client.promptAndWait("TOOLCALL please run it", undefined, 60000)),
);
await step("getMessages (after a tool turn)", () => client.getMessages());
await step("bash('echo from-bash')", () => client.bash("echo from-bash"));
await step("abortBash (nothing running)", () => client.abortBash());
const entries = await step("getEntries()", () => client.getEntries());
await step("getEntries(since: the 2nd entry)", () => {
	const second = entries?.entries?.[1]?.id;
	return client.getEntries(second);
});
await step("getTree", () => client.getTree());
const forkable = await step("getForkMessages", () => client.getForkMessages());
await step("setThinkingLevel('high') on a non-reasoning model", () => client.setThinkingLevel("high"));
await step("cycleThinkingLevel (non-reasoning model)", () => client.cycleThinkingLevel());
await step("setModel(mock, mock-reasoner)", () => client.setModel("mock", "mock-reasoner"));
await step("getAvailableThinkingLevels (reasoning model)", () => client.getAvailableThinkingLevels());
await step("setThinkingLevel('max')", () => client.setThinkingLevel("max"));
await step("getState.thinkingLevel after 'max'", async () => (await client.getState()).thinkingLevel);
await step("cycleThinkingLevel (reasoning model)", () => client.cycleThinkingLevel());
await step("setThinkingLevel('low')", () => client.setThinkingLevel("low"));
await step("cycleModel", () => client.cycleModel());
await step("getState.model after cycleModel", async () => {
	const s = await client.getState();
	return { model: s.model && { provider: s.model.provider, id: s.model.id }, thinkingLevel: s.thinkingLevel };
});
await step("setSteeringMode('all')", () => client.setSteeringMode("all"));
await step("setFollowUpMode('all')", () => client.setFollowUpMode("all"));

// A slow reply: steer and follow up while it streams, take them back, then abort it.
await step("slow prompt, steer, followUp, clearQueue, abort", async () => {
	const streaming = nextEvent("message_update");
	const settled = collectUntilSettled();
	const disposition = await client.prompt("SLOWABORT one");
	await streaming;
	const steer = await client.steer("steer-one");
	const followUp = await client.followUp("follow-one");
	const queuedPrompt = await client.prompt("queued-prompt", undefined, "followUp");
	const cleared = await client.clearQueue();
	await client.abort();
	const events = await settled;
	return { disposition, steer, followUp, queuedPrompt, cleared, events: summarize(events) };
});
await step("getLastAssistantText (after an aborted reply)", () => client.getLastAssistantText());
await step("slow prompt with a follow-up, waitForIdle", async () => {
	const streaming = nextEvent("message_update");
	const settled = collectUntilSettled();
	await client.prompt("SLOWREPLY two");
	await streaming;
	const followUp = await client.followUp("follow-two");
	const events = await settled;
	return { followUp, events: summarize(events) };
});
await step("getLastAssistantText (after the follow-up)", () => client.getLastAssistantText());
await step("setAutoCompaction(false)", () => client.setAutoCompaction(false));
await step("setAutoRetry(false)", () => client.setAutoRetry(false));
await step("abortRetry (nothing retrying)", () => client.abortRetry());
await step("compact('keep it short')", () => client.compact("keep it short"));
await step("getMessages (after compaction)", () => client.getMessages());
await step("getSessionStats", () => client.getSessionStats());
await step("setSessionName('named session')", () => client.setSessionName("named session"));
await step("getState (named)", () => client.getState());
await step("exportHtml(path)", () => client.exportHtml(config.exportPath));
await step("fork(the second user message)", () => client.fork(forkable?.[1]?.entryId));
await step("getMessages (after fork)", () => client.getMessages());
await step("clone", () => client.clone());
await step("getEntries (after clone)", () => client.getEntries());
await step("newSession(parent)", () => client.newSession(state0?.sessionFile));
await step("getMessages (new session)", () => client.getMessages());
await step("switchSession(the first session)", () => client.switchSession(state0?.sessionFile));
await step("getState (switched back)", () => client.getState());
await step("collectEvents of a prompt", async () => {
	const collecting = client.collectEvents(60000);
	await client.prompt("after the switch");
	return summarize(await collecting);
});
await step("getStderr is a string", () => typeof client.getStderr());
await step("stop", () => client.stop());

writeFileSync(config.output, JSON.stringify({ steps, eventTypes: all }));
process.exit(0);
