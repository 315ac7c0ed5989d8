// Appends messages to a session file with pi 1.6.0's own SessionManager, as a pi sharing the
// agent directory does while pitrio holds the file (pi takes no lock), then reports what pi makes
// of the file (issue 36, item 3).
//
// Run by tests/interop/test_pi_session_manager_foreign.py with the node 22 installed beside pi:
//   node session_manager_append.mjs CONFIG_JSON
// CONFIG_JSON: {"module": path of dist/core/session-manager.js, "file": path, "messages": [pi
// messages to append, in order, or null to only read], "output": path}.
// Output: {appended: [ids], leafId, entries: [[id, parentId]], context: [[role, text]]}.

import { writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const config = JSON.parse(process.argv[2]);
const { SessionManager } = await import(pathToFileURL(config.module).href);
const manager = SessionManager.open(config.file);
const appended = (config.messages ?? []).map((message) => manager.appendMessage(message));
// What a pi opening the file now sees (a fresh manager: the file, not this one's memory).
const reread = SessionManager.open(config.file);
const text = (content) =>
	typeof content === "string" ? content : content.map((part) => part.text ?? "").join("");
writeFileSync(
	config.output,
	JSON.stringify({
		appended,
		leafId: reread.getLeafId(),
		entries: reread.getEntries().map((e) => [e.id, e.parentId]),
		context: reread.buildSessionContext().messages.map((m) => [m.role, text(m.content ?? "")]),
	}),
);
