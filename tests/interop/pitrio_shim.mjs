// Stands in for pi's cli.js when pi 1.6.0's RpcClient drives pitrio: RpcClient starts
// `node CLI_PATH --mode rpc ...`, so this script runs `$PITRIO_BIN` with the same arguments and
// the same stdio, passes SIGTERM/SIGINT on, and exits as pitrio did.
import { spawn } from "node:child_process";

const child = spawn(process.env.PITRIO_BIN, process.argv.slice(2), { stdio: "inherit" });
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
