// Opens session files with pi 1.6.0's own SessionManager and writes what it makes of each.
//
// Run by tests/interop/test_pi_session_manager.py with the node 22 installed beside pi:
//   node session_manager_open.mjs CONFIG_JSON
// CONFIG_JSON: {"module": path of dist/core/session-manager.js, "files": [paths], "output": path}.
// For each file: {ok, entries (how many SessionManager holds), leafId, context: the
// buildSessionContext() of the leaf (messages, thinkingLevel, model), labels (entry id -> label),
// types (each entry's type, in order), rewritten (whether opening changed the file)}, or
// {ok: false, error}.

import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const config = JSON.parse(process.argv[2]);
const { SessionManager } = await import(pathToFileURL(config.module).href);
const results = {};
for (const file of config.files) {
	const before = readFileSync(file, "utf8");
	try {
		const manager = SessionManager.open(file);
		const entries = manager.getEntries();
		const labels = {};
		for (const entry of entries) {
			const label = manager.getLabel(entry.id);
			if (label !== undefined) labels[entry.id] = label;
		}
		results[file] = {
			ok: true,
			entries: entries.length,
			types: entries.map((e) => e.type),
			leafId: manager.getLeafId(),
			context: manager.buildSessionContext(),
			labels,
			rewritten: readFileSync(file, "utf8") !== before,
		};
	} catch (error) {
		results[file] = { ok: false, error: String(error?.stack ?? error) };
	}
}
writeFileSync(config.output, JSON.stringify(results));
