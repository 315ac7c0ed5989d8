"""What an RPC start does before its first ``get_state`` answer, and how much of it that
answer uses (issue 38: evidence for what a start could leave until after its answer).

    V=$PWD/.venv/bin
    nice -n 19 $V/python -m bench.start_needs --runs 7
    nice -n 19 $V/python -m bench.start_needs --runs 7 --session big.jsonl --config

Each run starts ``pitrio --mode rpc`` (the console script's path: the session file's parsing
child first, then the command line) in a fresh agent directory, home and working directory,
sends one ``get_state`` line and ends the process once the answer is written (``os._exit``:
no shutdown is counted). Two kinds of run:

- one **census**, under ``-X importtime`` and a profile hook: which of pitrio's modules had
  any code of theirs run outside module bodies before the answer, and which attrs classes had
  a generated method called (built instances, compared, hashed); each module's own import
  time (``-X importtime``'s self column, slowed by the hook: compare shares, not ms);
- ``--runs`` **clean** runs: the process's CPU (``time.process_time``, so a shared machine's
  waits are not counted) when the interpreter is ready, once the runtime is imported, and at
  the answer, and the CPU spent building attrs classes, split by whether the census saw the
  class used. Medians are printed as JSON.

Not pitrio's code: a measuring tool; it patches ``attrs``' class builder and ``os.write`` in
its own child only. Not part of the test run.
"""

from __future__ import annotations

# The child runs this file too: only what the interpreter has loaded already is imported at
# the top, so the runtime's import is measured as a start makes it.
import os
import sys
import time
from typing import Any

GET_STATE = b'{"type":"get_state","id":"1"}\n'
IMPORT_LINE = r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)"


def child(census: bool, out: str, argv: list[str]) -> None:
    """One start in this process: hooks on, the console script's path, the report written to
    ``out`` at the first answer, then ``os._exit``."""
    ready = time.process_time()
    import attr._make as make

    builds: dict[str, float] = {}
    began: dict[int, float] = {}
    init, build = make._ClassBuilder.__init__, make._ClassBuilder.build_class

    def timed_init(self: Any, *args: Any, **kwargs: Any) -> None:
        start = time.process_time()
        init(self, *args, **kwargs)
        began[id(self)] = time.process_time() - start

    def timed_build(self: Any) -> type:
        start = time.process_time()
        cls = build(self)
        spent = began.pop(id(self), 0.0) + time.process_time() - start
        builds[f"{cls.__module__}.{cls.__qualname__}"] = spent
        return cls

    make._ClassBuilder.__init__ = timed_init  # type: ignore[method-assign]
    make._ClassBuilder.build_class = timed_build  # type: ignore[method-assign]

    files: set[str] = set()
    classes: set[str] = set()

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_name == "<module>":
            return
        name = frame.f_code.co_filename
        if name.startswith("<attrs generated"):
            classes.add(name.split()[3].rstrip(">"))
            return
        outer = frame.f_back
        while outer is not None:  # a call made by a module's body is the import's
            if outer.f_code.co_name == "<module>" and outer.f_code.co_filename != __file__:
                return
            outer = outer.f_back
        files.add(name)

    marks: dict[str, float] = {"ready": ready}
    write = os.write

    def first_write(fd: int, data: Any) -> int:
        written = write(fd, data)
        if fd > 2:
            sys.setprofile(None)
            marks["answer"] = time.process_time()
            report: dict[str, Any] = {"marks": marks, "builds": builds}
            if census:
                loaded = {n: getattr(m, "__file__", None) for n, m in list(sys.modules.items())}
                ran = {n for n, f in loaded.items() if f in files}
                for qualified in classes:  # a class used: its module ran
                    owner = _owner(qualified, set(loaded))
                    if owner is not None:
                        ran.add(owner)
                report["ran"] = sorted(ran)
                report["modules"] = sorted(n for n in loaded if n.startswith("pitrio"))
                report["classes"] = sorted(classes)
            import json

            with open(out, "w", encoding="utf-8") as file:
                json.dump(report, file)
            os._exit(0)
        return written

    os.write = first_write
    if census:
        sys.setprofile(hook)
    from pitrio._preparse import start_for

    start_for(argv)
    import pitrio.transports.cli as cli
    import pitrio.transports.rpc.process  # noqa: F401

    marks["imported"] = time.process_time()
    cli.main(argv)


