"""The codemode engine process: one QuickJS context running one script (see ``sandbox``).

Started as ``python -I -S child.py <binding dir>`` by :mod:`.sandbox`; it imports nothing
of pitrio (a cold start of the whole package would cost more than the script), only the
QuickJS binding. It
speaks JSON lines: the first line on stdin is the job (``code``, ``prelude``, ``tools``,
``globals``, ``store``, ``memoryLimit``), later lines settle host calls
(``{"t": "result", "id", "ok", "payload", "properties"}``). On stdout it writes ``call``,
``out``, ``done`` and ``crash`` lines. The parent ends the process when it has what it needs,
so nothing here waits for a goodbye; the process is the unit the parent can always kill, which
a thread running the engine is not.
"""

from __future__ import annotations

import json
import resource
import sys
from typing import Any

# A backstop under the engine's own heap limit: the engine's allocator, the interpreter and the
# binding together must never take the machine's memory, whatever the script does.
ADDRESS_SPACE_MARGIN = 768 * 1024 * 1024


def _send(message: dict[str, Any]) -> None:
    out = sys.stdout.buffer
    out.write(json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n")
    out.flush()


def _exception_json(exc: BaseException) -> str:
    """A script's syntax error as the prelude describes thrown errors."""
    text = str(exc).rstrip("\n")
    head, _, frames = text.partition("\n")
    name, sep, message = head.partition(": ")
    if not sep:
        name, message = "Error", head
    stack = head + ("\n" + frames if frames.strip() else "")
    return json.dumps({"name": name, "message": message, "stack": stack})


def main() -> int:
    """Run the job read from stdin; exit when the script is done or the pipe closes."""
    if len(sys.argv) > 1:  # started without ``site``: the binding's directory is given
        sys.path.insert(0, sys.argv[1])
    import _quickjs  # type: ignore[import-not-found]  # the C module of quickjs-ng

    job = json.loads(sys.stdin.buffer.readline())
    limit = int(job["memoryLimit"])
    try:
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        wanted = limit + ADDRESS_SPACE_MARGIN
        if hard == resource.RLIM_INFINITY or wanted < hard:
            resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))
    except (ValueError, OSError):  # a platform without it keeps the engine's limit only
        pass
    state = {"done": False}

    def bridge(kind: str, a: Any = None, b: Any = None, c: Any = None) -> None:
        if kind in ("call", "global"):
            _send({"t": "call", "target": kind, "id": a, "name": b, "args": c})
        elif kind == "output":
            _send({"t": "out", "kind": a, "data": b, "mime": c})
        elif kind == "done":
            state["done"] = True
            key = "value" if a else "error"
            _send({"t": "done", "ok": bool(a), key: b, "writes": c})

    context = _quickjs.Context()
    context.set_memory_limit(limit)
    context.add_callable("__codemodeBridge", bridge)
    context.set("__codemodeTools", json.dumps(job["tools"]))
    context.set("__codemodeGlobals", json.dumps(job["globals"]))
    context.set("__codemodeStore", json.dumps(job["store"]))
    # The hand-over globals are taken and deleted before the prelude runs: it locks every
    # global there is, and a locked one could no longer be deleted (the bridge would stay
    # reachable from the script).
    context.eval(
        "globalThis.__codemodeApi = (() => {"
        " const given = [__codemodeBridge, __codemodeTools, __codemodeGlobals, __codemodeStore];"
        " delete globalThis.__codemodeBridge; delete globalThis.__codemodeTools;"
        " delete globalThis.__codemodeGlobals; delete globalThis.__codemodeStore;"
        " return (" + job["prelude"] + ")(...given); })()"
    )
    settle = context.eval("__codemodeApi.settle")
    run = context.eval("__codemodeApi.run")
    stalled = context.eval("__codemodeApi.stalled")
    context.eval("delete globalThis.__codemodeApi;")
    try:
        # The first line of the wrapper holds the script's first line, so line numbers match.
        script = context.eval("(async (tools, console) => {" + job["code"] + "\n})")
    except _quickjs.JSException as exc:
        _send({"t": "done", "ok": False, "error": _exception_json(exc), "writes": None})
        return 0

    def drain() -> None:
        while context.execute_pending_job():
            pass
        stalled()

    try:
        run(script)
        drain()
        while not state["done"]:
            line = sys.stdin.buffer.readline()
            if not line:
                return 0
            message = json.loads(line)
            settle(message["id"], message["ok"], message.get("payload"), message.get("properties"))
            drain()
    except Exception as exc:  # the engine itself failed (not the script): the parent reports it
        _send({"t": "crash", "message": f"{type(exc).__name__}: {exc}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
