// Builds one small tree with pi 1.6.0's own SessionManager and reports its entries, so a test can
// compare where pi's branch summaries point with pitrio's (the ``fromId`` of ``branch_summary``).
//
// Run by tests/interop/test_pi_branch_summary.py with the node 22 installed beside pi:
//   node session_manager_branch.mjs CONFIG_JSON
// CONFIG_JSON: {"module": path of dist/core/session-manager.js, "cwd": path, "dir": path,
// "messages": [three pi messages], "output": path}.
// Steps: append the three messages; branch with a summary back to the first; branch with a
// summary to no entry; reset the leaf and branch with a summary back to the first again.
// Output: {entries: [[type, id, parentId, fromId or null]]}.

import { writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const config = JSON.parse(process.argv[2]);
const { SessionManager } = await import(pathToFileURL(config.module).href);
const manager = SessionManager.create(config.cwd, config.dir);
const ids = config.messages.map((message) => manager.appendMessage(message));
manager.branchWithSummary(ids[0], "explored");
manager.branchWithSummary(null, "from the top");
manager.resetLeaf();
manager.branchWithSummary(ids[0], "nothing was left");
writeFileSync(
	config.output,
	JSON.stringify({
		entries: manager.getEntries().map((e) => [e.type, e.id, e.parentId, e.fromId ?? null]),
	}),
);
