"""``docs/configuration.md`` against the code: every JSON example loads through pitrio's own
loaders, every settings key the code knows is documented, every environment variable the
package reads is documented."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import orjson
import pytest

from pitrio.actors.model_router.actor import ModelRouter, RouterConfig
from pitrio.actors.model_router.auth_file import load_auth_file
from pitrio.actors.model_router.catalogue import PROVIDER_ENV_VARS
from pitrio.actors.session.resources.settings import SCHEMA, validate_settings

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "configuration.md"

_BLOCK = re.compile(r"(?:<!-- check: (?P<kind>[\w.]+) -->\n)?```json\n(?P<body>.*?)```", re.S)
KINDS = ("models.json", "auth.json", "settings.json")

NOT_ENVIRONMENT = {
    "F_SETPIPE_SZ": "an fcntl constant looked up by name",
    "MAX_TOKENS": "a Gemini finish reason",
    "FETCH_HEAD": "git's name of the commit a fetch brought",
    "SC_OPEN_MAX": "a sysconf name looked up by name",
}
"""Upper-case names in the package that look like variables but are not read from the
environment."""


def json_blocks(text: str) -> list[tuple[str | None, str]]:
    """Every ```json block of ``text`` with the kind its ``<!-- check: ... -->`` line names."""
    return [(m.group("kind"), m.group("body")) for m in _BLOCK.finditer(text)]


def check_models_json(body: str, agent: Path, env: dict[str, str] | None = None) -> list[str]:
    """Load ``body`` as the agent dir's ``models.json`` the way a pitrio process does; every
    model it declares (and every built-in it overrides) must resolve and be usable with the
    providers' keys set. Returns the refs checked; raises AssertionError on any problem."""
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "models.json").write_text(body)
    if env is None:
        env = {name: "test-key" for names in PROVIDER_ENV_VARS.values() for name in names}
        env["VLLM_API_KEY"] = "test-key"
    router = ModelRouter.from_config(RouterConfig(agent_dir=agent, env=env))
    assert router.problems() == (), router.problems()
    refs = []
    for provider, entry in orjson.loads(body)["providers"].items():
        ids = [model["id"] for model in entry.get("models", [])]
        ids += list(entry.get("modelOverrides", {}))
        for model_id in ids:
            model = router.registry.resolve(f"{provider}/{model_id}")
            assert router.availability(model) is None, (model.ref, router.availability(model))
            refs.append(model.ref)
        base_url = entry.get("baseUrl")
        if base_url is not None:
            assert all(
                m.base_url == base_url for m in router.registry.list() if m.provider == provider
            )
    assert refs, "an example that declares no model checks nothing"
    return refs


def check_block(kind: str | None, body: str, work: Path) -> None:
    """Check one documented block as the file it says it is."""
    assert kind in KINDS, f"a json block without a known check line: {body[:60]!r}"
    if kind == "models.json":
        check_models_json(body, work / "agent")
    elif kind == "auth.json":
        path = work / "auth.json"
        path.write_text(body)
        path.chmod(0o600)
        entries = load_auth_file(path)
        assert set(entries) == set(orjson.loads(body))
    else:
        values, problems = validate_settings(orjson.loads(body), "settings.json")
        assert problems == (), problems
        assert set(values) == set(orjson.loads(body))


BLOCKS = json_blocks(DOC.read_text(encoding="utf-8"))


def test_the_doc_has_examples_of_each_file() -> None:
    kinds = [kind for kind, _ in BLOCKS]
    assert kinds.count("models.json") >= 5
    assert "auth.json" in kinds and "settings.json" in kinds


@pytest.mark.parametrize(
    ("kind", "body"), BLOCKS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(BLOCKS)]
)
def test_every_json_example_loads(kind: str | None, body: str, tmp_path: Path) -> None:
    check_block(kind, body, tmp_path)


def test_a_wrong_example_is_caught(tmp_path: Path) -> None:
    """The checks fail on the mistakes a doc could make."""
    wrong_api = (
        '{"providers": {"x": {"baseUrl": "http://h/v1", "api": "openai", "models": [{"id": "m"}]}}}'
    )
    # pi 1.6.0 loads any api name; a model of one pitrio has no adapter for is not usable.
    with pytest.raises(AssertionError, match="no adapter for api openai"):
        check_models_json(wrong_api, tmp_path / "a")
    no_base = '{"providers": {"x": {"api": "openai-completions", "models": [{"id": "m"}]}}}'
    with pytest.raises(AssertionError, match="baseUrl"):
        check_models_json(no_base, tmp_path / "b")
    builtin = '{"providers": {"openai": {"models": [{"id": "m"}]}}}'
    assert check_models_json(builtin, tmp_path / "c") == ["openai/m"]
    with pytest.raises(AssertionError, match="no API key for provider openai"):
        check_models_json(builtin, tmp_path / "d", env={})
    keyed = '{"providers": {"v": {"baseUrl": "http://h/v1", "api": "openai-completions", '
    keyed += '"apiKey": "$UNSET_VARIABLE", "models": [{"id": "m"}]}}}'
    # pi 1.6.0: a key naming an unset variable is no key (the model is not listed).
    with pytest.raises(AssertionError, match="no API key for provider v"):
        check_models_json(keyed, tmp_path / "e")
    assert check_models_json(keyed, tmp_path / "f", env={"UNSET_VARIABLE": "k"}) == ["v/m"]
    with pytest.raises(AssertionError):
        check_block("settings.json", '{"retry": {"maxRetries": "five"}}', tmp_path)
    with pytest.raises(AssertionError, match="without a known check line"):
        check_block(None, "{}", tmp_path)


def test_every_settings_key_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    own = ("session.store", "extensionHandlerTimeoutMs")
    missing = [key for key in (*SCHEMA, *own) if f"`{key}`" not in text]
    assert not missing, f"settings keys missing from {DOC.name}: {missing}"


def environment_names(package: Path) -> dict[str, set[str]]:
    """Names of environment variables the package's source mentions: upper-case string
    constants with an underscore (``PITRIO_AGENT_DIR``) that are not names of Python objects
    of the package, and the literal names given to ``os.environ``/``os.getenv``."""
    pattern = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
    constants: dict[str, set[str]] = {}
    identifiers: set[str] = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = str(path.relative_to(package.parent))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if pattern.match(node.value):
                    constants.setdefault(node.value, set()).add(where)
            elif isinstance(node, ast.Name):
                identifiers.add(node.id)
            elif isinstance(node, ast.Attribute):
                identifiers.add(node.attr)
            elif isinstance(node, ast.alias):
                identifiers.add(node.asname or node.name.rsplit(".", 1)[-1])
            if isinstance(node, ast.Call) and node.args:
                func = ast.unparse(node.func)
                first = node.args[0]
                if func in ("os.getenv", "os.environ.get", "os.environ.pop") and isinstance(
                    first, ast.Constant
                ):
                    constants.setdefault(str(first.value), set()).add(where)
            if (
                isinstance(node, ast.Subscript)
                and ast.unparse(node.value) == "os.environ"
                and isinstance(node.slice, ast.Constant)
            ):
                constants.setdefault(str(node.slice.value), set()).add(where)
    return {name: files for name, files in constants.items() if name not in identifiers}


def test_every_environment_variable_is_documented() -> None:
    found = environment_names(ROOT / "pitrio")
    assert "PITRIO_AGENT_DIR" in found  # the scan works
    # The providers' key and credential variables live in the catalogue's data, not the code.
    from pitrio.actors.model_router import catalogue

    for provider, names in catalogue.provider_env_vars().items():
        for name in names:
            found.setdefault(name, set()).add(f"catalogue.json ({provider})")
    for info in catalogue.providers():
        for names in info.ambient:
            for name in names:
                found.setdefault(name, set()).add(f"catalogue.json ({info.name})")
    assert "OPENAI_API_KEY" in found and "AWS_PROFILE" in found
    text = DOC.read_text(encoding="utf-8")
    missing = {
        name: sorted(files)
        for name, files in found.items()
        if name not in NOT_ENVIRONMENT and f"`{name}`" not in text
    }
    assert not missing, f"environment variables missing from {DOC.name}: {missing}"


def test_the_scan_finds_a_new_variable(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text(
        "import os\nNAME = 'PITRIO_NEW_THING'\nx = os.environ.get(NAME)\n"
        "y = os.getenv('lower_case_too')\nz = os.environ['HOME']\nCONSTANT_NAME = 1\n"
        "w = 'CONSTANT_NAME'\n"
    )
    assert set(environment_names(package)) == {"PITRIO_NEW_THING", "lower_case_too", "HOME"}


async def test_the_local_server_example_answers_a_prompt(tmp_path: Path) -> None:
    """The Ollama entry of the local-servers example, pointed at the mock LLM on loopback
    (same protocol), gets a real reply through ``pitrio -p`` with no key anywhere."""
    import sys

    import trio

    from tests.faults.mock_llm import mock_llm

    (local,) = [body for kind, body in BLOCKS if kind == "models.json" and '"ollama"' in body]
    script = {"default": {"kind": "text", "text": "hello from the local model"}}
    async with mock_llm(script, tmp_path) as port:
        agent = tmp_path / "agent"
        agent.mkdir()
        (agent / "models.json").write_text(local.replace("127.0.0.1:11434", f"127.0.0.1:{port}"))
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
        env["PITRIO_AGENT_DIR"] = str(agent)
        pitrio = str(Path(sys.executable).parent / "pitrio")
        result = await trio.run_process(
            [pitrio, "--no-session", "--model", "ollama/qwen2.5-coder:7b", "-p", "hi"],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=env,
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().strip() == "hello from the local model"