def run_once(census: bool, argv: list[str], config: bool) -> dict[str, Any]:
    """One start in a fresh agent directory; its report (and the census's import lines)."""
    import json
    import re
    import shutil
    import subprocess
    from pathlib import Path

    from bench.cold_start_ab import sandbox

    root, env = sandbox("start-needs-", config)
    try:
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
        out = root / "report.json"
        flags = ["-X", "importtime"] if census else []
        kind = "census" if census else "clean"
        command = [sys.executable, *flags, __file__, "--child", kind, str(out), *argv]
        done = subprocess.run(
            command, input=GET_STATE, capture_output=True, cwd=root / "work", env=env
        )
        if not out.exists():
            raise SystemExit(done.stderr.decode(errors="replace")[-2000:])
        report: dict[str, Any] = json.loads(out.read_text())
        report["imports"] = {
            m.group(2): int(m.group(1)) / 1000
            for m in re.finditer(IMPORT_LINE, done.stderr.decode(errors="replace"))
        }
        return report
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _owner(qualified: str, modules: set[str]) -> str | None:
    """The module of the class named ``qualified`` (its module's name, then its qualified
    name): the longest leading part that is one of ``modules``."""
    parts = qualified.split(".")
    for end in range(len(parts) - 1, 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def summary(census: dict[str, Any], clean: list[dict[str, Any]]) -> dict[str, Any]:
    """The census's counts and the clean runs' medians (ms of CPU)."""
    import statistics

    used, ran = set(census["classes"]), set(census["ran"])
    modules = census["modules"]
    loaded = set(modules)
    own = {m: ms for m, ms in census["imports"].items() if m.startswith("pitrio")}
    idle = [m for m in modules if m not in ran]

    def median(values: list[float]) -> float:
        return round(statistics.median(values) * 1000, 1)

    return {
        "modules": len(modules),
        "modules_run": len(ran & set(modules)),
        "import_share_of_modules_not_run": round(
            sum(own.get(m, 0) for m in idle) / max(sum(own.values()), 1e-9), 3
        ),
        "classes": len(census["builds"]),
        "classes_used": len(used & set(census["builds"])),
        "cpu_ms": {
            "ready": median([r["marks"]["ready"] for r in clean]),
            "imported": median([r["marks"]["imported"] for r in clean]),
            "answer": median([r["marks"]["answer"] for r in clean]),
            "class_builds": median([sum(r["builds"].values()) for r in clean]),
            "class_builds_unused": median(
                [sum(v for k, v in r["builds"].items() if k not in used) for r in clean]
            ),
            # of which in modules that ran (beyond what leaving the modules not run saves)
            "class_builds_unused_in_modules_run": median(
                [
                    sum(
                        v
                        for k, v in r["builds"].items()
                        if k not in used and _owner(k, loaded) in ran
                    )
                    for r in clean
                ]
            ),
        },
        # (module, its own import ms under the census's hooks): the largest of those not run
        "largest_not_run": [
            (m, own.get(m, 0)) for m in sorted(idle, key=lambda m: -own.get(m, 0))[:15]
        ],
    }


def main() -> None:
    """Command line: see the module's docstring."""
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2] == "census", sys.argv[3], sys.argv[4:])
        return
    import argparse
    import json
    from pathlib import Path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--session", type=Path, help="resume this file (else a new session)")
    parser.add_argument("--config", action="store_true", help="the harness's models.json")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    argv = ["--mode", "rpc"]
    if args.session is not None:
        argv += ["--session", str(args.session.resolve())]
    load = os.getloadavg()
    census = run_once(True, argv, args.config)
    clean = [run_once(False, argv, args.config) for _ in range(args.runs)]
    result = summary(census, clean) | {"load": [*load, *os.getloadavg()]}
    text = json.dumps(result, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
